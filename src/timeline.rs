//! Where every pipeline thread's time goes, for `--stats`, `/metrics` and `--trace`. Each stage
//! thread holds a `ThreadClock` that partitions its whole life into phases (busy ones such as
//! `read` or `fft`, and the waits between them) by laps: a lap charges the time since the previous
//! one to a phase, so a thread kind's phases sum to its threads' lives by construction. The run's
//! start-up and teardown are timed by the pipeline itself (`StageTimes::startup_ns`,
//! `teardown_ns`). With `--trace` the same clock also records spans (`trace::Tracer`).

use crate::trace::{Span, Tracer, FLUSH_SPANS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The kinds of pipeline threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Reader,
    Dispatch,
    Worker,
    Encoder,
    Sink,
}

impl Kind {
    pub(crate) const ALL: [Kind; 5] = [
        Kind::Reader,
        Kind::Dispatch,
        Kind::Worker,
        Kind::Encoder,
        Kind::Sink,
    ];

    /// The kind's name in `--stats` and in `/metrics`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Reader => "readers",
            Kind::Dispatch => "dispatch",
            Kind::Worker => "fft workers",
            Kind::Encoder => "encoders",
            Kind::Sink => "sink",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a thread is doing: each phase belongs to one kind; a busy phase names the stage it
/// counts for in `fftd bound`, a wait names none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Readers: reading bytes (and opening inputs, and waiting for a slow input).
    Read,
    /// Readers: turning bytes into samples (binary inputs; text parsing counts as read).
    Decode,
    /// Readers: splitting channels and cutting frames (into batches, for range-read inputs).
    Frame,
    /// Readers: waiting for room downstream (the frame channel, a worker, a pooled buffer).
    ReaderWait,
    /// Dispatch (the batcher): packing frames into batches and choosing their lane.
    Pack,
    DispatchInput,
    DispatchWorker,
    /// FFT workers: in their engines, shaping products, hand-offs.
    Fft,
    /// FFT workers of an OpenCL lane, with `--stats`/`--trace` (event profiling): the part of
    /// their engine time the device spent copying batches in, running kernels, copying spectra
    /// out (pipelined chunks overlap: scaled to the engine time when they sum past it).
    Upload,
    Device,
    Download,
    WorkerInput,
    WorkerOutput,
    Encode,
    EncodeInput,
    EncodeOutput,
    /// The sink: writing, flushing, closing outputs.
    Write,
    SinkInput,
}

impl Phase {
    pub(crate) const ALL: [Phase; 18] = [
        Phase::Read,
        Phase::Decode,
        Phase::Frame,
        Phase::ReaderWait,
        Phase::Pack,
        Phase::DispatchInput,
        Phase::DispatchWorker,
        Phase::Fft,
        Phase::Upload,
        Phase::Device,
        Phase::Download,
        Phase::WorkerInput,
        Phase::WorkerOutput,
        Phase::Encode,
        Phase::EncodeInput,
        Phase::EncodeOutput,
        Phase::Write,
        Phase::SinkInput,
    ];

    pub(crate) fn kind(self) -> Kind {
        use Phase::*;
        match self {
            Read | Decode | Frame | ReaderWait => Kind::Reader,
            Pack | DispatchInput | DispatchWorker => Kind::Dispatch,
            Fft | Upload | Device | Download | WorkerInput | WorkerOutput => Kind::Worker,
            Encode | EncodeInput | EncodeOutput => Kind::Encoder,
            Write | SinkInput => Kind::Sink,
        }
    }

    /// The stage a busy phase counts for (`fftd bound`); None for a wait.
    pub(crate) fn stage(self) -> Option<&'static str> {
        use Phase::*;
        match self {
            Read => Some("read"),
            Decode => Some("decode"),
            Frame => Some("frame"),
            Pack => Some("dispatch"),
            Fft => Some("fft"),
            Upload => Some("upload"),
            Device => Some("device"),
            Download => Some("download"),
            Encode => Some("encode"),
            Write => Some("sink"),
            _ => None,
        }
    }

    /// The phase's name in `--stats`.
    pub(crate) fn label(self) -> &'static str {
        use Phase::*;
        match self {
            Read => "read",
            Decode => "decode",
            Frame => "frame",
            ReaderWait => "waiting downstream",
            Pack => "batching",
            DispatchInput => "waiting for frames",
            DispatchWorker => "waiting for a worker",
            Fft => "fft",
            Upload => "upload",
            Device => "device kernels",
            Download => "download",
            WorkerInput => "waiting for batches",
            WorkerOutput => "waiting on encoders",
            Encode => "encode",
            EncodeInput => "waiting for spectra",
            EncodeOutput => "waiting on the sink",
            Write => "write",
            SinkInput => "waiting for spectra",
        }
    }

    /// The phase's name in a trace span.
    pub(crate) fn span_name(self) -> &'static str {
        use Phase::*;
        match self {
            Read => "read",
            Decode => "decode",
            Frame => "frame",
            Pack => "batch",
            Fft => "fft",
            Upload => "upload",
            Device => "kernels",
            Download => "download",
            Encode => "encode",
            Write => "write",
            _ => "wait",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Device time from OpenCL event profiling (listed only when there is some).
    pub(crate) fn is_device(self) -> bool {
        Phase::DEVICE_PARTS.contains(&self)
    }

    /// A device's parts of an FFT worker's engine time, in `fft::DeviceTimes`' order
    /// (uploads, kernels, downloads), as `LaneCounters::device_ns` keeps them.
    pub(crate) const DEVICE_PARTS: [Phase; 3] = [Phase::Upload, Phase::Device, Phase::Download];
}

/// Nanoseconds per phase and threads per kind, shared by every stage (`stats::Counters`).
#[derive(Default)]
pub(crate) struct StageTimes {
    phase_ns: [AtomicU64; Phase::ALL.len()],
    threads: [AtomicU64; Kind::ALL.len()],
    /// From the run's start to its first thread (engines, planning, outputs).
    pub startup_ns: AtomicU64,
    /// Of that, building the engines and devices (`router::build_engine_set`).
    pub engines_ns: AtomicU64,
    /// From the sink's end to the report.
    pub teardown_ns: AtomicU64,
}

impl StageTimes {
    pub(crate) fn phase_ns(&self, phase: Phase) -> u64 {
        self.phase_ns[phase.index()].load(Ordering::Relaxed)
    }

    pub(crate) fn threads(&self, kind: Kind) -> u64 {
        self.threads[kind.index()].load(Ordering::Relaxed)
    }

    /// The summed lives of a kind's threads so far.
    pub(crate) fn life_ns(&self, kind: Kind) -> u64 {
        Phase::ALL
            .iter()
            .filter(|p| p.kind() == kind)
            .map(|&p| self.phase_ns(p))
            .sum()
    }

    fn add(&self, phase: Phase, ns: u64) {
        self.phase_ns[phase.index()].fetch_add(ns, Ordering::Relaxed);
    }
}

/// One thread's clock: every lap charges the time since the last one to a phase.
pub(crate) struct ThreadClock<'a> {
    times: &'a StageTimes,
    tracer: Option<&'a Tracer>,
    tid: u32,
    last: Instant,
    /// The phase the time after the last lap goes to when the thread ends.
    end_phase: Phase,
    /// `--trace`: spans not yet handed to the tracer.
    spans: Vec<Span>,
    /// The thread's track before this clock (the main thread's, for the sink that runs on it).
    outer_track: Option<u32>,
}

impl<'a> ThreadClock<'a> {
    /// Starts the clock of a new thread of `kind`; `end_phase` takes the time from the last lap
    /// to the thread's end (its wait for input, as a rule).
    pub(crate) fn start(
        times: &'a StageTimes,
        tracer: Option<&'a Tracer>,
        kind: Kind,
        end_phase: Phase,
    ) -> Self {
        let n = times.threads[kind.index()].fetch_add(1, Ordering::Relaxed);
        let tid = tracer.map_or(0, |t| t.thread(kind.label(), n));
        // the thread's track for set-up spans (`setup_log`), until the clock ends
        let outer_track = crate::trace::current_track();
        if tracer.is_some() {
            crate::trace::set_current_track(Some(tid));
        }
        ThreadClock {
            times,
            tracer,
            tid,
            last: Instant::now(),
            end_phase,
            spans: Vec::new(),
            outer_track,
        }
    }

    /// Charges the time since the last lap to `phase`; returns that lap's start and end.
    pub(crate) fn lap(&mut self, phase: Phase) -> (Instant, Instant) {
        let now = Instant::now();
        let from = std::mem::replace(&mut self.last, now);
        self.times
            .add(phase, now.saturating_duration_since(from).as_nanos() as u64);
        (from, now)
    }

    /// Moves `ns` already charged to `from` over to `to` (a source's decoding inside its read).
    pub(crate) fn move_ns(&mut self, from: Phase, to: Phase, ns: u64) {
        if ns > 0 {
            self.times.phase_ns[from.index()].fetch_sub(ns, Ordering::Relaxed);
            self.times.add(to, ns);
        }
    }

    /// Like `lap`, and with `--trace` a span of the lap named after the phase.
    pub(crate) fn lap_span(&mut self, phase: Phase, batch: Option<u64>, stream: Option<usize>) {
        let (from, to) = self.lap(phase);
        self.span(phase.span_name(), from, to, batch, stream);
    }

    /// With `--trace`, a span of this thread from `from` to `to`.
    pub(crate) fn span(
        &mut self,
        name: &'static str,
        from: Instant,
        to: Instant,
        batch: Option<u64>,
        stream: Option<usize>,
    ) {
        let Some(tracer) = self.tracer else {
            return;
        };
        if !tracer.take_one() {
            return;
        }
        self.spans.push(Span {
            name,
            tid: self.tid,
            from,
            to,
            batch,
            stream: stream.map(|s| s as u32),
        });
        if self.spans.len() >= FLUSH_SPANS {
            tracer.hand_over(&mut self.spans);
        }
    }

    /// The run's tracer, with `--trace`.
    pub(crate) fn tracer(&self) -> Option<&'a Tracer> {
        self.tracer
    }

    pub(crate) fn last(&self) -> Instant {
        self.last
    }
}

impl Drop for ThreadClock<'_> {
    fn drop(&mut self) {
        self.lap(self.end_phase);
        if let Some(tracer) = self.tracer {
            tracer.hand_over(&mut self.spans);
            crate::trace::set_current_track(self.outer_track);
        }
    }
}

/// The `--stats` lines on the whole run's time: the wall clock split into start-up, the
/// pipeline and teardown; each thread kind's time by phase (shares of its threads' summed
/// lives, adding up to 100 %); last, the bound: the stage busiest as a share of the wall clock
/// (a stage's busy time per thread of its kind), start-up and teardown included. A device's
/// parts (upload, device, download) count per device, not per thread: `device_bound`, the
/// busiest part of any one device, or a device lane's workers, as a share of the wall
/// (`stats::device_bound`).
pub(crate) fn report(
    times: &StageTimes,
    wall_ns: u64,
    device_bound: Option<(&'static str, f64)>,
) -> Vec<String> {
    let wall = wall_ns.max(1) as f64;
    let secs = |ns: u64| ns as f64 * 1e-9;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let (startup, teardown) = (get(&times.startup_ns), get(&times.teardown_ns));
    let pipeline = wall_ns.saturating_sub(startup + teardown);
    let mut lines = vec![format!(
        "fftd time: wall {:.3} s: start-up {:.3} s ({:.1}%, engines {:.3} s), pipeline {:.3} s ({:.1}%), teardown {:.3} s ({:.1}%)",
        secs(wall_ns),
        secs(startup),
        100.0 * startup as f64 / wall,
        secs(get(&times.engines_ns)),
        secs(pipeline),
        100.0 * pipeline as f64 / wall,
        secs(teardown),
        100.0 * teardown as f64 / wall,
    )];
    let mut bound = ("start-up", startup as f64 / wall);
    let others = [("teardown", teardown as f64 / wall)]
        .into_iter()
        .chain(device_bound);
    for (stage, busy) in others {
        if busy > bound.1 {
            bound = (stage, busy);
        }
    }
    for kind in Kind::ALL {
        let (threads, life) = (times.threads(kind), times.life_ns(kind));
        if threads == 0 {
            continue;
        }
        let phases: Vec<String> = Phase::ALL
            .iter()
            .filter(|p| p.kind() == kind && (times.phase_ns(**p) > 0 || !p.is_device()))
            .map(|&p| {
                let ns = times.phase_ns(p);
                if let Some(stage) = p.stage().filter(|_| !p.is_device()) {
                    let busy = ns as f64 / (wall * threads as f64);
                    if busy > bound.1 {
                        bound = (stage, busy);
                    }
                }
                format!(
                    "{} {:.1}%",
                    p.label(),
                    100.0 * ns as f64 / life.max(1) as f64
                )
            })
            .collect();
        lines.push(format!(
            "fftd thread {} ({} thread{}, {:.3} s): {}",
            kind.label(),
            threads,
            if threads == 1 { "" } else { "s" },
            secs(life),
            phases.join(", ")
        ));
    }
    lines.push(format!(
        "fftd bound: {} ({:.0}% busy)",
        bound.0,
        100.0 * bound.1
    ));
    lines
}

/// `/metrics`' lines on thread time (Prometheus text format): per thread kind and phase the
/// seconds so far (`stage` names the stage a busy phase counts for in `fftd bound`; waits have
/// none), threads started per kind, and the run's start-up seconds.
pub(crate) fn render_metrics(times: &StageTimes, out: &mut String) {
    use std::fmt::Write;
    let name = "fftd_thread_seconds_total";
    let _ = writeln!(out, "# HELP {name} Pipeline threads' time by phase, summed over each kind's threads (busy phases name their stage).");
    let _ = writeln!(out, "# TYPE {name} counter");
    for phase in Phase::ALL {
        let kind = phase.kind().label().replace(' ', "_");
        let label = phase.label().replace(' ', "_");
        let stage = phase.stage().unwrap_or("");
        let secs = times.phase_ns(phase) as f64 * 1e-9;
        let _ = writeln!(
            out,
            "{name}{{kind=\"{kind}\",phase=\"{label}\",stage=\"{stage}\"}} {secs}"
        );
    }
    let name = "fftd_threads_started_total";
    let _ = writeln!(out, "# HELP {name} Pipeline threads started, per kind.");
    let _ = writeln!(out, "# TYPE {name} counter");
    for kind in Kind::ALL {
        let label = kind.label().replace(' ', "_");
        let _ = writeln!(out, "{name}{{kind=\"{label}\"}} {}", times.threads(kind));
    }
    let name = "fftd_startup_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} The run's start-up: engines, devices, planning, outputs."
    );
    let _ = writeln!(out, "# TYPE {name} gauge");
    let startup = times.startup_ns.load(Ordering::Relaxed) as f64 * 1e-9;
    let _ = writeln!(out, "{name} {startup}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devices_part_is_the_bound_by_its_own_share_of_the_wall_not_per_worker_thread() {
        // two of 34 workers are a device's, downloading 70 % of the wall; the other 32 (a
        // retired CPU lane) idle: per worker thread the downloads were 4 %, and the bound `fft`
        let times = StageTimes::default();
        let wall = 1_000_000_000u64;
        for worker in 0..34u64 {
            let mut clock = ThreadClock::start(&times, None, Kind::Worker, Phase::WorkerInput);
            clock.move_ns(Phase::WorkerInput, Phase::Fft, 100_000_000);
            if worker < 2 {
                clock.move_ns(Phase::WorkerInput, Phase::Download, 350_000_000);
            }
        }
        let bound = |lines: Vec<String>| lines.last().cloned().unwrap_or_default();
        assert_eq!(
            bound(report(&times, wall, Some(("download", 0.7)))),
            "fftd bound: download (70% busy)"
        );
        let without = bound(report(&times, wall, None));
        assert!(!without.contains("download"), "{without}");
    }

    #[test]
    fn laps_partition_a_thread_and_the_bound_is_the_busiest_stage() {
        let times = StageTimes::default();
        {
            let mut clock = ThreadClock::start(&times, None, Kind::Sink, Phase::Write);
            std::thread::sleep(std::time::Duration::from_millis(5));
            clock.lap(Phase::SinkInput);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let life = times.life_ns(Kind::Sink);
        assert_eq!(
            life,
            times.phase_ns(Phase::Write) + times.phase_ns(Phase::SinkInput)
        );
        assert!(times.phase_ns(Phase::Write) >= 20_000_000);
        let lines = report(&times, life + 1_000_000, None);
        assert!(
            lines[1].starts_with("fftd thread sink (1 thread, "),
            "{lines:?}"
        );
        assert!(
            lines.last().unwrap().starts_with("fftd bound: sink ("),
            "{lines:?}"
        );
    }
}
