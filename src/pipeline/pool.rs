//! Recycles the large per-batch buffers (packed frames, finished spectra). Without it every batch
//! would allocate and free a megabyte-sized block, which glibc serves with mmap/munmap: tens of
//! thousands of page faults per second and a pipeline that waits on the kernel.

use crossbeam_channel::{Receiver, Sender};

pub struct BufferPool<T> {
    tx: Sender<Vec<T>>,
    rx: Receiver<Vec<T>>,
}

impl<T> BufferPool<T> {
    /// Keeps at most `capacity` spare buffers.
    pub fn new(capacity: usize) -> Self {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        BufferPool { tx, rx }
    }

    /// A cleared buffer with room for at least `len` values.
    pub fn take(&self, len: usize) -> Vec<T> {
        let mut v = self.rx.try_recv().unwrap_or_default();
        v.clear();
        v.reserve(len);
        v
    }

    /// Returns a buffer for reuse (dropped if the pool is full).
    pub fn give(&self, v: Vec<T>) {
        let _ = self.tx.try_send(v);
    }
}
