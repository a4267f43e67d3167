//! Recycles the large per-batch buffers (packed frames, finished spectra). Without it every batch
//! would allocate and free a megabyte-sized block, which glibc serves with mmap/munmap: tens of
//! thousands of page faults per second and a pipeline that waits on the kernel.
//!
//! Buffers live in homes, one per lane of the FFT stage (`dispatch`): a lane whose device has
//! pinned host memory (`Engine::pinned_memory`) gets pinned buffers of that device, so it copies
//! batches in and spectra out by DMA with no staging copy; other lanes get heap buffers. A
//! buffer given back goes to the spares of the device that pinned it (whichever lane used it
//! last), so one device's blocks never end up serving another.

use crate::fft::{HostBuf, PinnedMemory};
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::RwLock;

/// Threads that make a late lane's first pinned buffers (`BufferPool::premade`), and the rest
/// while it works (`BufferPool::fill`: fewer, as the other lanes need the cores meanwhile).
const PREMAKE_THREADS: usize = 4;
const FILL_THREADS: usize = 2;

/// Spare buffers of one kind of memory.
struct Spares<T> {
    tx: Sender<HostBuf<T>>,
    rx: Receiver<HostBuf<T>>,
}

impl<T> Spares<T> {
    fn new(capacity: usize) -> Self {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        Spares { tx, rx }
    }
}

/// One device's pinned memory and its spare blocks.
struct PinnedHome<T> {
    memory: PinnedMemory<T>,
    spares: Spares<T>,
    /// While its blocks are still being made (a lane that joined a running pipeline,
    /// `fill`): a buffer it has no spare for is heap memory, not a pinned block made on the
    /// spot (the engine stages those copies; nothing waits for a pinned allocation).
    filling: AtomicBool,
}

/// The run's two pools: batches' sample buffers (filled by the producers, read by the FFT
/// workers) and their spectra buffers (filled by the workers, read by the encoders and the
/// sink).
pub(crate) struct Pools<T> {
    pub samples: BufferPool<T>,
    pub spectra: BufferPool<T>,
}

impl<T: Copy + Default> Pools<T> {
    /// Each pool keeps at most `capacity` spare buffers per home.
    pub(crate) fn new(capacity: usize) -> Self {
        Pools {
            samples: BufferPool::new(capacity),
            spectra: BufferPool::new(capacity),
        }
    }
}

pub(crate) struct BufferPool<T> {
    /// Spare buffers per home.
    capacity: usize,
    /// Per lane (index = lane id): its pinned home, or None for heap memory.
    homes: RwLock<Vec<Option<PinnedHome<T>>>>,
    heap: Spares<T>,
    /// The largest buffer taken so far (values): the size a late lane's buffers are made.
    largest: AtomicUsize,
}

impl<T: Copy + Default> BufferPool<T> {
    /// Keeps at most `capacity` spare buffers per home. Lanes get homes with `add_lane`.
    pub(crate) fn new(capacity: usize) -> Self {
        BufferPool {
            capacity,
            homes: RwLock::new(Vec::new()),
            heap: Spares::new(capacity),
            largest: AtomicUsize::new(0),
        }
    }

    /// Gives lane `lane` its home: buffers pinned by `pinned`, or heap buffers for None.
    #[cfg(test)]
    pub(crate) fn add_lane(&self, lane: usize, pinned: Option<PinnedMemory<T>>) {
        self.add_lane_with(lane, pinned, Vec::new(), false);
    }

    /// `add_lane` with spare buffers made beforehand (`premade`); `filling`: more are being
    /// made (`fill`), and until then the lane's misses get heap buffers.
    pub(crate) fn add_lane_with(
        &self,
        lane: usize,
        pinned: Option<PinnedMemory<T>>,
        spares: Vec<HostBuf<T>>,
        filling: bool,
    ) {
        if let Ok(mut homes) = self.homes.write() {
            if homes.len() <= lane {
                homes.resize_with(lane + 1, || None);
            }
            homes[lane] = pinned.map(|memory| PinnedHome {
                memory,
                spares: Spares::new(self.capacity.max(spares.len())),
                filling: AtomicBool::new(filling),
            });
            if let Some(home) = &homes[lane] {
                for buf in spares {
                    let _ = home.spares.tx.try_send(buf);
                }
            }
        }
    }

    /// Up to `count` pinned buffers of `memory`, each the size of the largest buffer taken or
    /// expected so far (`expect`; none before either), made on a few threads; stops early when `stop` says
    /// so. For a lane that joins a running pipeline: its readers and workers then find
    /// buffers ready instead of waiting for a pinned allocation each (issue 23).
    pub(crate) fn premade(
        &self,
        memory: &PinnedMemory<T>,
        count: usize,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Vec<HostBuf<T>>
    where
        T: Send,
    {
        self.made_on(PREMAKE_THREADS, memory, count, stop)
    }

    fn made_on(
        &self,
        threads: usize,
        memory: &PinnedMemory<T>,
        count: usize,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Vec<HostBuf<T>>
    where
        T: Send,
    {
        let len = self.largest.load(Ordering::Relaxed);
        if len == 0 {
            return Vec::new();
        }
        let count = count.min(self.capacity);
        let threads = threads.min(count);
        std::thread::scope(|scope| {
            let making: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        let mine = (t..count).step_by(threads.max(1));
                        mine.take_while(|_| !stop())
                            .map(|_| HostBuf::with_capacity(len, Some(memory)))
                            .filter(HostBuf::is_pinned)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            making
                .into_iter()
                .flat_map(|t| t.join().unwrap_or_default())
                .collect()
        })
    }

    /// Makes up to `count` more pinned buffers for lane `lane` (`premade`) while the lane
    /// already works, hands them to its spares, and ends its `filling`.
    pub(crate) fn fill(&self, lane: usize, count: usize, stop: &(dyn Fn() -> bool + Sync))
    where
        T: Send,
    {
        let memory = match self.homes.read() {
            Ok(homes) => homes
                .get(lane)
                .and_then(|h| Some(h.as_ref()?.memory.clone())),
            Err(_) => None,
        };
        if let Some(memory) = memory {
            for buf in self.made_on(FILL_THREADS, &memory, count, stop) {
                self.give(buf);
            }
        }
        if let Ok(homes) = self.homes.read() {
            if let Some(Some(home)) = homes.get(lane) {
                home.filling.store(false, Ordering::Relaxed);
            }
        }
    }

    /// Buffers of `len` values will be taken (a device's batches, larger than the CPU
    /// engines' before it joins): a late lane's buffers are made at least this size.
    pub(crate) fn expect(&self, len: usize) {
        self.largest.fetch_max(len, Ordering::Relaxed);
    }

    /// An empty buffer with room for at least `len` values, in lane `lane`'s memory.
    pub(crate) fn take(&self, lane: usize, len: usize) -> HostBuf<T> {
        self.largest.fetch_max(len, Ordering::Relaxed);
        let homes = self.homes.read();
        let home = homes.as_ref().ok().and_then(|h| h.get(lane)?.as_ref());
        let mut buf = match home {
            Some(home) => match home.spares.rx.try_recv() {
                // a pinned block cannot grow: a too-small one is released and replaced
                Ok(b) if b.capacity() >= len => b,
                _ if home.filling.load(Ordering::Relaxed) => self.heap_buffer(len),
                _ => HostBuf::with_capacity(len, Some(&home.memory)),
            },
            None => self.heap_buffer(len),
        };
        buf.clear();
        buf
    }

    fn heap_buffer(&self, len: usize) -> HostBuf<T> {
        (self.heap.rx.try_recv()).unwrap_or_else(|_| HostBuf::heap(len))
    }

    /// Drops every spare buffer (at the run's end: releasing pinned memory takes time).
    pub(crate) fn release_spares(&self) {
        drop(self.take_spares());
    }

    /// Every spare buffer, taken out of the pool (to be left to the process's exit instead of
    /// released one by one: `left_behind::keep`).
    pub(crate) fn take_spares(&self) -> Vec<HostBuf<T>> {
        let mut taken = Vec::new();
        if let Ok(homes) = self.homes.read() {
            for home in homes.iter().flatten() {
                taken.extend(home.spares.rx.try_iter());
            }
        }
        taken.extend(self.heap.rx.try_iter());
        taken
    }

    /// Whether keeping `buf` out of the pool a while costs the workers nothing: a heap buffer,
    /// or a pinned one whose device still has spares waiting (else the next take pins a new
    /// buffer, and the one kept is dropped, unpinned, when it comes back to a full pool).
    pub(crate) fn can_spare(&self, buf: &HostBuf<T>) -> bool {
        let Some(block) = buf.pinned_block() else {
            return true;
        };
        let Ok(homes) = self.homes.read() else {
            return false;
        };
        let home = homes.iter().flatten().find(|h| h.memory.owns(block));
        home.is_some_and(|h| !h.spares.rx.is_empty())
    }

    /// Returns a buffer for reuse: a pinned one to the spares of the device that pinned it, a
    /// heap one to the heap spares when some lane uses heap memory (small rows made by the
    /// averaging stage must not stand in for pinned buffers); dropped when those are full.
    pub(crate) fn give(&self, buf: HostBuf<T>) {
        let Ok(homes) = self.homes.read() else {
            return;
        };
        match buf.pinned_block() {
            Some(block) => {
                let home = homes.iter().flatten().find(|h| h.memory.owns(block));
                if let Some(home) = home {
                    let _ = home.spares.tx.try_send(buf);
                }
            }
            None if homes.iter().any(Option::is_none) => {
                let _ = self.heap.tx.try_send(buf);
            }
            None => {}
        }
    }
}

/// Recycles the encode stage's byte buffers (one per batch, returned by the sink once written),
/// for the same reason as `BufferPool`.
pub(super) struct BytePool {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
}

impl BytePool {
    /// Keeps at most `capacity` spare buffers.
    pub(super) fn new(capacity: usize) -> Self {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        BytePool { tx, rx }
    }

    /// An empty buffer (with the room of a spent one when there is one).
    pub(super) fn take(&self) -> Vec<u8> {
        let mut buf = self.rx.try_recv().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Returns a buffer for reuse (dropped if the pool is full).
    pub(super) fn give(&self, buf: Vec<u8>) {
        let _ = self.tx.try_send(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fft::host_memory::{PinnedAlloc, PinnedBlock};
    use std::sync::{Arc, Mutex};

    /// Pinned memory stand-in: boxed slices, remembered by address.
    #[derive(Default)]
    struct FakeDevice {
        blocks: Mutex<Vec<usize>>,
    }
    impl PinnedAlloc<f32> for FakeDevice {
        fn alloc(&self, len: usize) -> Result<PinnedBlock<f32>, String> {
            let block = crate::fft::host_memory::boxed::block(len);
            if let Ok(mut b) = self.blocks.lock() {
                b.push(block.as_slice().as_ptr() as usize);
            }
            Ok(block)
        }
        fn owns(&self, block: &PinnedBlock<f32>) -> bool {
            let at = block.as_slice().as_ptr() as usize;
            self.blocks.lock().is_ok_and(|b| b.contains(&at))
        }
    }

    #[test]
    fn each_lane_takes_its_own_memory_and_buffers_go_home() {
        let (a, b) = (
            Arc::new(FakeDevice::default()),
            Arc::new(FakeDevice::default()),
        );
        let pool = BufferPool::<f32>::new(4);
        pool.add_lane(0, Some(a.clone() as PinnedMemory<f32>));
        pool.add_lane(1, Some(b.clone() as PinnedMemory<f32>));
        pool.add_lane(2, None);
        let from_a = pool.take(0, 16);
        let from_b = pool.take(1, 16);
        let heap = pool.take(2, 16);
        let home =
            |buf: &HostBuf<f32>, dev: &FakeDevice| buf.pinned_block().is_some_and(|p| dev.owns(p));
        assert!(home(&from_a, &a) && !home(&from_a, &b));
        assert!(home(&from_b, &b));
        assert!(!heap.is_pinned());
        let a_block = from_a
            .pinned_block()
            .map(|p| p.as_slice().as_ptr() as usize);
        // a's block, used by lane 1 (a hand-off), goes back to a's spares, not b's
        pool.give(from_a);
        pool.give(from_b);
        let again_b = pool.take(1, 16);
        assert!(home(&again_b, &b));
        let again_a = pool.take(0, 16);
        assert_eq!(
            again_a
                .pinned_block()
                .map(|p| p.as_slice().as_ptr() as usize),
            a_block
        );
    }

    /// A pinned buffer may wait in the sink only while its device has spares (else a worker
    /// would pin a new one); a heap buffer always may.
    #[test]
    fn a_pinned_buffer_is_spared_only_while_its_device_has_spares() {
        let dev = Arc::new(FakeDevice::default());
        let pool = BufferPool::<f32>::new(4);
        pool.add_lane(0, Some(dev as PinnedMemory<f32>));
        pool.add_lane(1, None);
        let (first, second) = (pool.take(0, 16), pool.take(0, 16));
        assert!(
            !pool.can_spare(&first),
            "no spares: the next take pins anew"
        );
        pool.give(second);
        assert!(pool.can_spare(&first), "a spare waits");
        assert!(pool.can_spare(&pool.take(1, 16)), "heap memory");
    }
}
