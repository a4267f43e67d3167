//! Recycles the large per-batch buffers (packed frames, finished spectra). Without it every batch
//! would allocate and free a megabyte-sized block, which glibc serves with mmap/munmap: tens of
//! thousands of page faults per second and a pipeline that waits on the kernel.
//!
//! Buffers live in homes, one per lane of the FFT stage (`dispatch`): a lane whose device has
//! pinned host memory (`Engine::pinned_memory`) gets pinned buffers of that device, so it copies
//! batches in and spectra out by DMA with no staging copy; other lanes get heap buffers. A
//! buffer given back goes to the spares of the device that pinned it (whichever lane used it
//! last), so one device's blocks never end up serving another.
//!
//! A take never pins memory on the caller's thread (a reader's or an FFT worker's: 4–16 ms per
//! 8 MiB block on an H200, where the device does the batch in 0.3 ms). On NVIDIA's driver,
//! pinning a block holds up every driver call of the process while it pins (session 29), less
//! since blocks are the process's own pages (`fft::opencl::pinned`, session 33). A lane that
//! joins a running pipeline gets a few blocks before it takes batches (`HomeBlocks::FirstFew`,
//! `late_join::JOIN_BLOCKS`), a device named outright none (its batch size is not known before
//! the run), and the rest are made in the background as takes miss them (`top_up`). Either way
//! a device's home has at most `DEVICE_SAMPLE_BLOCKS` and
//! `DEVICE_SPECTRA_BLOCKS` (session 31: a block per reader and per miss had been pinned while the
//! device worked); a take that finds none spare once they are made waits a while for one
//! (`SAMPLES_SPARE_WAIT`, `SPECTRA_SPARE_WAIT`), then gets heap memory, which the engine stages
//! through its own pinned buffers.

use crate::fft::{HostBuf, PinnedMemory};
use crossbeam_channel::{Receiver, Sender};
use misses::Misses;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

mod misses;

/// Threads that make a late lane's first pinned buffers (`BufferPool::premade`).
const PREMAKE_THREADS: usize = 4;

/// The most blocks a device's home has in the samples pool, however they are made
/// (`PoolKind::device_blocks`): a range reader takes its buffer before its job
/// (`range_reader::take_job`) and, once these are all in use, waits for one to come back
/// (`SAMPLES_SPARE_WAIT`) rather than pin another. Readers, one per core, each waiting with a
/// filled block in front of the device's full queue, had made a block each: on 32 cores about
/// 43 of a hop 512 run's 56 blocks and ~350 of an f64 run's 533 MiB, pinned while the device
/// worked, which holds up its driver calls. On two H200s (32 cores, one GPU used, 4 GiB,
/// session 31) 12 took hop 512 from 0.877 to 0.778 s, f64 from 1.018 to 0.793, log-mel from
/// 0.615 to 0.538 (means of 2); 8 were slower on hop 512 and f64 (0.833 and 0.856 s).
pub(crate) const DEVICE_SAMPLE_BLOCKS: usize = 12;

/// The most blocks a device's home has in the spectra pool. With only the readers' blocks
/// capped, the spectra blocks grew instead (each worker's take that misses asks for one; why
/// so many missed was not traced): 65536 hop 8192 pinned 317 MiB in 52 blocks and took 0.826 s
/// against 0.798 before the cap. With at most 16 (two H200s, 32 cores, medians of 3, session
/// 31): 65536 hop 8192 0.720 s against 0.826, f64 0.657 against 0.690, hop 512 0.664 against
/// 0.664, log-mel 0.481 against 0.463 (before either cap: 0.798, 0.807, 0.771, 0.531); on 16
/// cores the same within the runs' spread. It was one per core (at least 16), the set a late
/// lane made first; 24 were slower than 16 (65536 0.806 s against 0.768). Asking for blocks one
/// at a time instead was no better (0.748 s).
pub(crate) const DEVICE_SPECTRA_BLOCKS: usize = 16;

/// How a lane's home in the pools gets its pinned blocks (`pipeline::join_lane`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HomeBlocks {
    /// Made in the background as takes miss them (a lane that joins at the run's start).
    AsMissed,
    /// Two per engine made before the lane joins, the rest as takes miss them.
    FirstFew,
}

impl HomeBlocks {
    /// Blocks made in the pool `kind` before a lane of `engines` engines joins.
    pub(crate) fn before_join(self, kind: PoolKind, engines: usize) -> usize {
        match self {
            HomeBlocks::AsMissed => 0,
            HomeBlocks::FirstFew => (2 * engines).min(kind.device_blocks()),
        }
    }
}

/// The run's two pools (`Pools`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolKind {
    Samples,
    Spectra,
}

impl PoolKind {
    /// The most blocks a device's home has in this pool, however they are made:
    /// `DEVICE_SAMPLE_BLOCKS`, `DEVICE_SPECTRA_BLOCKS`.
    pub(crate) fn device_blocks(self) -> usize {
        match self {
            PoolKind::Samples => DEVICE_SAMPLE_BLOCKS,
            PoolKind::Spectra => DEVICE_SPECTRA_BLOCKS,
        }
    }
}

/// How long a take from a home that has its most blocks (`PoolKind::device_blocks`) waits for one to
/// come back before it takes heap memory instead. Spectra blocks (taken by the FFT workers): about the time a
/// device's two workers take for 20–60 batches, so a wait means the stages after the workers
/// hold the blocks (the sink's order window), and a worker must not wait on them for long.
/// Sample blocks (taken by the readers, given back once a worker has transformed the batch): a
/// reader that waits for one would otherwise wait to send its batch to the device's full queue,
/// and heap memory would cost the device a staging copy; 500 ms against 20 ms took hop 512 from
/// 0.756 to 0.740 s, 65536 hop 8192 from 0.811 to 0.799, f64 from 0.940 to 0.914 (an H200, 16
/// cores, 4 GiB, medians of 3; log-mel 0.525 against 0.521).
const SPECTRA_SPARE_WAIT: std::time::Duration = std::time::Duration::from_millis(20);
const SAMPLES_SPARE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

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
    /// The most blocks it has (`PoolKind::device_blocks`): once made, takes wait for a spare rather
    /// than ask for more (`BufferPool::spare_wait`).
    most: Option<usize>,
    /// Its blocks alive or asked for: counted when asked for, uncounted when one is not made
    /// or when a block is released, wherever that happens (`counted`: too small, the spares
    /// full, a buffer grown onto the heap, one dropped outside the pool), so a home never
    /// waits on blocks it lost.
    made: Arc<AtomicUsize>,
    /// The blocks the background still has to make for misses (`top_up`).
    top_up: Arc<TopUp>,
}

/// Pinned blocks asked for by takes that found no spare, made one at a time by one thread.
#[derive(Default)]
struct TopUp {
    wanted: AtomicUsize,
    running: AtomicBool,
    /// The device gave no pinned memory: nothing more is asked of it in this run.
    failed: AtomicBool,
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
            samples: BufferPool::new(capacity, SAMPLES_SPARE_WAIT),
            spectra: BufferPool::new(capacity, SPECTRA_SPARE_WAIT),
        }
    }

    /// `--stats`' line on the takes from devices' pinned homes that found no spare block
    /// (`misses::line`).
    pub(crate) fn misses_report(&self) -> Option<String> {
        misses::line(self.samples.misses.report(), self.spectra.misses.report())
    }
}

pub(crate) struct BufferPool<T> {
    /// Spare buffers per home.
    capacity: usize,
    /// Per lane (index = lane id): its pinned home, or None for heap memory.
    homes: RwLock<Vec<Option<PinnedHome<T>>>>,
    heap: Spares<T>,
    /// The largest buffer taken so far (values): the size a late lane's buffers are made.
    largest: Arc<AtomicUsize>,
    /// Set once the spares are taken at the run's end: the background makes no more blocks.
    ended: Arc<AtomicBool>,
    /// How long a take from a home at its most blocks waits for a spare (`SAMPLES_SPARE_WAIT`,
    /// `SPECTRA_SPARE_WAIT`).
    spare_wait: std::time::Duration,
    /// What takes from pinned homes found (`--stats`: `misses_report`).
    misses: Misses,
}

impl<T: Copy + Default> BufferPool<T> {
    /// Keeps at most `capacity` spare buffers per home; a take from a home at its most blocks
    /// waits up to `spare_wait` for a spare. Lanes get homes with `add_lane`.
    pub(crate) fn new(capacity: usize, spare_wait: std::time::Duration) -> Self {
        BufferPool {
            capacity,
            homes: RwLock::new(Vec::new()),
            heap: Spares::new(capacity),
            largest: Arc::new(AtomicUsize::new(0)),
            ended: Arc::new(AtomicBool::new(false)),
            spare_wait,
            misses: Misses::default(),
        }
    }

    /// Gives lane `lane` its home: buffers pinned by `pinned`, or heap buffers for None.
    #[cfg(test)]
    pub(crate) fn add_lane(&self, lane: usize, pinned: Option<PinnedMemory<T>>) {
        self.add_lane_with(lane, pinned, Vec::new(), None);
    }

    /// `add_lane` with spare buffers made beforehand (`premade`), and at most `most` blocks in
    /// all (None: as many as takes miss).
    pub(crate) fn add_lane_with(
        &self,
        lane: usize,
        pinned: Option<PinnedMemory<T>>,
        spares: Vec<HostBuf<T>>,
        most: Option<usize>,
    ) {
        if let Ok(mut homes) = self.homes.write() {
            if homes.len() <= lane {
                homes.resize_with(lane + 1, || None);
            }
            let room = self.capacity.max(spares.len());
            homes[lane] = pinned.map(|memory| PinnedHome {
                memory,
                spares: Spares::new(room),
                // (no more than its spares can hold: a block made past that is released)
                most: most.map(|m| m.min(room)),
                made: Arc::new(AtomicUsize::new(spares.len())),
                top_up: Arc::default(),
            });
            if let Some(home) = &homes[lane] {
                for buf in spares {
                    let _ = home.spares.tx.try_send(counted(buf, &home.made));
                }
            }
        }
    }

    /// Up to `count` pinned buffers of `memory`, each the size of the largest buffer taken or
    /// expected so far (`expect`; none before either), made on a few threads; stops early when
    /// `stop` says so. For a lane that joins a running pipeline: its set for the run
    /// (`PoolKind::device_blocks`), ready before its first batch (issue 23).
    pub(crate) fn premade(
        &self,
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
        let threads = PREMAKE_THREADS.min(count);
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

    /// Buffers of `len` values will be taken (a device's batches, larger than the CPU
    /// engines' before it joins): a late lane's buffers are made at least this size.
    pub(crate) fn expect(&self, len: usize) {
        self.largest.fetch_max(len, Ordering::Relaxed);
    }

    /// An empty buffer with room for at least `len` values: a spare of lane `lane`'s home (for a
    /// home at its most blocks, one that comes back within the pool's `spare_wait`), else heap
    /// memory (and, for a pinned home below its most, a block made in the background, `top_up`).
    pub(crate) fn take(&self, lane: usize, len: usize) -> HostBuf<T>
    where
        T: Send + Sync + 'static,
    {
        self.largest.fetch_max(len, Ordering::Relaxed);
        let waits_on = {
            let homes = self.homes.read();
            let home = homes.as_ref().ok().and_then(|h| h.get(lane)?.as_ref());
            match home.map(|home| (home, home.spares.rx.try_recv())) {
                None => None,
                Some((_, Ok(b))) if b.capacity() >= len => return fresh(b),
                Some((home, spare)) => {
                    drop(spare); // (too small: released, and so uncounted)
                    match self.top_up(home) {
                        Asked::AtMost => Some(home.spares.rx.clone()),
                        Asked::Yes | Asked::No => return self.heap_for_a_miss(len),
                    }
                }
            }
        };
        // (waited for with the homes unlocked: a lane may join meanwhile)
        let waited = waits_on.map(|rx| {
            let since = std::time::Instant::now();
            let spare = rx.recv_timeout(self.spare_wait).ok();
            self.misses.waited_since(since);
            spare
        });
        match waited {
            Some(Some(b)) if b.capacity() >= len => fresh(b),
            // (a spare too small is released, and so uncounted)
            Some(_) => self.heap_for_a_miss(len),
            None => fresh(self.heap_buffer(len)),
        }
    }

    /// Heap memory for a take from a pinned home that found no spare.
    fn heap_for_a_miss(&self, len: usize) -> HostBuf<T> {
        self.misses.took_heap();
        fresh(self.heap_buffer(len))
    }

    /// Asks for one more pinned block in `home`'s spares (up to the spares' capacity asked at
    /// once), made by the home's background thread, started if none runs: not once the home
    /// has its most (`Asked::AtMost`, claimed in one step, so takes that miss together cannot
    /// pass it), nor when its device gave no pinned memory or enough are asked for already.
    fn top_up(&self, home: &PinnedHome<T>) -> Asked
    where
        T: Send + Sync + 'static,
    {
        let top_up = &home.top_up;
        let failed = top_up.failed.load(Ordering::Relaxed);
        if failed || top_up.wanted.load(Ordering::Relaxed) >= self.capacity {
            return Asked::No;
        }
        let most = home.most.unwrap_or(usize::MAX);
        let claimed = (home.made).fetch_update(Ordering::SeqCst, Ordering::SeqCst, |m| {
            (m < most).then_some(m + 1)
        });
        if claimed.is_err() {
            return Asked::AtMost;
        }
        top_up.wanted.fetch_add(1, Ordering::SeqCst);
        if top_up.running.swap(true, Ordering::SeqCst) {
            return Asked::Yes; // the running thread sees the new want
        }
        let maker = Maker {
            top_up: top_up.clone(),
            made: home.made.clone(),
            memory: home.memory.clone(),
            spares: home.spares.tx.clone(),
            largest: self.largest.clone(),
            ended: self.ended.clone(),
        };
        let started = std::thread::Builder::new()
            .name("pinned top-up".into())
            .spawn(move || maker.run());
        if started.is_err() {
            top_up.running.store(false, Ordering::SeqCst);
            let wanted = top_up.wanted.swap(0, Ordering::SeqCst);
            uncount(&home.made, wanted);
            return Asked::No;
        }
        Asked::Yes
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
        self.ended.store(true, Ordering::SeqCst);
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
    /// or a pinned one whose device still has spares waiting (else the next take gets heap
    /// memory, staged through the engine, while the background pins one more block, or, at the
    /// home's most, after waiting for a spare).
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
                    // (the spares full: released, and so uncounted)
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

/// What `BufferPool::top_up` did for a take that found no spare.
enum Asked {
    /// One more block is being made; the take gets heap memory now.
    Yes,
    /// None will be (no pinned memory, or enough asked for): heap memory now.
    No,
    /// The home has its most blocks: the take waits for a spare.
    AtMost,
}

/// Takes `n` blocks off a home's count (`PinnedHome::made`): released, or never to be made.
fn uncount(made: &AtomicUsize, n: usize) {
    let _ = made.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |m| {
        Some(m.saturating_sub(n))
    });
}

/// `buf`, counted among its home's blocks (`made`) until its pinned block is released,
/// wherever that happens (so the home may make one in its place).
fn counted<T: Copy + Default>(mut buf: HostBuf<T>, made: &Arc<AtomicUsize>) -> HostBuf<T> {
    if let Some(block) = buf.pinned_block_mut() {
        block.drop_with(Box::new(Uncount(made.clone())));
    }
    buf
}

/// Takes a released block off its home's count (`counted`).
struct Uncount(Arc<AtomicUsize>);

impl Drop for Uncount {
    fn drop(&mut self) {
        uncount(&self.0, 1);
    }
}

/// `buf`, emptied for its next use.
fn fresh<T: Copy + Default>(mut buf: HostBuf<T>) -> HostBuf<T> {
    buf.clear();
    buf
}

/// The background thread of one pinned home (`BufferPool::top_up`): makes the blocks asked
/// for, each the size of the largest buffer taken so far, into the home's spares.
struct Maker<T> {
    top_up: Arc<TopUp>,
    /// The home's count of its blocks (`PinnedHome::made`).
    made: Arc<AtomicUsize>,
    memory: PinnedMemory<T>,
    spares: Sender<HostBuf<T>>,
    largest: Arc<AtomicUsize>,
    ended: Arc<AtomicBool>,
}

impl<T: Copy + Default + Send + 'static> Maker<T> {
    fn run(self) {
        let top_up = &self.top_up;
        // (cleared on the way out, a panic included, so a later miss starts a maker again)
        let mut claim = Claim {
            running: &top_up.running,
            held: true,
        };
        loop {
            while top_up.wanted.load(Ordering::SeqCst) > 0 && !self.ended.load(Ordering::SeqCst) {
                self.make_one();
            }
            claim.release();
            // a want that came after the last look, before `running` was cleared, is made here
            let more =
                top_up.wanted.load(Ordering::SeqCst) > 0 && !self.ended.load(Ordering::SeqCst);
            if !more || top_up.running.swap(true, Ordering::SeqCst) {
                return;
            }
            claim.held = true;
        }
    }

    /// One block of the largest size taken, into the spares: none when the device has no
    /// pinned memory to give (nothing more is asked), left to the process's exit when the run
    /// ended meanwhile (`left_behind`), released when the spares are full (enough made).
    fn make_one(&self) {
        let top_up = &self.top_up;
        let len = self.largest.load(Ordering::Relaxed);
        let buf = HostBuf::with_capacity(len, Some(&self.memory));
        let _ =
            (top_up.wanted).fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| w.checked_sub(1));
        // (a block not made leaves the home's count with the wants dropped; one released
        // uncounts itself, `counted`)
        if !buf.is_pinned() {
            top_up.failed.store(true, Ordering::SeqCst);
            uncount(&self.made, 1 + top_up.wanted.swap(0, Ordering::SeqCst));
        } else if self.ended.load(Ordering::SeqCst) {
            crate::left_behind::keep(Box::new(buf));
        } else if let Err(full) = self.spares.try_send(counted(buf, &self.made)) {
            uncount(&self.made, top_up.wanted.swap(0, Ordering::SeqCst));
            drop(full);
        }
    }
}

/// A maker's hold on its home's `running` flag, given up on release or drop.
struct Claim<'a> {
    running: &'a AtomicBool,
    held: bool,
}

impl Claim<'_> {
    fn release(&mut self) {
        self.running.store(false, Ordering::SeqCst);
        self.held = false;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.held {
            self.release();
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

    /// A device that gives no pinned memory.
    struct NoPinned;
    impl PinnedAlloc<f32> for NoPinned {
        fn alloc(&self, _len: usize) -> Result<PinnedBlock<f32>, String> {
            Err("no pinned memory".into())
        }
        fn owns(&self, _block: &PinnedBlock<f32>) -> bool {
            false
        }
    }

    /// Adds lane `lane` with its home in `dev`'s memory and `premade` spare blocks of `len`.
    fn pinned_lane(pool: &BufferPool<f32>, lane: usize, dev: &Arc<FakeDevice>, premade: usize) {
        let memory = dev.clone() as PinnedMemory<f32>;
        let spares = (0..premade)
            .map(|_| HostBuf::with_capacity(16, Some(&memory)))
            .collect();
        pool.add_lane_with(lane, Some(memory), spares, (premade > 0).then_some(premade));
    }

    fn owned_by(buf: &HostBuf<f32>, dev: &FakeDevice) -> bool {
        buf.pinned_block().is_some_and(|p| dev.owns(p))
    }

    #[test]
    fn each_lane_takes_its_own_memory_and_buffers_go_home() {
        let (a, b) = (
            Arc::new(FakeDevice::default()),
            Arc::new(FakeDevice::default()),
        );
        let pool = BufferPool::<f32>::new(4, SPECTRA_SPARE_WAIT);
        pinned_lane(&pool, 0, &a, 1);
        pinned_lane(&pool, 1, &b, 1);
        pool.add_lane(2, None);
        let from_a = pool.take(0, 16);
        let from_b = pool.take(1, 16);
        let heap = pool.take(2, 16);
        assert!(owned_by(&from_a, &a) && !owned_by(&from_a, &b));
        assert!(owned_by(&from_b, &b));
        assert!(!heap.is_pinned());
        let a_block = from_a
            .pinned_block()
            .map(|p| p.as_slice().as_ptr() as usize);
        // a's block, used by lane 1 (a hand-off), goes back to a's spares, not b's
        pool.give(from_a);
        pool.give(from_b);
        let again_b = pool.take(1, 16);
        assert!(owned_by(&again_b, &b));
        let again_a = pool.take(0, 16);
        assert_eq!(
            again_a
                .pinned_block()
                .map(|p| p.as_slice().as_ptr() as usize),
            a_block
        );
    }

    /// A take with no spare from a home without a set made beforehand (a device named
    /// outright) gets heap memory at once, never a block pinned on the caller's thread; the
    /// background makes one for the spares, which the next take gets.
    #[test]
    fn a_miss_gets_heap_memory_at_once_and_a_block_is_pinned_behind_it() {
        let dev = Arc::new(FakeDevice::default());
        let pool = BufferPool::<f32>::new(4, SPECTRA_SPARE_WAIT);
        pinned_lane(&pool, 0, &dev, 0);
        let missed = pool.take(0, 16);
        assert!(!missed.is_pinned());
        let since = std::time::Instant::now();
        let made = loop {
            let homes = pool.homes.read().expect("homes");
            let spares = homes[0].as_ref().map_or(0, |h| h.spares.rx.len());
            if spares > 0 || since.elapsed() > std::time::Duration::from_secs(5) {
                break spares;
            }
            drop(homes);
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(made, 1, "one block made for one miss");
        let next = pool.take(0, 16);
        assert!(owned_by(&next, &dev) && next.capacity() >= 16);
    }

    /// A home whose blocks, made beforehand, are its most never has more made while the device
    /// works: a take that finds none spare waits for one to come back, and gets heap memory when
    /// none comes back within the pool's `spare_wait`.
    #[test]
    fn a_premade_home_at_its_most_waits_for_a_spare_and_never_grows() {
        let dev = Arc::new(FakeDevice::default());
        let long = std::time::Duration::from_secs(60); // the take ends when the block comes back
        let pool = Arc::new(BufferPool::<f32>::new(4, long));
        pinned_lane(&pool, 0, &dev, 1);
        let held = pool.take(0, 16);
        assert!(owned_by(&held, &dev));
        let at = held.pinned_block().map(|p| p.as_slice().as_ptr() as usize);
        let giver = {
            let pool = pool.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(5));
                pool.give(held);
            })
        };
        let waited = pool.take(0, 16);
        let _ = giver.join();
        assert_eq!(
            waited
                .pinned_block()
                .map(|p| p.as_slice().as_ptr() as usize),
            at,
            "the block given back meanwhile"
        );
        let mut pool = Arc::try_unwrap(pool).ok().expect("the only owner");
        pool.spare_wait = std::time::Duration::from_millis(1);
        let missed = pool.take(0, 16);
        assert!(!missed.is_pinned(), "none came back: heap memory");
        let homes = pool.homes.read().expect("homes");
        let home = homes[0].as_ref().expect("a home");
        assert!(!home.top_up.running.load(Ordering::SeqCst));
        assert_eq!(home.top_up.wanted.load(Ordering::SeqCst), 0);
        assert_eq!(
            dev.blocks.lock().map(|b| b.len()).unwrap_or(0),
            1,
            "no block made"
        );
    }

    #[test]
    fn a_home_that_has_made_its_most_waits_for_a_spare() {
        let dev = Arc::new(FakeDevice::default());
        let memory = dev.clone() as PinnedMemory<f32>;
        let pool = BufferPool::<f32>::new(8, std::time::Duration::from_millis(5));
        let made = vec![HostBuf::with_capacity(16, Some(&memory))];
        pool.add_lane_with(0, Some(memory), made, Some(2));
        let first = pool.take(0, 16);
        assert!(owned_by(&first, &dev));
        // a miss below the most: heap memory now, one more block pinned behind it
        assert!(!pool.take(0, 16).is_pinned());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let second = loop {
            let b = pool.take(0, 16);
            if b.is_pinned() {
                break b;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no block made in 30 s"
            );
            std::thread::yield_now();
        };
        assert_eq!(dev.blocks.lock().map(|b| b.len()).unwrap_or(0), 2);
        // both in use and the most made: the take waits, then gets heap memory, pinning none
        let (waited_before, heap_before) = pool.misses.counts();
        assert!(!pool.take(0, 16).is_pinned());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(dev.blocks.lock().map(|b| b.len()).unwrap_or(0), 2);
        let (waited, heap) = pool.misses.counts();
        assert_eq!(waited, waited_before + 1, "--stats counts the wait");
        assert_eq!(heap, heap_before + 1);
        let report = pool.misses.report().unwrap_or_default();
        assert!(report.contains("takes waited for a spare ("), "{report}");
        // a block given back serves the next take
        pool.give(first);
        assert!(pool.take(0, 16).is_pinned());
        drop(second);
    }

    /// A home's blocks are uncounted wherever they are released: a pinned buffer grown onto
    /// the heap (`HostBuf::make_room`), one dropped outside the pool, one given back to full
    /// spares. So a home at its most never waits on a block it lost, and makes one in its
    /// place.
    #[test]
    fn a_home_uncounts_its_blocks_wherever_they_are_released() {
        let dev = Arc::new(FakeDevice::default());
        let pool = BufferPool::<f32>::new(1, std::time::Duration::from_secs(60));
        pinned_lane(&pool, 0, &dev, 1);
        let count = || {
            let homes = pool.homes.read().expect("homes");
            let home = homes[0].as_ref().expect("a home");
            home.made.load(Ordering::SeqCst)
        };
        let mut grown = pool.take(0, 16);
        grown.extend_from_slice(&[1.0; 17]);
        assert!(!grown.is_pinned() && grown.len() == 17);
        assert_eq!(count(), 0, "grown onto the heap: its block released");
        // at its most before, the home now makes a block for a miss instead of waiting a minute
        let took = std::time::Instant::now();
        assert!(!pool.take(0, 16).is_pinned());
        let deadline = took + std::time::Duration::from_secs(30);
        let pinned = loop {
            let b = pool.take(0, 16);
            if b.is_pinned() {
                break b;
            }
            assert!(std::time::Instant::now() < deadline, "no block made");
            std::thread::yield_now();
        };
        assert_eq!(count(), 1);
        drop(pinned);
        assert_eq!(count(), 0, "dropped outside the pool");
        // given back to full spares (a block of the same device, not the pool's, fills them)
        let pool = BufferPool::<f32>::new(1, std::time::Duration::from_secs(60));
        pinned_lane(&pool, 0, &dev, 1);
        let taken = pool.take(0, 16);
        let memory = dev.clone() as PinnedMemory<f32>;
        pool.give(HostBuf::with_capacity(16, Some(&memory)));
        pool.give(taken);
        let homes = pool.homes.read().expect("homes");
        let home = homes[0].as_ref().expect("a home");
        assert_eq!(
            home.made.load(Ordering::SeqCst),
            0,
            "released: the spares full"
        );
    }

    /// A device with no pinned memory to give is asked once: later misses start no maker.
    #[test]
    fn a_device_without_pinned_memory_is_not_asked_again() {
        let pool = BufferPool::<f32>::new(4, SPECTRA_SPARE_WAIT);
        pool.add_lane(0, Some(Arc::new(NoPinned) as PinnedMemory<f32>));
        assert!(!pool.take(0, 16).is_pinned());
        let homes = pool.homes.read().expect("homes");
        let top_up = homes[0].as_ref().map(|h| h.top_up.clone()).expect("a home");
        drop(homes);
        let since = std::time::Instant::now();
        while !top_up.failed.load(Ordering::SeqCst) || top_up.running.load(Ordering::SeqCst) {
            assert!(
                since.elapsed() < std::time::Duration::from_secs(5),
                "the maker never gave up"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!pool.take(0, 16).is_pinned());
        assert!(
            !top_up.running.load(Ordering::SeqCst) && top_up.wanted.load(Ordering::SeqCst) == 0
        );
    }

    /// Takes that miss together ask for no more than the home's most, and a block that could
    /// not be made is not counted: a capped home whose device gives no pinned memory never
    /// waits for a spare that will not come.
    #[test]
    fn a_homes_most_holds_for_takes_at_once_and_counts_only_blocks_made() {
        let dev = Arc::new(FakeDevice::default());
        let pool = Arc::new(BufferPool::<f32>::new(
            64,
            std::time::Duration::from_millis(5),
        ));
        let memory = dev.clone() as PinnedMemory<f32>;
        pool.add_lane_with(0, Some(memory), Vec::new(), Some(3));
        let takers: Vec<_> = (0..16)
            .map(|_| {
                let pool = pool.clone();
                std::thread::spawn(move || pool.take(0, 16))
            })
            .collect();
        // (held till the end: a block released would be made again, `counted`)
        let _taken: Vec<_> = takers
            .into_iter()
            .map(|t| t.join().expect("a taker"))
            .collect();
        let made = || dev.blocks.lock().map(|b| b.len()).unwrap_or(0);
        let since = std::time::Instant::now();
        while made() < 3 {
            assert!(
                since.elapsed() < std::time::Duration::from_secs(30),
                "blocks not made"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(made(), 3, "no more than the home's most");

        let pool = BufferPool::<f32>::new(4, std::time::Duration::from_secs(60));
        let memory = Arc::new(NoPinned) as PinnedMemory<f32>;
        pool.add_lane_with(0, Some(memory), Vec::new(), Some(1));
        assert!(!pool.take(0, 16).is_pinned());
        let homes = pool.homes.read().expect("homes");
        let home = homes[0].as_ref().expect("a home");
        let (top_up, count) = (home.top_up.clone(), home.made.clone());
        drop(homes);
        let since = std::time::Instant::now();
        while !top_up.failed.load(Ordering::SeqCst) || count.load(Ordering::SeqCst) != 0 {
            assert!(
                since.elapsed() < std::time::Duration::from_secs(30),
                "never given up"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // (a take that waited for a spare would take the pool's whole minute)
        let took = std::time::Instant::now();
        assert!(!pool.take(0, 16).is_pinned());
        assert!(took.elapsed() < std::time::Duration::from_secs(30));
    }

    /// A pinned buffer may wait in the sink only while its device has spares (else a worker
    /// would go without one); a heap buffer always may.
    #[test]
    fn a_pinned_buffer_is_spared_only_while_its_device_has_spares() {
        let dev = Arc::new(FakeDevice::default());
        let pool = BufferPool::<f32>::new(4, SPECTRA_SPARE_WAIT);
        pinned_lane(&pool, 0, &dev, 2);
        pool.add_lane(1, None);
        let (first, second) = (pool.take(0, 16), pool.take(0, 16));
        assert!(first.is_pinned() && second.is_pinned());
        assert!(!pool.can_spare(&first), "no spares left");
        pool.give(second);
        assert!(pool.can_spare(&first), "a spare waits");
        assert!(pool.can_spare(&pool.take(1, 16)), "heap memory");
    }
}
