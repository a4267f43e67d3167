//! Host memory for batches: ordinary heap memory, or page-locked ("pinned") memory that a device
//! copies to and from by DMA at full PCIe speed. The pipeline packs frames straight into pinned
//! memory that the OpenCL engine hands out (`Engine::pinned_memory`) and the engine reads its
//! results straight into pinned memory, so no host-side staging copy runs on the way to the
//! device or back (docs/perf.md, "Host to host").

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A block of pinned memory: `len` initialised values at `ptr`, released (unmapped) when the
/// block is dropped.
pub struct PinnedBlock<T> {
    ptr: *mut T,
    len: usize,
    /// Keeps the mapping alive; releasing it is its `Drop`.
    _owner: Box<dyn Send + Sync>,
}

// SAFETY: the block owns its `len` values exclusively (see `PinnedBlock::new`); access goes
// through `&self` / `&mut self` like a `Box<[T]>`.
unsafe impl<T: Send> Send for PinnedBlock<T> {}
// SAFETY: as for Send: `&self` gives shared slices only, like `&Box<[T]>`.
unsafe impl<T: Sync> Sync for PinnedBlock<T> {}

impl<T> PinnedBlock<T> {
    /// # Safety
    /// `ptr` must point to `len` initialised values that stay valid, and are used by nothing but
    /// this block, until `owner` is dropped.
    pub unsafe fn new(ptr: *mut T, len: usize, owner: Box<dyn Send + Sync>) -> Self {
        PinnedBlock {
            ptr,
            len,
            _owner: owner,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `new`'s contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: `new`'s contract; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Has `after` dropped when the block is, just after its memory is released (a pool's
    /// count of the blocks alive, `pipeline::pool`), wherever that happens.
    pub(crate) fn drop_with(&mut self, after: Box<dyn Send + Sync>) {
        let owner = std::mem::replace(&mut self._owner, Box::new(()));
        // (a tuple's fields drop in order: the memory, then `after`)
        self._owner = Box::new((owner, after));
    }
}

/// Hands out pinned blocks (one implementation per device kind; OpenCL: `SharedDevice`).
pub trait PinnedAlloc<T>: Send + Sync {
    /// A zeroed pinned block of exactly `len` values.
    fn alloc(&self, len: usize) -> Result<PinnedBlock<T>, String>;

    /// Whether `block` was handed out by this allocator (so a pool of several devices' blocks
    /// can give each back to its own device's spares).
    fn owns(&self, block: &PinnedBlock<T>) -> bool;
}

/// A shared handle to an allocator of pinned memory.
pub(crate) type PinnedMemory<T> = Arc<dyn PinnedAlloc<T>>;

/// A growable buffer of values in heap or pinned memory; dereferences to its `len()` values.
pub struct HostBuf<T> {
    mem: Mem<T>,
    len: usize,
}

enum Mem<T> {
    /// Every value of the `Vec` is initialised; the buffer uses the first `len`.
    Heap(Vec<T>),
    /// Fixed size; turns into `Heap` if asked to hold more.
    Pinned(PinnedBlock<T>),
}

impl<T> HostBuf<T> {
    /// Whether the values are in pinned memory (a device's home), not on the heap.
    pub fn is_pinned(&self) -> bool {
        matches!(self.mem, Mem::Pinned(_))
    }
}

impl<T: Copy + Default> HostBuf<T> {
    /// An empty heap buffer with room for `capacity` values.
    pub fn heap(capacity: usize) -> Self {
        HostBuf {
            mem: Mem::Heap(Vec::with_capacity(capacity)),
            len: 0,
        }
    }

    /// A heap buffer holding `values` (taken as they are, not copied).
    pub fn from_vec(values: Vec<T>) -> Self {
        let len = values.len();
        HostBuf {
            mem: Mem::Heap(values),
            len,
        }
    }

    /// An empty buffer over a pinned block (capacity: the block's length).
    pub fn pinned(block: PinnedBlock<T>) -> Self {
        HostBuf {
            mem: Mem::Pinned(block),
            len: 0,
        }
    }

    /// An empty buffer with room for `capacity` values: pinned when `pinned` gives a block,
    /// heap memory otherwise.
    pub fn with_capacity(capacity: usize, pinned: Option<&PinnedMemory<T>>) -> Self {
        match pinned.map(|p| p.alloc(capacity)) {
            Some(Ok(block)) => HostBuf::pinned(block),
            Some(Err(e)) => {
                super::log_once::info_once(
                    "pinned allocation failed".into(),
                    &format!("pinned host memory unavailable ({e}); batches use heap memory"),
                );
                HostBuf::heap(capacity)
            }
            None => HostBuf::heap(capacity),
        }
    }

    /// The pinned block under the buffer, if it is pinned.
    pub(crate) fn pinned_block(&self) -> Option<&PinnedBlock<T>> {
        match &self.mem {
            Mem::Pinned(b) => Some(b),
            Mem::Heap(_) => None,
        }
    }

    /// `pinned_block`, to change.
    pub(crate) fn pinned_block_mut(&mut self) -> Option<&mut PinnedBlock<T>> {
        match &mut self.mem {
            Mem::Pinned(b) => Some(b),
            Mem::Heap(_) => None,
        }
    }

    /// Values the buffer holds without growing (pinned memory cannot grow in place).
    pub(crate) fn capacity(&self) -> usize {
        match &self.mem {
            Mem::Heap(v) => v.capacity(),
            Mem::Pinned(b) => b.len(),
        }
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Moves a pinned buffer that must grow past its block to heap memory.
    fn make_room(&mut self, len: usize) {
        if let Mem::Pinned(b) = &self.mem {
            if len > b.len() {
                let mut v = Vec::with_capacity(len);
                v.extend_from_slice(&b.as_slice()[..self.len]);
                self.mem = Mem::Heap(v);
            }
        }
    }

    /// Appends `values`.
    pub fn extend_from_slice(&mut self, values: &[T]) {
        let end = self.len + values.len();
        self.make_room(end);
        match &mut self.mem {
            Mem::Heap(v) => {
                if end <= v.len() {
                    v[self.len..end].copy_from_slice(values);
                } else {
                    v.truncate(self.len);
                    v.extend_from_slice(values);
                }
            }
            Mem::Pinned(b) => b.as_mut_slice()[self.len..end].copy_from_slice(values),
        }
        self.len = end;
    }

    /// Makes the buffer `len` values long for a caller that overwrites all of them: values not
    /// written before are zero, others keep what an earlier use left there.
    pub fn set_len_for_overwrite(&mut self, len: usize) {
        self.make_room(len);
        if let Mem::Heap(v) = &mut self.mem {
            if v.len() < len {
                v.resize(len, T::default());
            }
        }
        self.len = len;
    }
}

impl<T> Deref for HostBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.mem {
            Mem::Heap(v) => &v[..self.len],
            Mem::Pinned(b) => &b.as_slice()[..self.len],
        }
    }
}

impl<T> DerefMut for HostBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.mem {
            Mem::Heap(v) => &mut v[..self.len],
            Mem::Pinned(b) => &mut b.as_mut_slice()[..self.len],
        }
    }
}

/// Pinned memory stand-ins for tests: blocks that are boxed slices.
#[cfg(test)]
pub(crate) mod boxed {
    use super::PinnedBlock;

    struct Owned(*mut [f32]);
    // SAFETY: `Owned` only frees its box on drop; the values are reached through the block.
    unsafe impl Send for Owned {}
    // SAFETY: `Owned` has no `&self` method that reads the values.
    unsafe impl Sync for Owned {}
    impl Drop for Owned {
        fn drop(&mut self) {
            // SAFETY: made by Box::into_raw in `block`.
            drop(unsafe { Box::from_raw(self.0) });
        }
    }

    /// A block of `len` zeros in a box of its own, freed with the block.
    pub(crate) fn block(len: usize) -> PinnedBlock<f32> {
        let raw = Box::into_raw(vec![0.0f32; len].into_boxed_slice());
        // SAFETY: the box's values live until `Owned` drops them.
        unsafe { PinnedBlock::new(raw as *mut f32, len, Box::new(Owned(raw))) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned memory stand-in: boxed slices.
    struct BoxAlloc;
    impl PinnedAlloc<f32> for BoxAlloc {
        fn alloc(&self, len: usize) -> Result<PinnedBlock<f32>, String> {
            Ok(boxed::block(len))
        }
        fn owns(&self, _: &PinnedBlock<f32>) -> bool {
            true
        }
    }

    #[test]
    fn heap_and_pinned_buffers_behave_alike() {
        let alloc: PinnedMemory<f32> = Arc::new(BoxAlloc);
        for pinned in [None, Some(&alloc)] {
            let mut b = HostBuf::<f32>::with_capacity(4, pinned);
            assert_eq!(b.is_pinned(), pinned.is_some());
            b.extend_from_slice(&[1.0, 2.0]);
            b.extend_from_slice(&[3.0]);
            assert_eq!(&b[..], &[1.0, 2.0, 3.0]);
            b.clear();
            b.extend_from_slice(&[9.0]);
            assert_eq!(&b[..], &[9.0]);
            b.set_len_for_overwrite(3);
            assert_eq!(&b[..], &[9.0, 2.0, 3.0]);
            b[2] = 7.0;
            // growing past a pinned block moves the values to heap memory
            b.extend_from_slice(&[4.0, 5.0, 6.0]);
            assert_eq!(&b[..], &[9.0, 2.0, 7.0, 4.0, 5.0, 6.0]);
            assert!(!b.is_pinned());
            b.set_len_for_overwrite(8);
            assert_eq!(&b[6..], &[0.0, 0.0]);
        }
    }
}
