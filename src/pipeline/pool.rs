//! Recycles the large per-batch buffers (packed frames, finished spectra). Without it every batch
//! would allocate and free a megabyte-sized block, which glibc serves with mmap/munmap: tens of
//! thousands of page faults per second and a pipeline that waits on the kernel. When an engine
//! has pinned host memory (`Engine::pinned_memory`), the buffers are pinned, so the device copies
//! batches in and spectra out by DMA with no staging copy.

use crate::fft::{HostBuf, PinnedMemory};
use crossbeam_channel::{Receiver, Sender};

pub struct BufferPool<T> {
    tx: Sender<HostBuf<T>>,
    rx: Receiver<HostBuf<T>>,
    pinned: Option<PinnedMemory<T>>,
}

impl<T: Copy + Default> BufferPool<T> {
    /// Keeps at most `capacity` spare buffers; new ones come from `pinned` when given.
    pub fn new(capacity: usize, pinned: Option<PinnedMemory<T>>) -> Self {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        BufferPool { tx, rx, pinned }
    }

    /// An empty buffer with room for at least `len` values.
    pub fn take(&self, len: usize) -> HostBuf<T> {
        let mut buf = match self.rx.try_recv() {
            // a pinned block cannot grow: a too-small one is released and replaced
            Ok(b) if b.capacity() >= len || !b.is_pinned() => b,
            _ => HostBuf::with_capacity(len, self.pinned.as_ref()),
        };
        buf.clear();
        buf
    }

    /// Returns a buffer for reuse (dropped if the pool is full).
    pub fn give(&self, buf: HostBuf<T>) {
        let _ = self.tx.try_send(buf);
    }
}
