//! The outages of `--retry` inputs (issue 27), gathered for the rest of the run: each ended gap
//! becomes one `{"event":"gap",…}` object per stream of the input, which the alerts' event writer
//! takes (`take_events`) for `--events`; `/metrics` shows `fftd_input_gaps_total{stream}` and
//! `fftd_input_retries_total` (`render_metrics`). One run per process: the record is the
//! process's (`outages()`), as the log is.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// One outage of an input, over once samples flowed again (or the run ended).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Gap {
    /// The input as the user named it.
    pub input: String,
    /// The streams the input feeds.
    pub streams: Range<usize>,
    /// Stream time (s) of the first sample that did not come: where the gap begins.
    pub time_s: f64,
    /// Seconds of wall clock from the failure to samples flowing again; row times after it are
    /// this much later.
    pub gap_s: f64,
    /// Reopen attempts made.
    pub attempts: u32,
    /// What failed.
    pub error: String,
    /// False when the run ended (stopped, or the policy gave up) with the input still down.
    pub resumed: bool,
}

impl Gap {
    /// The event object of one of its streams, without a newline.
    pub(crate) fn json(&self, stream: usize) -> String {
        serde_json::json!({
            "event": "gap",
            "input": self.input,
            "stream": stream,
            "time_s": self.time_s,
            "gap_s": self.gap_s,
            "attempts": self.attempts,
            "resumed": self.resumed,
            "error": self.error,
        })
        .to_string()
    }
}

#[derive(Default)]
struct Record {
    /// Event objects not yet taken.
    events: Vec<String>,
    /// Per stream of a `--retry` input: its gaps so far.
    gaps: BTreeMap<usize, u64>,
    retries: u64,
}

/// The outages of a run.
pub(crate) struct Outages {
    /// Events wait in `record` (checked without the lock on every row).
    pending: AtomicBool,
    record: Mutex<Option<Record>>,
}

static OUTAGES: Outages = Outages::new();

/// The process's record.
pub(crate) fn outages() -> &'static Outages {
    &OUTAGES
}

impl Default for Outages {
    fn default() -> Self {
        Self::new()
    }
}

impl Outages {
    pub(crate) const fn new() -> Self {
        Outages {
            pending: AtomicBool::new(false),
            record: Mutex::new(None),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
        let mut guard = self.record.lock().ok()?;
        Some(f(guard.get_or_insert_with(Record::default)))
    }

    /// A `--retry` input's streams: their counters show from the start (at 0).
    pub(crate) fn register(&self, streams: Range<usize>) {
        self.with(|r| {
            for k in streams {
                r.gaps.entry(k).or_insert(0);
            }
        });
    }

    /// One reopen attempt.
    pub(crate) fn attempt(&self) {
        self.with(|r| r.retries += 1);
    }

    /// An outage that is over: counted, and an event per stream.
    pub(crate) fn gap(&self, gap: &Gap) {
        self.with(|r| {
            for k in gap.streams.clone() {
                *r.gaps.entry(k).or_insert(0) += 1;
                r.events.push(gap.json(k));
            }
        });
        self.pending.store(true, Ordering::Release);
    }

    /// The event objects not taken yet, oldest first.
    pub(crate) fn take_events(&self) -> Vec<String> {
        if !self.pending.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        self.with(|r| std::mem::take(&mut r.events))
            .unwrap_or_default()
    }

    /// The `/metrics` lines (none when no input has `--retry`).
    pub(crate) fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let Some((gaps, retries)) = self.with(|r| (r.gaps.clone(), r.retries)) else {
            return;
        };
        if gaps.is_empty() {
            return;
        }
        out.push_str("# HELP fftd_input_gaps_total Outages of a --retry input, per stream.\n");
        out.push_str("# TYPE fftd_input_gaps_total counter\n");
        for (stream, n) in gaps {
            let _ = writeln!(out, "fftd_input_gaps_total{{stream=\"{stream}\"}} {n}");
        }
        out.push_str("# HELP fftd_input_retries_total Attempts to reopen a failed input.\n");
        out.push_str("# TYPE fftd_input_retries_total counter\n");
        let _ = writeln!(out, "fftd_input_retries_total {retries}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_an_event_per_stream_and_a_count() {
        let o = Outages::new();
        o.register(0..2);
        let mut m = String::new();
        o.render_metrics(&mut m);
        assert!(m.contains("fftd_input_gaps_total{stream=\"1\"} 0"), "{m}");
        o.attempt();
        o.gap(&Gap {
            input: "x \"y\"".into(),
            streams: 0..2,
            time_s: 1.5,
            gap_s: 2.0,
            attempts: 1,
            error: "gone".into(),
            resumed: true,
        });
        let events = o.take_events();
        assert_eq!(events.len(), 2);
        let v: serde_json::Value = serde_json::from_str(&events[1]).unwrap();
        assert_eq!(v["event"], "gap");
        assert_eq!(v["stream"], 1);
        assert_eq!(v["input"], "x \"y\"");
        assert!(o.take_events().is_empty());
        let mut m = String::new();
        o.render_metrics(&mut m);
        assert!(m.contains("fftd_input_gaps_total{stream=\"0\"} 1"), "{m}");
        assert!(m.contains("fftd_input_retries_total 1"), "{m}");
    }
}
