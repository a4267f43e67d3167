//! Lanes that join a run late: a device's lanes built while the CPU engines already work
//! (`auto`'s GPUs, a device named outright and started in the background). `LateJoin` decides
//! whether a device that came up joins at all (not with little work left), joins its lanes to
//! the dispatcher with the first of their pinned buffers and their programs built (a warm-up
//! batch of one frame), retires the CPU lane when it only bridged the start-up (once a device's
//! first batch is back, so no batch waits meanwhile), notes the CPU engines' bridge for `auto`, and makes
//! the rest of the pinned buffers while the lanes work (`PoolFill`).

use super::dispatch::{Dispatcher, LaneId};
use super::{join_lane_with, pool, worker, WorkerThreads};
use crate::fft::router;
use crate::types::Sample;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a late lane's pinned pools still need once it has joined (`PoolFill::fill`).
pub(super) struct PoolFill {
    pub(super) lane: LaneId,
    /// More buffers to make: (input pool, output pool).
    pub(super) more: (usize, usize),
}

impl PoolFill {
    /// Makes the rest of the lane's pinned buffers while it works (its misses meanwhile get
    /// heap buffers, staged by the engine).
    pub(super) fn fill<T: Sample>(
        self,
        dispatcher: &Dispatcher<T>,
        (input_pool, output_pool): (&pool::BufferPool<T>, &pool::BufferPool<T>),
    ) {
        let stop = || dispatcher.closed();
        input_pool.fill(self.lane, self.more.0, &stop);
        output_pool.fill(self.lane, self.more.1, &stop);
    }
}

/// `join_lane` for a lane built while the run goes on: its pinned pools get buffers the size
/// of a device's batches, enough for its queue and workers before it joins, and the rest
/// (`holders`: batches being read, spectra being encoded) made after it joined, by
/// `PoolFill::fill`. So no reader or worker waits for a pinned allocation (about 1 GB/s: half
/// a second of stalls per run when made on demand), and the lane does not wait for them all
/// either (issue 23).
pub(super) fn join_late_lane<T: Sample>(
    dispatcher: &Dispatcher<T>,
    pools: (&pool::BufferPool<T>, &pool::BufferPool<T>),
    lane: router::LaneEngines<T>,
    holders: (usize, usize),
) -> Option<(worker::LaneQueue<T>, router::Engines<T>, Option<PoolFill>)> {
    join_lane_with(dispatcher, pools, lane, Some(holders))
}

/// Lanes built while the run went on (`auto`'s GPUs, a device started in the background)
/// joining the dispatcher.
pub(super) struct LateJoin<'a, T: Sample> {
    pub(super) context: &'a Arc<worker::WorkerContext<T>>,
    pub(super) threads: &'a WorkerThreads,
    pub(super) pools: (&'a pool::BufferPool<T>, &'a pool::BufferPool<T>),
    pub(super) lane_set: &'a Arc<crate::fft::lanes::LaneSet>,
    pub(super) retire_cpu: bool,
    /// Reader and encoder threads: how many batches and spectra may be held besides the lane's
    /// queue (`join_late_lane`).
    pub(super) holders: (usize, usize),
    /// The samples the run will analyse, when known up front, and when the stages started.
    pub(super) progress: (Option<u64>, Instant),
    /// The first stream's transform, each late engine's warm-up (`worker::warm_up`).
    pub(super) warm: Option<crate::fft::TransformSpec>,
}

/// A device that comes up when the lanes already working would finish in less than this is
/// not joined: its first batch, a device's size, would hold the order window longer than the
/// rest of the job takes (issue 23: frame 4096 on 8 cores).
const LATE_JOIN_MIN_LEFT: Duration = Duration::from_millis(150);

impl<T: Sample> LateJoin<'_, T> {
    pub(super) fn join(
        &self,
        late: router::LateLanes<T>,
        done: &crossbeam_channel::Sender<worker::Done<T>>,
    ) {
        let (control, dispatcher) = (&self.context.control, &self.context.dispatcher);
        if let Some(e) = late.error {
            control.fail(e); // the device the run named is unusable
        }
        if let Some(left) = self.nearly_done() {
            let left_ms = left.as_secs_f64() * 1e3;
            tracing::debug!(
                left_ms,
                "a device came up with little work left: not joined"
            );
            // (its engines are left to the exit, not released while the run ends)
            crate::left_behind::keep(Box::new(late.lanes));
            return;
        }
        if let (Some(speed), false) = (late.cpu_speed, late.lanes.is_empty()) {
            dispatcher.set_cpu_speed(speed);
        }
        let joined = !late.lanes.is_empty();
        if joined {
            self.note_bridge();
        }
        // the CPU lane goes on until a device's first batch is back (issue 41: no hole)
        if joined && self.retire_cpu {
            self.lane_set.retire_cpu_after_first_device_batch();
        }
        let mut fills = Vec::new();
        for mut lane in late.lanes {
            // its programs and first buffers before it takes batches
            if let Some(spec) = &self.warm {
                let engines = lane.engines.iter_mut();
                engines.for_each(|e| worker::warm_up(e.as_mut(), spec, self.context));
            }
            // (enough pinned buffers for its queue are made here, before it takes batches)
            let joined = join_late_lane(dispatcher, self.pools, lane, self.holders);
            if let Some((queue, engines, fill)) = joined {
                self.threads.spawn(queue, engines, done, self.context);
                fills.extend(fill);
            }
        }
        // the rest of their pinned buffers, while they work
        for fill in fills {
            fill.fill(dispatcher, self.pools);
        }
    }

    /// What the CPU lane did before the devices joined (`Control::bridged`).
    fn note_bridge(&self) {
        let lanes = self.lane_set.lanes();
        let cpu_frames = lanes.iter().filter(|l| l.is_cpu);
        let frames = cpu_frames
            .map(|l| l.counters.frames.load(Ordering::Relaxed))
            .sum();
        let bridge = crate::fft::route::record::Bridge {
            cpu_frames: frames,
            stages_started: self.progress.1,
            joined: Instant::now(),
        };
        let bridged = &self.context.control.bridged;
        *bridged.lock().unwrap_or_else(|e| e.into_inner()) = Some(bridge);
    }

    /// The time the working lanes still need at the rate they went so far, when it is under
    /// `LATE_JOIN_MIN_LEFT` (None: more, or unknown).
    fn nearly_done(&self) -> Option<Duration> {
        let (total, since) = self.progress;
        let done = self
            .context
            .control
            .counters
            .samples_analysed
            .load(Ordering::Relaxed);
        let (total, done) = (total? as f64, done as f64);
        if done <= 0.0 {
            return None;
        }
        if total <= done {
            return Some(Duration::ZERO);
        }
        let left = since.elapsed().mul_f64((total - done) / done);
        (left < LATE_JOIN_MIN_LEFT).then_some(left)
    }
}
