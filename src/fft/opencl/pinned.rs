//! Pinned host memory on an OpenCL device. A copy between page-locked memory and a device buffer
//! runs by DMA at full PCIe speed; a copy from ordinary (pageable) memory goes through a driver
//! bounce buffer at a fraction of it. A block is memory this process maps itself (`HostPages`:
//! anonymous, huge pages where the kernel gives them, every page touched here) handed to the
//! driver as a `CL_MEM_USE_HOST_PTR` buffer mapped once for its whole life, which NVIDIA's driver
//! pins in place; a driver that maps such a buffer elsewhere gets a `CL_MEM_ALLOC_HOST_PTR`
//! buffer instead, the memory it allocates and pins itself. On an H200 (session 33, docs/perf.md)
//! the first way pinned 152 MiB in 33 ms (24 ms of it faulting and zeroing pages on the caller's
//! thread, outside the driver) where the second took 72–105 ms inside it, and NVIDIA's driver
//! holds up every other call of the process while it pins; copies ran at 54 GB/s from both. The
//! device keeps the address ranges of the blocks it handed out, so the engine can tell a pinned
//! slice (copy it directly) from a pageable one (stage it first).

use super::device::SharedDevice;
use crate::fft::host_memory::{PinnedAlloc, PinnedBlock};
use crate::setup_log::{timed, What};
use opencl3::command_queue::CommandQueue;
use opencl3::memory::{
    Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE,
    CL_MEM_USE_HOST_PTR,
};
use opencl3::types::CL_BLOCKING;
use std::sync::{Arc, Mutex, OnceLock};

/// The address ranges (start, end) of the pinned blocks alive on one device, and the queue that
/// maps and unmaps them.
#[derive(Default)]
pub(crate) struct PinnedRegistry {
    ranges: Mutex<Vec<(usize, usize)>>,
    queue: OnceLock<Result<CommandQueue, String>>,
}

impl PinnedRegistry {
    /// Whether `bytes` bytes from `ptr` lie inside one pinned block of this device.
    pub(crate) fn contains(&self, ptr: *const u8, bytes: usize) -> bool {
        let (a, b) = (ptr as usize, ptr as usize + bytes);
        self.ranges
            .lock()
            .map(|r| r.iter().any(|&(s, e)| s <= a && b <= e))
            .unwrap_or(false)
    }

    fn add(&self, start: usize, end: usize) {
        if let Ok(mut r) = self.ranges.lock() {
            r.push((start, end));
        }
    }

    fn remove(&self, start: usize) {
        if let Ok(mut r) = self.ranges.lock() {
            r.retain(|&(s, _)| s != start);
        }
    }
}

/// Hands out pinned blocks of one device (what `OpenClEngine::pinned_memory` returns).
pub(crate) struct DevicePinned(pub Arc<SharedDevice>);

fn map_queue(dev: &SharedDevice) -> Result<&CommandQueue, String> {
    dev.pinned
        .queue
        .get_or_init(|| {
            // SAFETY: `dev.device` belongs to `dev.context`; no properties are asked for.
            unsafe { CommandQueue::create_with_properties(&dev.context, dev.device.id(), 0, 0) }
                .map_err(|e| format!("cannot create a command queue on {}: {e}", dev.info.name))
        })
        .as_ref()
        .map_err(|e| e.clone())
}

/// One mapped buffer; unmapping it (and forgetting its range) is its `Drop`.
struct Mapping<T> {
    dev: Arc<SharedDevice>,
    /// Taken (unmapped and released) on drop.
    buf: Option<Buffer<T>>,
    ptr: *mut T,
    /// The memory a `CL_MEM_USE_HOST_PTR` buffer uses, unmapped after the buffer is released.
    pages: Option<HostPages>,
}

// SAFETY: the mapping is owned by one `PinnedBlock`; the pointer is only dereferenced through it.
unsafe impl<T: Send> Send for Mapping<T> {}
// SAFETY: as for Send: shared access goes through `PinnedBlock`'s `&self` methods only.
unsafe impl<T: Sync> Sync for Mapping<T> {}

impl<T> Drop for Mapping<T> {
    fn drop(&mut self) {
        self.dev.pinned.remove(self.ptr as usize);
        let Some(buf) = self.buf.take() else {
            return;
        };
        let bytes = match crate::setup_log::enabled() {
            true => buf.size().unwrap_or(0) as u64,
            false => 0,
        };
        let release = || {
            // SAFETY: `ptr` is the mapping of `buf` made in `alloc_block`, unmapped once, here;
            // the block that handed out slices of it is being dropped, so no slice outlives it.
            unsafe { unmap_and_release(&self.dev, buf, self.ptr) };
            drop(self.pages.take()); // the memory the buffer used, if it was ours
        };
        let device = || self.dev.info.address();
        timed(What::PinnedRelease, device, (1, bytes), release);
    }
}

impl<T: Copy + Default + Send + Sync + 'static> PinnedAlloc<T> for DevicePinned {
    fn alloc(&self, len: usize) -> Result<PinnedBlock<T>, String> {
        let bytes = (len.max(1) * std::mem::size_of::<T>()) as u64;
        let device = || self.0.info.address();
        timed(What::PinnedAlloc, device, (1, bytes), || {
            self.alloc_block(len)
        })
    }

    fn owns(&self, block: &PinnedBlock<T>) -> bool {
        let values = block.as_slice();
        self.0
            .pinned
            .contains(values.as_ptr().cast(), std::mem::size_of_val(values))
    }
}

impl DevicePinned {
    /// A mapped pinned block of `len` values (at least one), zeroed: the process's own pages
    /// where the driver pins them in place, else memory the driver allocates.
    fn alloc_block<T: Copy + Default + Send + Sync + 'static>(
        &self,
        len: usize,
    ) -> Result<PinnedBlock<T>, String> {
        let len = len.max(1);
        let bytes = len * std::mem::size_of::<T>();
        let pages = HostPages::new(bytes)?;
        // every page faulted and zeroed here, on the caller's thread, before the driver sees it
        initialise(pages.ptr.cast::<T>(), len);
        let host = pages.ptr.cast::<T>();
        // SAFETY: `host` points to `bytes` bytes of `pages`, which outlive the buffer (the
        // `Mapping` drops them after releasing it, `unmap` before they are dropped here) and
        // which nothing else uses.
        let made = unsafe { self.mapped::<T>(len, CL_MEM_USE_HOST_PTR, host) };
        match made {
            Ok(made) if made.1 == host => return Ok(self.block(made, len, Some(pages))),
            // mapped elsewhere: the driver keeps its own copy, so the pages are not what crosses
            // SAFETY: that buffer's mapping, never handed out.
            Ok((buf, ptr)) => unsafe { unmap_and_release(&self.0, buf, ptr) },
            Err(e) => tracing::debug!("the driver did not take fftd's own pages: {e}"),
        }
        drop(pages);
        // SAFETY: a null host pointer: the runtime allocates the memory itself.
        let made = unsafe { self.mapped::<T>(len, CL_MEM_ALLOC_HOST_PTR, std::ptr::null_mut()) }?;
        initialise(made.1, len);
        Ok(self.block(made, len, None))
    }

    /// A buffer of `len` values made with `flags` over `host` (null: memory the runtime
    /// allocates), and its whole mapping, checked for null and alignment.
    ///
    /// # Safety
    /// A non-null `host` must point to `len` values that stay valid and unused by anything else
    /// until the buffer is released.
    unsafe fn mapped<T>(
        &self,
        len: usize,
        flags: u64,
        host: *mut T,
    ) -> Result<(Buffer<T>, *mut T), String> {
        let dev = &self.0;
        let bytes = len * std::mem::size_of::<T>();
        let q = map_queue(dev)?;
        // SAFETY: the caller's contract for `host`; null makes the runtime allocate.
        let buf = unsafe {
            Buffer::<T>::create(&dev.context, flags | CL_MEM_READ_WRITE, len, host.cast())
        }
        .map_err(|e| format!("cannot allocate {bytes} bytes of pinned host memory: {e}"))?;
        let mut raw: opencl3::types::cl_mem = std::ptr::null_mut();
        // SAFETY: a blocking map of the whole buffer (`bytes`), written to `raw`, which is
        // checked for null and alignment before use.
        unsafe {
            q.enqueue_map_buffer(
                &buf,
                CL_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                bytes,
                &mut raw,
                &[],
            )
        }
        .map_err(|e| format!("cannot map pinned host memory: {e}"))?;
        let ptr = raw as *mut T;
        if ptr.is_null() || (ptr as usize) % std::mem::align_of::<T>() != 0 {
            if !ptr.is_null() {
                // SAFETY: this buffer's mapping, never handed out.
                unsafe { unmap_and_release(dev, buf, ptr) };
            }
            return Err("mapping pinned host memory returned an unusable pointer".into());
        }
        Ok((buf, ptr))
    }

    /// The block over a buffer's mapping of `len` initialised values, its range registered.
    fn block<T: Send + Sync + 'static>(
        &self,
        (buf, ptr): (Buffer<T>, *mut T),
        len: usize,
        pages: Option<HostPages>,
    ) -> PinnedBlock<T> {
        let dev = &self.0;
        let bytes = len * std::mem::size_of::<T>();
        dev.pinned.add(ptr as usize, ptr as usize + bytes);
        tracing::debug!(bytes, device = %dev.info.name, own = pages.is_some(), "pinned host block allocated");
        let mapping = Mapping {
            dev: dev.clone(),
            buf: Some(buf),
            ptr,
            pages,
        };
        // SAFETY: `len` initialised values at `ptr`, mapped until `mapping` drops.
        unsafe { PinnedBlock::new(ptr, len, Box::new(mapping)) }
    }
}

/// Unmaps `buf`'s mapping at `ptr` (waiting for the unmap) and releases the buffer, with the
/// memory the runtime allocated for it.
///
/// # Safety
/// `ptr` must be `buf`'s mapping, unmapped nowhere else, and no slice of it used afterwards.
unsafe fn unmap_and_release<T>(dev: &SharedDevice, buf: Buffer<T>, ptr: *mut T) {
    if let Ok(q) = map_queue(dev) {
        // SAFETY: the caller's contract.
        let _ = unsafe { q.enqueue_unmap_mem_object(buf.get(), ptr.cast(), &[]) };
        let _ = q.finish();
    }
    drop(buf);
}

/// Writes `T::default()` to `len` values from `ptr` (which must be valid for them).
fn initialise<T: Copy + Default>(ptr: *mut T, len: usize) {
    for i in 0..len {
        // SAFETY: the callers' memory covers `len` values.
        unsafe { ptr.add(i).write(T::default()) };
    }
}

/// Anonymous memory mapped by this process for a block; unmapped on drop. A block of a huge
/// page or more lies on a huge-page boundary with huge pages asked for (`MADV_HUGEPAGE`: far
/// fewer faults, and fewer pages for the driver to pin); a smaller one (a warm-up's, a few KiB)
/// takes ordinary pages, so it neither maps 2 MiB more than it needs nor takes a huge page.
struct HostPages {
    /// The mapping as made (`len` bytes), which `ptr` lies in.
    base: *mut libc::c_void,
    len: usize,
    /// The block's first byte: `base`, rounded up to `HUGE_PAGE` for a block of huge pages.
    ptr: *mut u8,
}

/// The huge page size on x86-64 and most of arm64's kernels.
const HUGE_PAGE: usize = 2 << 20;

// SAFETY: the mapping is owned by one `Mapping`, used only through its block.
unsafe impl Send for HostPages {}
// SAFETY: as for Send.
unsafe impl Sync for HostPages {}

impl HostPages {
    /// At least `bytes` bytes, zeroed by the kernel, not yet touched.
    fn new(bytes: usize) -> Result<Self, String> {
        let huge = bytes >= HUGE_PAGE;
        let len = match huge {
            true => bytes + HUGE_PAGE,
            false => bytes.max(1),
        };
        // SAFETY: a new private anonymous mapping; no existing memory is named.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(format!("cannot map {bytes} bytes of host memory: {e}"));
        }
        let ptr = match huge {
            true => (base as usize).next_multiple_of(HUGE_PAGE) as *mut u8,
            false => base.cast::<u8>(),
        };
        // SAFETY: advice on this mapping only. Huge pages: failing (none configured) leaves
        // small pages, which work the same, slower to fault. Not forked: the kernel copies
        // pinned pages into a forked child at once, and the exit forks one
        // (`left_behind::exit`): 180–200 ms of a hop 512 run's exit for 152 MiB (H200, session
        // 33) where the child needs none of them.
        unsafe {
            if huge {
                libc::madvise(base, len, libc::MADV_HUGEPAGE);
            }
            libc::madvise(base, len, libc::MADV_DONTFORK);
        }
        Ok(HostPages { base, len, ptr })
    }
}

impl Drop for HostPages {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; the buffer that used it is released.
        unsafe { libc::munmap(self.base, self.len) };
    }
}
