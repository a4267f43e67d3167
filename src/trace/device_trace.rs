//! `--trace`'s device side, as engines hand it over: each chunk of a batch with its device times
//! (upload, kernels, download, in the device's own clock, from event profiling) and what the
//! engine learnt about that clock against the host's (`ClockBounds`). Turned on by
//! `trace_device_spans` (a run with `--trace`); off, nothing is recorded (one relaxed load per
//! drained chunk). `trace::device_timeline` places the chunks on the host clock and on tracks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static TRACING: AtomicBool = AtomicBool::new(false);
/// The host instant device times are placed against (set when tracing is turned on).
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Asks engines to record their chunks' device times for `--trace` (from now on).
pub(crate) fn trace_device_spans() {
    EPOCH.get_or_init(Instant::now);
    TRACING.store(true, Ordering::Relaxed);
}

/// Whether chunks' device times are being recorded.
pub(crate) fn tracing() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// `t` in signed nanoseconds from the epoch.
pub(crate) fn host_ns(t: Instant) -> i64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    match t.checked_duration_since(epoch) {
        Some(d) => d.as_nanos() as i64,
        None => -(epoch.saturating_duration_since(t).as_nanos() as i64),
    }
}

/// The host instant `ns` nanoseconds from the epoch (the epoch itself for earlier ones).
pub(crate) fn host_instant(ns: i64) -> Instant {
    let epoch = *EPOCH.get_or_init(Instant::now);
    epoch + Duration::from_nanos(ns.max(0) as u64)
}

/// A chunk's three commands, (start, end) each in device nanoseconds; `kernels` from the first
/// kernel's start to the last one's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceChunk {
    pub upload: (u64, u64),
    pub kernels: Option<(u64, u64)>,
    pub download: (u64, u64),
}

/// Bounds on the offset host − device (nanoseconds, host side from `host_ns`): `hi` from a
/// download's end against the host instant right after its wait returned (the download ended
/// before: offset ≤ that difference), `lo` from an upload's CL_PROFILING_COMMAND_QUEUED against a
/// host instant taken before it was enqueued (offset ≥ that difference). The tightest of each
/// over every chunk so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockBounds {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
    /// Chunks that gave an upper bound.
    pub samples: u64,
}

impl ClockBounds {
    /// Adds a lower bound.
    pub fn at_least(&mut self, lo: i64) {
        self.lo = Some(self.lo.map_or(lo, |l| l.max(lo)));
    }

    /// Adds an upper bound.
    pub(crate) fn at_most(&mut self, hi: i64) {
        self.hi = Some(self.hi.map_or(hi, |h| h.min(hi)));
        self.samples += 1;
    }

    pub(crate) fn merge(&mut self, other: &ClockBounds) {
        if let Some(lo) = other.lo {
            self.at_least(lo);
        }
        if let Some(hi) = other.hi {
            self.hi = Some(self.hi.map_or(hi, |h| h.min(hi)));
        }
        self.samples += other.samples;
    }

    /// The offset used: the upper bound, so a device span is never drawn before it happened
    /// (it may be drawn up to `error_ns` late).
    pub fn offset(&self) -> Option<i64> {
        self.hi
    }

    /// The width of the bracket (the most the placement can be off), when both bounds are
    /// known and agree; None otherwise.
    pub(crate) fn error_ns(&self) -> Option<i64> {
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) if lo <= hi => Some(hi - lo),
            _ => None,
        }
    }
}

/// What an engine did on the device for its last batch (`Engine::take_device_trace`).
#[derive(Clone, Debug, Default)]
pub struct DeviceTrace {
    /// The device, as `--device` names it ("opencl:0:1").
    pub device: String,
    pub chunks: Vec<DeviceChunk>,
    /// The engine's clock bounds so far (all its batches).
    pub clock: ClockBounds,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_keep_the_tightest_and_the_offset_is_the_upper_one() {
        let mut b = ClockBounds::default();
        b.at_most(500);
        b.at_most(300);
        b.at_least(100);
        b.at_least(250);
        assert_eq!(b.offset(), Some(300));
        assert_eq!(b.error_ns(), Some(50));
        let mut c = ClockBounds::default();
        c.merge(&b);
        c.at_most(280);
        assert_eq!(
            (c.offset(), c.error_ns(), c.samples),
            (Some(280), Some(30), 3)
        );
        // instants after the epoch go there and back exactly
        let _ = host_ns(Instant::now());
        std::thread::sleep(Duration::from_millis(1));
        let now = host_ns(Instant::now());
        assert!(now > 0);
        assert_eq!(host_ns(host_instant(now + 10)), now + 10);
    }
}
