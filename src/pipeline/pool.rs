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

    /// Returns a buffer for reuse (dropped if the pool is full, or if it is ordinary memory in a
    /// pool of pinned buffers: small rows made by the averaging stage must not replace them).
    pub fn give(&self, buf: HostBuf<T>) {
        if self.pinned.is_some() && !buf.is_pinned() {
            return;
        }
        let _ = self.tx.try_send(buf);
    }
}

/// Recycles the encode stage's byte buffers (one per batch, returned by the sink once written),
/// for the same reason as `BufferPool`.
pub struct BytePool {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
}

impl BytePool {
    /// Keeps at most `capacity` spare buffers.
    pub fn new(capacity: usize) -> Self {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        BytePool { tx, rx }
    }

    /// An empty buffer (with the room of a spent one when there is one).
    pub fn take(&self) -> Vec<u8> {
        let mut buf = self.rx.try_recv().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Returns a buffer for reuse (dropped if the pool is full).
    pub fn give(&self, buf: Vec<u8>) {
        let _ = self.tx.try_send(buf);
    }
}
