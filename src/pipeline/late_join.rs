//! Lanes that join a run late: a device's lanes built while the CPU engines already work
//! (`auto`'s GPUs, a device named outright and started in the background). The start-up runs
//! on a thread of its own (`late_lanes_thread`, `StartUpThread`) behind a gate (`DeviceGate`);
//! its lanes arrive on a channel (`LateLanes`). `LateJoin` lets the
//! start-up begin once the run's first batch is analysed, or not at all where it could not pay
//! (`open_gate`), decides whether a device that came up joins at all (not with little work
//! left), joins its lanes to the dispatcher with the first of their pinned buffers and their
//! programs built (a warm-up batch of one frame), retires the CPU lane when it only bridged the
//! start-up (once a device's first batch is back, so no batch waits meanwhile), notes the CPU
//! engines' bridge for `auto`, and watches whether the first device bounds the run, which
//! starts the devices waiting in reserve (`watch_demand`).

use super::{join_lane, pool, worker, WorkerThreads};
use crate::fft::lanes::{LaneSet, LaterDevices};
use crate::fft::{route, router};
use crate::types::Sample;
use crossbeam_channel::Sender;
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

/// Builds deferred lanes on a thread outside the pipeline, so the work never waits for a device
/// start-up it no longer needs; they arrive on the returned channel, in one or several hand-overs
/// (`router::Arrival`). The start-up waits at the returned gate (`DeviceGate`), and lets
/// `only_if_it_pays` decide there. Join the thread before the process ends (a device driver torn
/// down mid-start-up can abort the process).
pub(super) fn late_lanes_thread<T: Sample>(
    build: router::DeferredLanes<T>,
    lane_set: Arc<LaneSet>,
    only_if_it_pays: bool,
) -> (LateLanes<T>, StartUpThread) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let (begin, word) = crossbeam_channel::bounded(1);
    let began = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let began_here = began.clone();
    let builder = std::thread::spawn(move || {
        // (no word within the patience: it begins)
        if word.recv_timeout(DeviceGate::PATIENCE).unwrap_or(true) {
            began_here.store(true, Ordering::Relaxed);
            build(&|late| {
                let _ = tx.send(late);
            });
        }
    });
    let gate = DeviceGate {
        begin,
        only_if_it_pays,
        began,
    };
    ((rx, gate), StartUpThread(Some(builder), lane_set))
}

/// Where the lanes a device start-up in the background brings arrive, and its gate.
pub(super) type LateLanes<T> = (
    crossbeam_channel::Receiver<router::LateLanes<T>>,
    DeviceGate,
);

/// Holds a device start-up in the background back until the run's first batch is analysed
/// (`LateJoin::open_gate`), when every stage's threads have started and run. The driver's
/// libraries load under the dynamic loader's lock, for which every thread being created and
/// every thread registering its first thread-local destructor waits: before the gate, a first
/// run held every CPU lane back for 0.30 s (driver libraries not yet read from disk), later
/// ones for 0.02 s (docs/perf.md, session 28). The start-up waits `PATIENCE` at most (a first
/// batch of huge frames); a gate dropped unopened (the run ended first) ends it unbegun.
pub(super) struct DeviceGate {
    begin: crossbeam_channel::Sender<bool>,
    /// Whether the start-up begins only where the run's work left could pay for it
    /// (`route::Start::begins_devices_only_if_they_pay`).
    pub(super) only_if_it_pays: bool,
    /// Set when the start-up began (on the gate's word, or after its patience).
    began: Arc<std::sync::atomic::AtomicBool>,
}

impl DeviceGate {
    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

    /// The start-up begins, or ends without beginning.
    pub(super) fn open(self, begin: bool) {
        let _ = self.begin.try_send(begin);
    }

    /// Whether the start-up has begun: a gate never opened begins after its patience.
    pub(super) fn begun(&self) -> bool {
        self.began.load(Ordering::Relaxed)
    }
}

impl Drop for DeviceGate {
    fn drop(&mut self) {
        let _ = self.begin.try_send(false); // (after `open`: the channel holds its word)
    }
}

/// The thread building the late lanes. The run never waits for it: when the run ends (its
/// output complete, or an error) while the start-up is still under way, the thread is left to
/// the process's exit (`left_behind`). Devices still waiting in reserve then never start (the
/// run's end decides so if nothing decided before, an error before the stages ran included).
pub(super) struct StartUpThread(Option<std::thread::JoinHandle<()>>, Arc<LaneSet>);

impl Drop for StartUpThread {
    fn drop(&mut self) {
        let why = "the run ended first".to_string();
        self.1.decide_later_devices(LaterDevices::NotWanted, why);
        if let Some(thread) = self.0.take() {
            crate::left_behind::leave(thread);
        }
    }
}

/// A device that comes up when the lanes already working would finish in less than this is
/// not joined: its first batch, a device's size, would hold the order window longer than the
/// rest of the job takes (issue 23: frame 4096 on 8 cores).
const LATE_JOIN_MIN_LEFT: Duration = Duration::from_millis(150);

impl<T: Sample> LateJoin<'_, T> {
    /// Warms a late device's engines (its programs built, `worker::warm_up_lane`) on a thread
    /// of their own, then hands its lanes to `warmed`, where `join` takes them. A build took
    /// 0.56–0.85 s on an H200 (a job's first run, a machine's first run) and, done on the
    /// joining thread, held the run's end until it was done: 0.93 s where the CPU lanes were
    /// done at ~0.68 (session 33). The run does not wait for that thread (`left_behind::leave`);
    /// programs it is still building when the run ends are handed on to a builder of their
    /// own (`left_behind::unbuilt_until_done`).
    /// A hand-over with no lane (a device that failed) is passed on at once, with no thread.
    /// Each device's lanes are marked in reserve or not when built (`router`), so two devices
    /// warmed at once may be handed over in either order.
    pub(super) fn warm(
        &self,
        mut late: router::LateLanes<T>,
        warmed: &Sender<router::LateLanes<T>>,
    ) {
        let Some(spec) = self.warm.filter(|_| !late.lanes.is_empty()) else {
            let _ = warmed.send(late);
            return;
        };
        let (context, warmed) = (self.context.clone(), warmed.clone());
        // the exit hands the programs on to a builder of their own while they build
        let device = late.lanes.iter().find(|l| !l.lane.is_cpu);
        let unbuilt = device.map(|l| {
            let programs = worker::programs_of_warm_up(l.lane.address(), &spec, &context);
            crate::left_behind::unbuilt_until_done(programs.command_line())
        });
        tracing::debug!("device lanes warming");
        let warming = std::thread::spawn(move || {
            let _unbuilt = unbuilt;
            for lane in &mut late.lanes {
                worker::warm_up_lane(lane, &spec, &context);
            }
            let _ = warmed.send(late);
        });
        crate::left_behind::leave(warming);
    }

    /// Joins the lanes of a warmed device (`warm`) to the dispatcher, unless the run is nearly
    /// done.
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
            let why = format!(
                "up with {:.3} s of work left at the rate so far (a device joins with {:.3} s or more): not joined",
                left.as_secs_f64(),
                LATE_JOIN_MIN_LEFT.as_secs_f64()
            );
            tracing::debug!("device start-up {why}");
            control.note_device_start_up(why);
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
            tracing::debug!(lanes = late.lanes.len(), "device lanes joined");
        }
        // the CPU lane goes on until a device's first batch is back (issue 41: no hole)
        if joined && self.retire_cpu {
            self.lane_set.retire_cpu_after_first_device_batch();
        }
        for lane in late.lanes {
            // (a few of its pinned buffers are made here before it takes batches: `JOIN_BLOCKS`)
            let joined = join_lane(dispatcher, self.pools, lane, JOIN_BLOCKS);
            if let Some(joined) = joined {
                let (queue, engines) = (joined.queue, joined.engines);
                self.threads.spawn(queue, engines, done, self.context);
            }
        }
    }

    /// Opens a device start-up's gate (`DeviceGate`) once the run's first batch is analysed:
    /// the start-up begins, unless it begins only if it pays and could not
    /// (`start_up_could_pay`). True once open.
    pub(super) fn open_gate(&self, gate: &mut Option<DeviceGate>) -> bool {
        let counters = &self.context.control.counters;
        if counters.samples_analysed.load(Ordering::Relaxed) == 0 {
            return gate.is_none();
        }
        let Some(only_if_it_pays) = gate.as_ref().map(|g| g.only_if_it_pays) else {
            return true;
        };
        let mut left = self.time_left().filter(|_| only_if_it_pays);
        if !start_up_could_pay(left) {
            // judged by what was read; the CPU engines may not go that fast
            match self.least_cpu_time_left() {
                Some(least) => left = left.max(Some(least)),
                None => return false, // (their first batch is not back yet)
            }
        }
        let Some(gate) = gate.take() else {
            return true;
        };
        let pays = start_up_could_pay(left);
        if let (Some(left), false, false) = (left, pays, gate.begun()) {
            let why = format!(
                "not begun: {:.3} s of work judged left after the first batch (a start-up pays from {:.3} s)",
                left.as_secs_f64(),
                (route::LEAST_DEVICE_START_UP + LATE_JOIN_MIN_LEFT).as_secs_f64()
            );
            tracing::debug!("a device start-up that could not pay: {why}");
            self.context.control.note_device_start_up(why);
        }
        gate.open(pays);
        true
    }

    /// Notes for `--stats` that the run ended before its gate opened, where the start-up never
    /// began (it begins unopened after the gate's patience).
    pub(super) fn note_gate_unopened(&self, gate: &DeviceGate) {
        if !gate.begun() {
            let why = "not begun: the run ended before its first batch was back".to_string();
            self.context.control.note_device_start_up(why);
        }
    }

    /// The least time the CPU engines could still need: the samples not yet transformed, at
    /// their engines' own time per sample with every worker at once (None before their first
    /// batch). What was read so far alone can make a run look nearly done, since the readers
    /// first fill every free batch buffer: with `--batch 4096`, hop 64, a device named on
    /// 64 MiB found 21–115 ms left after its first job was read and never began its start-up
    /// (1.1–2.3 s on the CPU engines alone, 2 cores); on two H200s, hop 512 on 16 GiB took
    /// 3.07 s so against 2.03 s with the device (docs/perf.md, session 36).
    fn least_cpu_time_left(&self) -> Option<Duration> {
        let total = self.progress.0? as f64;
        let counters = &self.context.control.counters;
        let read = counters.samples_analysed.load(Ordering::Relaxed) as f64;
        let per_frame = read / counters.frames_in.load(Ordering::Relaxed).max(1) as f64;
        let lanes = self.lane_set.lanes();
        let cpu = lanes.iter().find(|l| l.is_cpu)?;
        let frames = cpu.counters.frames.load(Ordering::Relaxed) as f64;
        let busy_ns = cpu.counters.busy_ns.load(Ordering::Relaxed) as f64;
        if frames <= 0.0 || per_frame <= 0.0 {
            return None;
        }
        let ns_per_sample = busy_ns / (frames * per_frame) / cpu.workers.max(1) as f64;
        let transformed = lanes
            .iter()
            .map(|l| l.counters.frames.load(Ordering::Relaxed));
        let left = total - transformed.sum::<u64>() as f64 * per_frame;
        Some(Duration::from_nanos((left.max(0.0) * ns_per_sample) as u64))
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
        self.time_left().filter(|left| *left < LATE_JOIN_MIN_LEFT)
    }

    /// The time the run still needs at the rate it went so far (None: unknown, or nothing done).
    fn time_left(&self) -> Option<Duration> {
        let (total, since) = self.progress;
        let counters = &self.context.control.counters;
        let done = counters.samples_analysed.load(Ordering::Relaxed);
        let (total, done) = (total? as f64, done as f64);
        if done <= 0.0 {
            return None;
        }
        Some(since.elapsed().mul_f64((total - done).max(0.0) / done))
    }

    /// From the stages' start to the first device's join (`note_bridge`), at least
    /// `route::LEAST_DEVICE_START_UP` (the device's start-up began before the stages'), or
    /// `route::UNSEEN_DEVICE_START_UP` for a device opened before the run.
    fn first_device_start_up(&self) -> Duration {
        let bridged = self.context.control.bridged.lock();
        let bridge = bridged.map_or(None, |b| *b);
        bridge.map_or(route::UNSEEN_DEVICE_START_UP, |b| {
            (b.joined.duration_since(b.stages_started)).max(route::LEAST_DEVICE_START_UP)
        })
    }

    /// Looked at every `DEMAND_WINDOW` while a device works: starts the devices waiting in
    /// reserve once the first bounds the run (`route::another_device_pays`), or has failed (the
    /// demand is logged at debug level either way).
    pub(super) fn watch_demand(&self, watch: &mut DemandWatch) {
        if watch.decided {
            return;
        }
        let lanes = self.lane_set.lanes();
        let Some(first) = lanes.iter().find(|l| !l.is_cpu && !l.in_reserve()) else {
            return;
        };
        if first.failed() && self.lane_set.later_devices_wait() {
            let why = format!("{} failed", first.title());
            return watch.decide(self.lane_set, LaterDevices::Wanted, why);
        }
        let counters = &first.counters;
        if counters.batches.load(Ordering::Relaxed) == 0 {
            return; // (its start: the bridge's batches, its first transfers)
        }
        let done = self
            .context
            .control
            .counters
            .samples_analysed
            .load(Ordering::Relaxed);
        let now = (
            Instant::now(),
            counters.busy_ns.load(Ordering::Relaxed),
            done,
        );
        let Some((busy, rate)) = watch.observe(now, first.workers).filter(|(_, r)| *r > 0.0) else {
            return; // (no rate yet: nothing to judge the work left by)
        };
        let left = (self.progress.0).map(|total| {
            Duration::from_secs_f64(total.saturating_sub(done) as f64 / rate.max(1.0))
        });
        let demand = route::Demand {
            busy,
            left,
            start_up: self.first_device_start_up(),
        };
        let pays = route::another_device_pays(&demand);
        let window = watch.recent.back().copied().unwrap_or(0.0);
        tracing::debug!(?demand, busy = window, pays, "the first device's demand");
        watch.peak_busy = watch.peak_busy.max(demand.busy);
        route::gpu_view::note_if_second_device_wanted(&demand); // (a run that hid the others)
        if pays && self.lane_set.later_devices_wait() {
            let left =
                (demand.left).map_or("unknown".into(), |l| format!("{:.2} s", l.as_secs_f64()));
            let why = format!(
                "{} at least {:.0}% busy in {} windows of {} ms running, {left} of work left",
                first.title(),
                100.0 * demand.busy,
                route::DEMAND_WINDOWS,
                DEMAND_WINDOW.as_millis()
            );
            watch.decide(self.lane_set, LaterDevices::Wanted, why);
        }
    }
}

/// Whether a device start-up begun with `left` of work left (at the rate so far) could pay:
/// not when even a device up after the least start-up seen (`route::LEAST_DEVICE_START_UP`)
/// would find less than `LATE_JOIN_MIN_LEFT` left, so it would not join
/// (`LateJoin::nearly_done`). Where it might, it begins: the user named the device, and a job
/// near the line goes either way (one H200, 1 GiB: log-mel on 4 cores 0.69 s on the CPU route
/// alone, 0.48 s with the device; f64 on 16 cores 0.49 s alone, 0.61 s with it; docs/perf.md,
/// session 28). With the work left unknown, it could.
fn start_up_could_pay(left: Option<Duration>) -> bool {
    left.is_none_or(|left| left >= route::LEAST_DEVICE_START_UP + LATE_JOIN_MIN_LEFT)
}

/// How a late lane's pinned blocks are made: a few before it joins (two per engine), the rest
/// in the background as its takes miss them (`pool::BufferPool::top_up`), up to its home's most
/// (`pool::PoolKind::device_blocks`). Until session 33 a lane with work enough left made its
/// whole set (12 sample and 16 spectra blocks) before it joined, since blocks the driver
/// allocated and pinned while the device worked held up its calls (2–28 ms batches, session
/// 29). Blocks over the process's own pages (`fft::opencl::pinned`) hold the driver 2–3x less
/// and fault their pages outside it; with them, joining with a few was faster than with the
/// whole set in every job at 4 GiB on two H200s (5 alternated pairs, medians: hop 512 0.637 s
/// against 0.711 on 32 cores and 0.649 against 0.684 on 16, 65536 hop 8192 0.696 / 0.746 and
/// 0.703 / 0.740, f64 0.577 / 0.586 and 0.607 / 0.657, log-mel 0.450 / 0.464 and 0.471 / 0.478;
/// docs/perf.md, session 33), and with none made before it (all as missed) slower on f64
/// (0.741 s against 0.604 on 32 cores).
const JOIN_BLOCKS: pool::HomeBlocks = pool::HomeBlocks::FirstFew;

/// How often the run's first analysed batch is looked for while a device start-up waits at
/// its gate (`LateJoin::open_gate`).
pub(super) const GATE_LOOK: Duration = Duration::from_millis(2);

/// How often the first device's demand is looked at (`LateJoin::watch_demand`).
pub(super) const DEMAND_WINDOW: Duration = Duration::from_millis(100);

/// What `LateJoin::watch_demand` saw: when it looked last, the first device's busy
/// nanoseconds and the run's samples analysed then, its busy share over the last
/// `route::DEMAND_WINDOWS` windows, and the highest lowest share of such a run of windows.
#[derive(Default)]
pub(super) struct DemandWatch {
    last: Option<(Instant, u64, u64)>,
    recent: std::collections::VecDeque<f64>,
    peak_busy: f64,
    decided: bool,
}

impl DemandWatch {
    /// One look at (when, the first device's busy nanoseconds, samples analysed): the lowest
    /// busy share of the device's `workers` over the last `route::DEMAND_WINDOWS` windows
    /// (0 until there are as many) and the run's rate over the last window, samples a second;
    /// None on the first look.
    fn observe(&mut self, now: (Instant, u64, u64), workers: usize) -> Option<(f64, f64)> {
        let then = self.last.replace(now)?;
        let seconds = now.0.duration_since(then.0).as_secs_f64().max(1e-9);
        let busy = now.1.saturating_sub(then.1) as f64 * 1e-9 / (seconds * workers.max(1) as f64);
        self.recent.push_back(busy);
        if self.recent.len() > route::DEMAND_WINDOWS {
            self.recent.pop_front();
        }
        let lowest = (self.recent.iter().copied()).reduce(f64::min);
        let lowest = lowest.filter(|_| self.recent.len() == route::DEMAND_WINDOWS);
        let rate = now.2.saturating_sub(then.2) as f64 / seconds;
        Some((lowest.unwrap_or(0.0), rate))
    }

    fn decide(&mut self, lane_set: &LaneSet, decision: LaterDevices, why: String) {
        tracing::debug!(?decision, "devices in reserve: {why}");
        lane_set.decide_later_devices(decision, why);
        self.decided = true;
    }

    /// The run's dispatching has ended: the devices still waiting never start (and, where the
    /// first was watched long enough, a run that showed the driver every GPU for them says so:
    /// `gpu_view::note_second_device_not_wanted`).
    pub(super) fn end(mut self, lane_set: &LaneSet) {
        if self.decided {
            return;
        }
        let judged = self.recent.len() >= route::DEMAND_WINDOWS;
        if judged && lane_set.later_devices_wait() {
            route::gpu_view::note_second_device_not_wanted();
        }
        let why = format!(
            "the first device was at most {:.0}% busy in {} windows of {} ms running (they start from {:.0}% with time left to pay for their start-up)",
            100.0 * self.peak_busy,
            route::DEMAND_WINDOWS,
            DEMAND_WINDOW.as_millis(),
            100.0 * route::DEVICE_BOUND_BUSY
        );
        self.decide(lane_set, LaterDevices::NotWanted, why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_up_pays_only_with_a_start_up_and_a_joins_worth_of_work_left() {
        let ms = Duration::from_millis;
        assert!(start_up_could_pay(None), "unknown work left: it begins");
        assert!(!start_up_could_pay(Some(ms(0))));
        assert!(!start_up_could_pay(Some(ms(399))));
        assert!(start_up_could_pay(Some(ms(400))));
        assert!(start_up_could_pay(Some(ms(60_000))));
    }

    #[test]
    fn the_demand_is_the_lowest_busy_share_of_the_last_windows_and_the_last_windows_rate() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut watch = DemandWatch::default();
        // two workers: 0.2 s of engine time in 0.1 s is a busy device
        assert_eq!(
            watch.observe((at(0), 0, 0), 2),
            None,
            "nothing to compare yet"
        );
        let looks = [(100, 180_000_000, 1_000), (200, 360_000_000, 3_000)];
        for (ms, busy_ns, done) in looks {
            let (busy, _) = watch.observe((at(ms), busy_ns, done), 2).expect("a window");
            assert_eq!(busy, 0.0, "fewer windows than DEMAND_WINDOWS");
        }
        let (busy, rate) = (watch.observe((at(300), 500_000_000, 7_000), 2)).expect("a window");
        assert!(
            (busy - 0.7).abs() < 1e-9,
            "the lowest of 0.9, 0.9, 0.7: {busy}"
        );
        assert!(
            (rate - 40_000.0).abs() < 1e-6,
            "4,000 samples in 0.1 s: {rate}"
        );
        let (busy, _) = (watch.observe((at(400), 690_000_000, 8_000), 2)).expect("a window");
        assert!((busy - 0.7).abs() < 1e-9, "0.9, 0.7, 0.95: {busy}");
    }
}
