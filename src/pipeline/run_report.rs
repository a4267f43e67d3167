//! The run's own time at its two ends, and what `--stats` and `--trace` make of the whole run:
//! start-up (engines and devices, planning, opening outputs) up to the first stage thread,
//! teardown from the sink's end to the report, the `--stats` lines and the timeline file (with
//! the device set-up entries of `setup_log` as lines and spans); and each stage thread's clock
//! (`Control::clock`).

use super::Control;
use crate::error::{FftdError, Result};
use crate::fft::lanes::LaneSet;
use crate::pipeline::spec::RunSpec;
use crate::stats::{self, Counters, Latency};
use crate::timeline::{Kind, Phase, ThreadClock};
use crate::trace::Tracer;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Control {
    /// The clock of a new stage thread of `kind` (`timeline`): its time to `end_phase` after
    /// its last lap.
    pub(crate) fn clock(&self, kind: Kind, end_phase: Phase) -> ThreadClock<'_> {
        let times = &self.counters.times;
        ThreadClock::start(times, self.tracer.as_deref(), kind, end_phase)
    }
}

/// `--trace FILE`: the file is created now, before any input is read, so a path that cannot take
/// it fails the run before it starts.
pub(super) fn open_trace(
    run_spec: &RunSpec,
    stop: &AtomicBool,
    started: Instant,
) -> Result<Option<Arc<Tracer>>> {
    let Some(path) = &run_spec.report.trace else {
        return Ok(None);
    };
    // the error names the flag, as the other outputs' name their path (exit 1)
    let file = super::outputs::deferred_output(path, stop).map_err(|e| match e {
        FftdError::Io { path, source } => FftdError::io(
            format!("--trace {}", crate::types::shown_path(&path)),
            source,
        ),
        e => e,
    })?;
    Ok(Some(Arc::new(Tracer::new(file, started))))
}

/// `--stats` / `--trace`: device set-up timed per device (`setup_log`), and with `--trace` the
/// engines' chunks recorded for the queue tracks (`device_timeline`).
pub(super) fn enable_detail(trace: bool) {
    crate::setup_log::enable();
    if trace {
        crate::trace::device_trace::trace_device_spans();
    }
}

/// The run's start-up: from its start to the first stage thread.
pub(super) struct Startup {
    pub started: Instant,
    /// Building the engines and devices (`router::build_engine_set`).
    pub engines: std::ops::Range<Instant>,
    pub ended: Instant,
}

impl Startup {
    pub(super) fn record(&self, control: &Control) {
        let times = &control.counters.times;
        let ns = |a: Instant, b: Instant| b.saturating_duration_since(a).as_nanos() as u64;
        Counters::add(&times.startup_ns, ns(self.started, self.ended));
        Counters::add(&times.engines_ns, ns(self.engines.start, self.engines.end));
        if let Some(tracer) = &control.tracer {
            // set-up the main thread does from now on (pinned memory released in the teardown)
            crate::trace::set_current_track(Some(0));
            tracer.main_span("start-up", self.started, self.ended);
            tracer.main_span("engines", self.engines.start, self.engines.end);
            tracer.main_span("planning and outputs", self.engines.end, self.ended);
        }
    }
}

/// The run's end: what the report needs besides the counters.
pub(super) struct Ended {
    pub started: Instant,
    pub sink_ended: Instant,
    /// Reader threads planned, encoders started, and the widest window the dispatcher sent under.
    pub readers: usize,
    pub encoders: usize,
    pub window: u64,
    /// Takes from devices' pinned homes that found no spare (`pool::Pools::misses_report`).
    pub block_misses: Option<String>,
}

impl Ended {
    /// Records the teardown, prints `--stats` and writes `--trace`'s timeline.
    pub(super) fn report(
        &self,
        run_spec: &RunSpec,
        control: &Control,
        latency: &Latency,
        lane_set: &LaneSet,
    ) -> Result<()> {
        let now = Instant::now();
        let times = &control.counters.times;
        let teardown = now.saturating_duration_since(self.sink_ended);
        Counters::add(&times.teardown_ns, teardown.as_nanos() as u64);
        if run_spec.report.stats {
            let started = self.started;
            let shares = device_shares(lane_set);
            let workers = shares.iter().map(|s| s.workers).sum();
            eprintln!("{}", stats::report(&control.counters, latency, started));
            let threads = stats::StageThreads {
                readers: self.readers,
                workers,
                encoders: self.encoders,
                window: self.window,
            };
            let stages = stats::stages_report(&control.counters, &threads, started);
            eprintln!("{stages}");
            let wall = now.saturating_duration_since(started).as_nanos() as u64;
            eprintln!("{}", stats::devices_report(&shares, wall));
            if let Some(reserve) = lane_set.later_devices_report() {
                eprintln!("fftd devices in reserve: {reserve}");
            }
            if let Some(note) = device_start_up_note(control) {
                eprintln!("fftd device start-up: {note}");
            }
            if let Some(misses) = &self.block_misses {
                eprintln!("{misses}");
            }
            let device_bound = stats::device_bound(&shares, wall);
            let mut lines = crate::timeline::report(times, wall, device_bound);
            // after `fftd time`: the device set-up entries, by part of the run
            let startup_end = started + Duration::from_nanos(Counters::get(&times.startup_ns));
            let setup = crate::setup_log::report(startup_end, self.sink_ended, wall);
            lines.splice(1..1, setup);
            for line in lines {
                eprintln!("{line}");
            }
        }
        let Some(tracer) = &control.tracer else {
            return Ok(());
        };
        tracer.main_span("teardown", self.sink_ended, Instant::now());
        setup_spans(tracer);
        let path = run_spec
            .report
            .trace
            .as_deref()
            .unwrap_or(std::path::Path::new("-"));
        tracer.write().map_err(|e| FftdError::io(path, e))
    }
}

/// `--trace`: the device set-up entries (`setup_log`) as spans, on the track of the thread that
/// made them, or for threads without one (opening devices at start-up) on a track per device
/// and thread, "opencl:P:D set-up" ("opencl set-up" for the platform's enumeration).
fn setup_spans(tracer: &Tracer) {
    let mut tracks: Vec<(String, std::thread::ThreadId, u32)> = Vec::new();
    for e in crate::setup_log::entries() {
        let tid = match e.track {
            Some(tid) => tid,
            None => {
                let found = tracks.iter().find(|t| t.0 == e.device && t.1 == e.thread);
                match found {
                    Some(t) => t.2,
                    None => {
                        let same = tracks.iter().filter(|t| t.0 == e.device).count();
                        let mut name = match e.device.is_empty() {
                            true => "opencl set-up".to_string(),
                            false => format!("{} set-up", e.device),
                        };
                        if same > 0 {
                            name.push_str(&format!(" {}", same + 1));
                        }
                        let tid = tracer.track(name);
                        tracks.push((e.device.clone(), e.thread, tid));
                        tid
                    }
                }
            }
        };
        tracer.record(crate::trace::Span {
            name: e.what.label(),
            tid,
            from: e.from,
            to: e.to,
            batch: None,
            stream: None,
        });
    }
}

/// Each lane's share of the run, for `--stats`.
fn device_shares(lane_set: &LaneSet) -> Vec<stats::DeviceShare> {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    lane_set
        .lanes()
        .iter()
        .map(|lane| stats::DeviceShare {
            title: lane.title(),
            device: lane.address().to_string(),
            is_cpu: lane.is_cpu,
            workers: lane.workers,
            batches: get(&lane.counters.batches),
            frames: get(&lane.counters.frames),
            busy_ns: get(&lane.counters.busy_ns),
            failed: lane.failed(),
            handed_off: get(&lane.counters.handed_off),
            cpu_frames: get(&lane.counters.cpu_frames),
            f32_over_bus: (get(&lane.counters.f32_up), get(&lane.counters.f32_down)),
            device_ns: lane.counters.device_ns.each_ref().map(get),
        })
        .collect()
}

/// Why a device start-up did no work (`Control::device_start_up_note`), or that its programs
/// were still building when the work was done (`left_behind::programs_still_building`).
fn device_start_up_note(control: &Control) -> Option<String> {
    let building = || {
        let why = "programs still building when the work was done: what is left of the \
                   build goes to a builder at the exit, for the next run (fftd build-programs)";
        crate::left_behind::programs_still_building().then(|| why.to_string())
    };
    control.device_start_up_note().or_else(building)
}
