//! Pinned host memory on an OpenCL device: `CL_MEM_ALLOC_HOST_PTR` buffers, mapped once for
//! their whole life, which drivers back with page-locked memory (NVIDIA documents this as the way
//! to get pinned memory in OpenCL). A copy between such memory and a device buffer runs by DMA at
//! full PCIe speed; a copy from ordinary (pageable) memory goes through a driver bounce buffer at
//! a fraction of it. The device keeps the address ranges of the blocks it handed out, so the
//! engine can tell a pinned slice (copy it directly) from a pageable one (stage it first).

use super::device::SharedDevice;
use crate::fft::host_memory::{PinnedAlloc, PinnedBlock};
use crate::setup_log::{timed, What};
use opencl3::command_queue::CommandQueue;
use opencl3::memory::{
    Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE,
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
            if let Ok(q) = map_queue(&self.dev) {
                // SAFETY: `ptr` is the mapping of `buf` made in `alloc`, unmapped once, here; the
                // block that handed out slices of it is being dropped, so no slice outlives the
                // unmap.
                let _ = unsafe {
                    let ptr = self.ptr as *mut std::ffi::c_void;
                    q.enqueue_unmap_mem_object(buf.get(), ptr, &[])
                };
                let _ = q.finish();
            }
            drop(buf); // releases the memory
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
    /// A mapped pinned block of `len` values (at least one), zeroed.
    fn alloc_block<T: Copy + Default + Send + Sync + 'static>(
        &self,
        len: usize,
    ) -> Result<PinnedBlock<T>, String> {
        let dev = &self.0;
        let len = len.max(1);
        let bytes = len * std::mem::size_of::<T>();
        let q = map_queue(dev)?;
        // SAFETY: the runtime allocates the host memory itself (ALLOC_HOST_PTR, null host
        // pointer): nothing of ours is aliased.
        let buf = unsafe {
            Buffer::<T>::create(
                &dev.context,
                CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE,
                len,
                std::ptr::null_mut(),
            )
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
                // SAFETY: `raw` is this buffer's mapping from just above, never handed out.
                let _ = unsafe { q.enqueue_unmap_mem_object(buf.get(), raw, &[]) };
                let _ = q.finish();
            }
            return Err("mapping pinned host memory returned an unusable pointer".into());
        }
        // initialise every value once, so the block can be read as a slice from the start
        for i in 0..len {
            // SAFETY: the mapping covers `len` values.
            unsafe { ptr.add(i).write(T::default()) };
        }
        dev.pinned.add(ptr as usize, ptr as usize + bytes);
        tracing::debug!(bytes, device = %dev.info.name, "pinned host block allocated");
        let mapping = Mapping {
            dev: dev.clone(),
            buf: Some(buf),
            ptr,
        };
        // SAFETY: `len` initialised values at `ptr`, mapped until `mapping` drops.
        Ok(unsafe { PinnedBlock::new(ptr, len, Box::new(mapping)) })
    }
}
