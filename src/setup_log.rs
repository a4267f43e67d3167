//! `--stats` and `--trace`: the device set-up a run does, per device, as timed entries: OpenCL
//! platform enumeration, context creation, the engines (their command queues), a calibration,
//! program builds, and pinned host memory allocated and released (in the start-up, by the
//! pipeline's threads during the run, or in the teardown). Off unless `enable`d (a run with
//! `--stats` or `--trace`): then one relaxed load per timed call, on paths that are rare and
//! slow by nature. Totals are exact; at most `MAX_ENTRIES` entries keep their instants (for the
//! stage they fall in and the trace); later ones count as the pipeline's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::Instant;

/// Entries kept with their instants at most.
pub(crate) const MAX_ENTRIES: usize = 100_000;

/// What an entry timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum What {
    Platform,
    Context,
    Engines,
    Calibration,
    Program,
    PinnedAlloc,
    PinnedRelease,
}

impl What {
    const ALL: [What; 7] = [
        What::Platform,
        What::Context,
        What::Engines,
        What::Calibration,
        What::Program,
        What::PinnedAlloc,
        What::PinnedRelease,
    ];

    /// The name in `--stats` and of the trace span.
    pub(crate) fn label(self) -> &'static str {
        match self {
            What::Platform => "platform",
            What::Context => "context",
            What::Engines => "engines",
            What::Calibration => "calibration",
            What::Program => "program build",
            What::PinnedAlloc => "pinned alloc",
            What::PinnedRelease => "pinned release",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            What::PinnedAlloc | What::PinnedRelease => "block",
            What::Engines => "engine",
            What::Program => "program",
            _ => "",
        }
    }
}

/// One timed call.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub what: What,
    /// The device ("opencl:0:1"), empty for the platform.
    pub device: String,
    pub from: Instant,
    pub to: Instant,
    /// Engines created, or bytes of pinned memory.
    pub count: u64,
    pub bytes: u64,
    /// The trace track of the thread that made the call (`trace::current_track`), if it has one.
    pub track: Option<u32>,
    pub thread: ThreadId,
}

static ON: AtomicBool = AtomicBool::new(false);
static LOG: Mutex<Log> = Mutex::new(Log {
    entries: Vec::new(),
    overflow: Vec::new(),
});

struct Log {
    entries: Vec<Entry>,
    /// Entries past `MAX_ENTRIES`: (what, device, count, ns, bytes) totals.
    overflow: Vec<(What, String, u64, u64, u64)>,
}

/// Times device set-up from now on.
pub(crate) fn enable() {
    ON.store(true, Ordering::Relaxed);
}

pub(crate) fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Runs `f`, timing it as `what` on `device` when enabled (`count` engines or blocks, `bytes`).
pub(crate) fn timed<R>(
    what: What,
    device: impl FnOnce() -> String,
    (count, bytes): (u64, u64),
    f: impl FnOnce() -> R,
) -> R {
    if !enabled() {
        return f();
    }
    let from = Instant::now();
    let result = f();
    let to = Instant::now();
    let entry = Entry {
        what,
        device: device(),
        from,
        to,
        count,
        bytes,
        track: crate::trace::current_track(),
        thread: std::thread::current().id(),
    };
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.entries.len() < MAX_ENTRIES {
        log.entries.push(entry);
    } else {
        let ns = to.saturating_duration_since(from).as_nanos() as u64;
        match log
            .overflow
            .iter_mut()
            .find(|o| o.0 == what && o.1 == entry.device)
        {
            Some(o) => (o.2, o.3, o.4) = (o.2 + count, o.3 + ns, o.4 + bytes),
            None => log.overflow.push((what, entry.device, count, ns, bytes)),
        }
    }
    result
}

/// The entries kept so far (for the trace).
pub(crate) fn entries() -> Vec<Entry> {
    LOG.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entries
        .clone()
}

/// Sums per (device, what), in order of first appearance.
#[derive(Default)]
struct Sums(Vec<(String, What, u64, u64, u64)>);

impl Sums {
    fn add(&mut self, device: &str, what: What, (count, ns, bytes): (u64, u64, u64)) {
        match self.0.iter_mut().find(|s| s.0 == device && s.1 == what) {
            Some(s) => (s.2, s.3, s.4) = (s.2 + count, s.3 + ns, s.4 + bytes),
            None => self.0.push((device.to_string(), what, count, ns, bytes)),
        }
    }

    /// "opencl:0:0 context 0.012 s (4.1%), pinned alloc 0.003 s (6 blocks, 48.0 MiB, 1.0%)".
    fn line(&self, wall_ns: u64) -> String {
        let mut parts = Vec::new();
        let mut last_device = None;
        let mut sorted: Vec<_> = self.0.iter().collect();
        sorted.sort_by_key(|s| {
            let at = self.0.iter().position(|o| o.0 == s.0).unwrap_or(0);
            (at, What::ALL.iter().position(|w| *w == s.1).unwrap_or(0))
        });
        for (device, what, count, ns, bytes) in sorted {
            let mut text = String::new();
            if last_device != Some(device) && !device.is_empty() {
                text.push_str(device);
                text.push(' ');
            }
            last_device = Some(device);
            let pct = 100.0 * *ns as f64 / wall_ns.max(1) as f64;
            text.push_str(&format!("{} {:.3} s (", what.label(), *ns as f64 * 1e-9));
            if !what.unit().is_empty() {
                let s = if *count == 1 { "" } else { "s" };
                text.push_str(&format!("{count} {}{s}, ", what.unit()));
            }
            if *bytes > 0 {
                text.push_str(&format!("{:.1} MiB, ", *bytes as f64 / (1u64 << 20) as f64));
            }
            text.push_str(&format!("{pct:.1}%)"));
            parts.push(text);
        }
        parts.join(", ")
    }
}

/// The `--stats` lines on device set-up: what fell in the start-up (before `startup_end`), in
/// the pipeline, and in the teardown (after `sink_end`), each entry's seconds and share of the
/// wall clock; no line for a part without entries (the CPU engines have none).
pub(crate) fn report(startup_end: Instant, sink_end: Instant, wall_ns: u64) -> Vec<String> {
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    let mut parts: [Sums; 3] = Default::default();
    for e in &log.entries {
        let part = match (e.from < startup_end, e.from >= sink_end) {
            (true, _) => 0,
            (false, false) => 1,
            (false, true) => 2,
        };
        let ns = e.to.saturating_duration_since(e.from).as_nanos() as u64;
        parts[part].add(&e.device, e.what, (e.count, ns, e.bytes));
    }
    for (what, device, count, ns, bytes) in &log.overflow {
        parts[1].add(device, *what, (*count, *ns, *bytes));
    }
    let heads = [
        "fftd start-up:",
        "fftd set-up in the pipeline:",
        "fftd set-up in teardown:",
    ];
    heads
        .iter()
        .zip(&parts)
        .filter(|(_, sums)| !sums.0.is_empty())
        .map(|(head, sums)| format!("{head} {}", sums.line(wall_ns)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_name_each_device_once_with_counts_and_shares() {
        let mut sums = Sums::default();
        sums.add("opencl:0:0", What::PinnedAlloc, (2, 2_000_000, 3 << 20));
        sums.add("", What::Platform, (0, 1_000_000, 0));
        sums.add("opencl:0:0", What::Context, (0, 5_000_000, 0));
        sums.add("opencl:0:0", What::PinnedAlloc, (1, 1_000_000, 1 << 20));
        let line = sums.line(100_000_000);
        assert_eq!(
            line,
            "opencl:0:0 context 0.005 s (5.0%), pinned alloc 0.003 s (3 blocks, 4.0 MiB, 3.0%), platform 0.001 s (1.0%)"
        );
    }
}
