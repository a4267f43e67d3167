//! Lanes that join a run late: a device's lanes built while the CPU engines already work
//! (`auto`'s GPUs, a device named outright and started in the background). `LateJoin` decides
//! whether a device that came up joins at all (not with little work left), joins its lanes to
//! the dispatcher with the first of their pinned buffers and their programs built (a warm-up
//! batch of one frame), retires the CPU lane when it only bridged the start-up (once a device's
//! first batch is back, so no batch waits meanwhile) and notes the CPU engines' bridge for
//! `auto`.

use super::{join_lane, pool, worker, WorkerThreads};
use crate::fft::router;
use crate::types::Sample;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lanes built while the run went on (`auto`'s GPUs, a device started in the background)
/// joining the dispatcher.
pub(super) struct LateJoin<'a, T: Sample> {
    pub(super) context: &'a Arc<worker::WorkerContext<T>>,
    pub(super) threads: &'a WorkerThreads,
    pub(super) pools: &'a pool::Pools<T>,
    pub(super) lane_set: &'a Arc<crate::fft::lanes::LaneSet>,
    pub(super) retire_cpu: bool,
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
        for mut lane in late.lanes {
            // its programs and first buffers before it takes batches
            if let Some(spec) = &self.warm {
                let engines = lane.engines.iter_mut();
                engines.for_each(|e| worker::warm_up(e.as_mut(), spec, self.context));
            }
            // (pinned buffers for its queue are made here, before it takes batches; the rest in
            // the background as its batches miss them, `pool`)
            let joined = join_lane(dispatcher, self.pools, lane, true);
            if let Some(joined) = joined {
                let (queue, engines) = (joined.queue, joined.engines);
                self.threads.spawn(queue, engines, done, self.context);
            }
        }
    }

    /// What the CPU lane did before the first device joined (`Control::bridged`).
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
        // the first device's arrival ends the bridge (gpu:all hands its devices over one by one)
        let mut bridged = (self.context.control.bridged.lock()).unwrap_or_else(|e| e.into_inner());
        bridged.get_or_insert(bridge);
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
