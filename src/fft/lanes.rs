//! The devices of one run while it runs. Each device instance (the CPU engines, or one OpenCL
//! device instance) is a `Lane`: its label, whether it has failed, what it has done (batches,
//! frames, busy time, for `--stats`); how fast it is expected to be is `route::LaneSpeed`. The `LaneSet` holds the lanes that take batches, so a lane whose device
//! fails knows whether another lane can take its batches over (the pipeline then hands them on)
//! or whether it must compute them on its own CPU engine, and says so in one warning.

use super::EngineError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// What one lane has done (all counts since the start of the run).
#[derive(Debug, Default)]
pub(crate) struct LaneCounters {
    /// Batches its workers finished.
    pub batches: AtomicU64,
    /// Frames in those batches.
    pub frames: AtomicU64,
    /// Nanoseconds its workers spent in their engines, summed over workers.
    pub busy_ns: AtomicU64,
    /// Batches it handed to other lanes after its device failed.
    pub handed_off: AtomicU64,
    /// Frames its workers computed on their CPU engine (unsupported sizes, `auto`'s choice, or
    /// after a device failure with no other device left).
    pub cpu_frames: AtomicU64,
    /// Batches whose samples crossed to its device as f32 and whose rows crossed back as f32
    /// (an f64 run, `fft::carry`).
    pub f32_up: AtomicU64,
    pub f32_down: AtomicU64,
    /// Its device's event times (`--stats`, `--trace`: profiling queues) as the events gave
    /// them, summed over its workers: uploads, kernels, downloads.
    pub device_ns: [AtomicU64; 3],
}

/// One device instance of the run.
#[derive(Debug)]
pub(crate) struct Lane {
    /// `cpu`, `opencl:P:D` or `opencl:P:D#I` (see `device_set`).
    pub label: String,
    /// "CPU engine" or the OpenCL device's name.
    pub name: String,
    pub is_cpu: bool,
    /// FFT worker threads (engines) of this lane.
    pub workers: usize,
    failed: AtomicBool,
    /// Takes no new batches (`auto`'s CPU lane once a GPU lane has joined, when the GPU alone
    /// is the faster way); finishes those it holds.
    retired: AtomicBool,
    /// Takes batches only while the lanes before it are full (`route::rank`): a second GPU
    /// under `gpu:all` or `auto` joins only when the first cannot keep up.
    reserve: AtomicBool,
    pub counters: LaneCounters,
}

impl Lane {
    /// The device's address (`cpu`, `opencl:P:D`): the label less an instance's `#I`, so
    /// the instances of a device listed twice share it.
    pub(crate) fn address(&self) -> &str {
        super::device_set::address_in_label(&self.label)
    }

    pub(crate) fn new(label: String, name: String, is_cpu: bool, workers: usize) -> Arc<Self> {
        Arc::new(Lane {
            label,
            name,
            is_cpu,
            workers,
            failed: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            reserve: AtomicBool::new(false),
            counters: LaneCounters::default(),
        })
    }

    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Whether new batches may be sent here: neither failed nor retired.
    pub(crate) fn takes_batches(&self) -> bool {
        !self.failed() && !self.retired.load(Ordering::Relaxed)
    }

    /// No new batches for this lane from now on (see `retired`).
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// From now on this lane waits in reserve (see `reserve`).
    pub(crate) fn keep_in_reserve(&self) {
        self.reserve.store(true, Ordering::Relaxed);
    }

    /// Whether this lane waits in reserve (see `reserve`).
    pub(crate) fn in_reserve(&self) -> bool {
        self.reserve.load(Ordering::Relaxed)
    }

    /// "label (name)".
    pub(crate) fn title(&self) -> String {
        if self.is_cpu {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.name)
        }
    }
}

/// The lanes that take batches in one run.
#[derive(Debug, Default)]
pub(crate) struct LaneSet {
    lanes: Mutex<Vec<Arc<Lane>>>,
    /// Whether a failed lane's batches may go to the other lanes (the pipeline's dispatcher does
    /// that); otherwise each lane falls back on its own CPU engine.
    handoff: bool,
    /// Whether a device's lane (not the CPU engines') has joined.
    device_joined: AtomicBool,
    /// Whether the CPU lanes retire once a device's lane returns its first batch
    /// (`retire_cpu_after_first_device_batch`).
    cpu_retires_pending: AtomicBool,
    /// Whether the devices that wait in reserve start (`await_later_devices`), and why.
    later_devices: Mutex<Reserve>,
    later_devices_decided: Condvar,
    /// Whether a device waits in reserve for that decision.
    later_devices_wait: AtomicBool,
}

/// Whether the devices that wait in reserve (`route::later_devices_in_reserve`) start at all:
/// only once the first device bounds the run (`route::another_device_pays`), so where the
/// readers or the host pace it their start-up never contends with the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum LaterDevices {
    #[default]
    Undecided,
    Wanted,
    /// The run ended, or will without them.
    NotWanted,
}

/// The decision on the devices in reserve, under one lock: what was decided, why (`--stats`),
/// and whether one that was wanted could not be opened (`note_reserve_failure`).
#[derive(Debug, Default)]
struct Reserve {
    decision: LaterDevices,
    why: String,
    failed: bool,
}

impl LaneSet {
    /// `handoff`: the caller hands a failed lane's batches to the others
    /// (`EngineError::HandOff`).
    pub(crate) fn new(handoff: bool) -> Arc<Self> {
        Arc::new(LaneSet {
            lanes: Mutex::new(Vec::new()),
            handoff,
            device_joined: AtomicBool::new(false),
            cpu_retires_pending: AtomicBool::new(false),
            later_devices: Mutex::new(Reserve::default()),
            later_devices_decided: Condvar::new(),
            later_devices_wait: AtomicBool::new(false),
        })
    }

    /// Decides whether the devices in reserve start, and says why (the first decision stands).
    pub(crate) fn decide_later_devices(&self, decision: LaterDevices, why: String) {
        let mut state = self.later_devices.lock().unwrap_or_else(|e| e.into_inner());
        if state.decision == LaterDevices::Undecided {
            (state.decision, state.why) = (decision, why);
            self.later_devices_decided.notify_all();
        }
    }

    /// A device in reserve, wanted, could not be opened: `what` joins the decision's reason
    /// (the run goes on with the lanes it has: `router::open_as_they_come`).
    pub(crate) fn note_reserve_failure(&self, what: String) {
        let mut state = self.later_devices.lock().unwrap_or_else(|e| e.into_inner());
        state.why.push_str("; ");
        state.why.push_str(&what);
        state.failed = true;
    }

    /// Whether the devices that waited in reserve started, and why (None: none waited).
    pub(crate) fn later_devices_report(&self) -> Option<String> {
        if !self.later_devices_wait() {
            return None;
        }
        let state = self.later_devices.lock().unwrap_or_else(|e| e.into_inner());
        let Reserve {
            decision,
            why,
            failed,
        } = &*state;
        Some(match decision {
            // (the reason names the devices that could not be opened)
            LaterDevices::Wanted if *failed => format!("wanted: {why}"),
            LaterDevices::Wanted => format!("started: {why}"),
            _ => format!("not started: {why}"),
        })
    }

    /// Whether a device waits for `decide_later_devices`.
    pub(crate) fn later_devices_wait(&self) -> bool {
        self.later_devices_wait.load(Ordering::Relaxed)
    }

    /// Waits until it is decided whether the devices in reserve start: true when they do.
    pub(crate) fn await_later_devices(&self) -> bool {
        self.later_devices_wait.store(true, Ordering::Relaxed);
        let state = self.later_devices.lock().unwrap_or_else(|e| e.into_inner());
        let decided = self
            .later_devices_decided
            .wait_while(state, |s| s.decision == LaterDevices::Undecided)
            .unwrap_or_else(|e| e.into_inner());
        decided.decision == LaterDevices::Wanted
    }

    /// Adds a lane that takes batches from now on.
    pub(crate) fn join(&self, lane: &Arc<Lane>) {
        if let Ok(mut lanes) = self.lanes.lock() {
            lanes.push(lane.clone());
        }
        if !lane.is_cpu {
            self.device_joined.store(true, Ordering::Relaxed);
        }
    }

    /// The CPU lanes only bridged a device's start-up: they go on taking batches until a
    /// device's lane has returned its first one (`first_device_batch_returned`), so nothing
    /// waits while the device moves its first batch, then retire.
    pub(crate) fn retire_cpu_after_first_device_batch(&self) {
        self.cpu_retires_pending.store(true, Ordering::SeqCst);
    }

    /// A device's lane returned its first batch: the CPU lanes retire if they were to.
    pub(crate) fn first_device_batch_returned(&self) {
        if self.cpu_retires_pending.swap(false, Ordering::SeqCst) {
            self.lanes()
                .iter()
                .filter(|l| l.is_cpu)
                .for_each(|l| l.retire());
        }
    }

    /// Whether a device's lane has joined (batches sized for devices from then on).
    pub(crate) fn has_device(&self) -> bool {
        self.device_joined.load(Ordering::Relaxed)
    }

    /// Every lane that joined, in order.
    pub(crate) fn lanes(&self) -> Vec<Arc<Lane>> {
        self.lanes.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The labels of the lanes other than `from` that have not failed, when hand-offs are on.
    fn takers(&self, from: &Lane) -> Vec<String> {
        if !self.handoff {
            return Vec::new();
        }
        self.lanes()
            .iter()
            .filter(|l| !std::ptr::eq(l.as_ref(), from) && !l.failed())
            .map(|l| l.label.clone())
            .collect()
    }

    /// Whether another lane can take `from`'s batches.
    pub(crate) fn takes_over(&self, from: &Lane) -> bool {
        !self.takers(from).is_empty()
    }

    /// Marks `lane` failed; the first time, one warning names it, the error and where its
    /// batches go now.
    pub(crate) fn fail(&self, lane: &Lane, error: &EngineError) {
        if lane.failed.swap(true, Ordering::Relaxed) {
            return;
        }
        let takers = self.takers(lane);
        let next = match takers.as_slice() {
            [] => "this batch and all later ones run on the CPU engine".to_string(),
            [one] => format!("its batches go to {one}"),
            many => format!("its batches go to {}", many.join(", ")),
        };
        tracing::warn!("{}: {error}; {next}", lane.title());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault() -> EngineError {
        EngineError::Device {
            engine: "opencl",
            what: "lost".into(),
        }
    }

    #[test]
    fn a_lanes_address_is_its_label_less_the_instance() {
        let twice = Lane::new("opencl:1:1#2".into(), "dev".into(), false, 1);
        let once = Lane::new("opencl:1:0".into(), "dev".into(), false, 1);
        assert_eq!(
            (twice.address(), once.address()),
            ("opencl:1:1", "opencl:1:0")
        );
    }

    #[test]
    fn a_failed_lane_is_taken_over_only_by_live_lanes_when_handing_off() {
        let lane_set = LaneSet::new(true);
        let a = Lane::new("opencl:0:0#1".into(), "dev".into(), false, 1);
        let b = Lane::new("opencl:0:0#2".into(), "dev".into(), false, 1);
        lane_set.join(&a);
        lane_set.join(&b);
        assert!(lane_set.takes_over(&a));
        lane_set.fail(&b, &fault());
        assert!(b.failed());
        assert!(
            !lane_set.takes_over(&a),
            "b failed: nobody takes a's batches"
        );
        let solo = LaneSet::new(false);
        solo.join(&a);
        solo.join(&Lane::new("cpu".into(), "CPU engine".into(), true, 2));
        assert!(!solo.takes_over(&a), "no hand-offs without a dispatcher");
    }

    #[test]
    fn the_cpu_lane_bridging_a_device_retires_only_when_the_device_has_returned_a_batch() {
        let lane_set = LaneSet::new(true);
        let cpu = Lane::new("cpu".into(), "CPU engine".into(), true, 2);
        let gpu = Lane::new("opencl:1:0".into(), "GPU".into(), false, 2);
        lane_set.join(&cpu);
        lane_set.first_device_batch_returned(); // nothing pending: nothing retires
        assert!(cpu.takes_batches());
        lane_set.join(&gpu);
        lane_set.retire_cpu_after_first_device_batch();
        assert!(
            cpu.takes_batches(),
            "the CPU lane goes on while the device starts"
        );
        lane_set.first_device_batch_returned();
        assert!(!cpu.takes_batches() && gpu.takes_batches());
    }

    #[test]
    fn devices_in_reserve_wait_for_the_first_decision_and_only_that_one() {
        let nobody = LaneSet::new(true);
        nobody.decide_later_devices(LaterDevices::NotWanted, "the run ended first".into());
        assert_eq!(
            nobody.later_devices_report(),
            None,
            "no device waited: no line"
        );
        for (first, then, starts) in [
            (LaterDevices::Wanted, LaterDevices::NotWanted, true),
            (LaterDevices::NotWanted, LaterDevices::Wanted, false),
        ] {
            let lane_set = LaneSet::new(true);
            let waiting = {
                let lane_set = lane_set.clone();
                std::thread::spawn(move || lane_set.await_later_devices())
            };
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!waiting.is_finished(), "nothing decided yet");
            lane_set.decide_later_devices(first, "first".into());
            lane_set.decide_later_devices(then, "then".into());
            assert_eq!(waiting.join().ok(), Some(starts));
            let report = lane_set.later_devices_report().unwrap_or_default();
            let said = if starts {
                "started: first"
            } else {
                "not started: first"
            };
            assert_eq!(report, said);
            assert_eq!(lane_set.await_later_devices(), starts, "decided once");
        }
    }
}
