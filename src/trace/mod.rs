//! `--trace FILE`: a timeline of the run in the Chrome trace-event JSON format (Perfetto,
//! chrome://tracing): one track (`tid`) per pipeline thread, per OpenCL engine queue
//! (`device_timeline`), for device set-up (`setup_log`) and for the averaging, progress and
//! stall-watcher threads (`Track`); complete events (`"ph":"X"`, `ts` and
//! `dur` in µs from the run's start) with the batch and stream ids in `args`. Spans are kept in
//! memory, at most `MAX_SPANS` of them (about 80 MB; later ones are counted, not kept, and the
//! file says how many in `otherData`), and written as one JSON document when the run ends. The file
//! itself is created before the run, so a path that cannot take it fails first.
//!
//! A small writer of its own rather than `tracing-chrome`: that one writes begin/end pairs per
//! `tracing` span and needs a span object (and its field formatting) per batch and stage, where
//! the stages already hold the instants. Each thread gathers its spans in its own buffer
//! (`timeline::ThreadClock`) and hands them over `FLUSH_SPANS` at a time, so the cost per span is
//! an atomic add and a push (a thread that never ends, stuck on a hung device, keeps its last
//! spans).

pub(crate) mod device_timeline;
pub(crate) mod device_trace;

use crate::types::deferred_file::DeferredFile;
use std::cell::Cell;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Spans kept at most (later ones are only counted).
pub(crate) const MAX_SPANS: usize = 1_000_000;

thread_local! {
    /// The track of the calling thread, for spans recorded by code that does not know its
    /// thread's clock (`setup_log`: pinned memory, program builds).
    static CURRENT: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The calling thread's track, if it has one.
pub(crate) fn current_track() -> Option<u32> {
    CURRENT.with(Cell::get)
}

/// Makes `tid` the calling thread's track.
pub(crate) fn set_current_track(tid: Option<u32>) {
    CURRENT.with(|c| c.set(tid));
}

/// Spans a thread gathers before it hands them to the tracer.
pub(crate) const FLUSH_SPANS: usize = 4096;

/// One span of one thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub name: &'static str,
    pub tid: u32,
    pub from: Instant,
    pub to: Instant,
    pub batch: Option<u64>,
    pub stream: Option<u32>,
}

/// The spans of a run, and the file they go to.
pub(crate) struct Tracer {
    origin: Instant,
    file: Mutex<Option<DeferredFile>>,
    spans: Mutex<Vec<Span>>,
    /// Spans taken so far (kept ones: at most `MAX_SPANS`).
    taken: AtomicU64,
    dropped: AtomicU64,
    /// Track names, by tid.
    threads: Mutex<Vec<String>>,
    /// The OpenCL queues' spans, placed on the host clock when the file is written.
    pub device: device_timeline::DeviceSpans,
}

impl Tracer {
    /// A tracer whose times count from `origin`, writing to `file` at the end.
    pub(crate) fn new(file: DeferredFile, origin: Instant) -> Self {
        Tracer {
            origin,
            file: Mutex::new(Some(file)),
            spans: Mutex::new(Vec::with_capacity(4096)),
            taken: AtomicU64::default(),
            dropped: AtomicU64::default(),
            threads: Mutex::new(vec!["main".to_string()]),
            device: Default::default(),
        }
    }

    /// A new track named `name`: its tid.
    pub(crate) fn track(&self, name: String) -> u32 {
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        threads.push(name);
        (threads.len() - 1) as u32
    }

    /// A new track for thread `n` of `kind`: its tid.
    pub(crate) fn thread(&self, kind: &str, n: u64) -> u32 {
        self.track(format!("{kind} {n}"))
    }

    /// Whether one more span may be kept (false past `MAX_SPANS`: the span is only counted).
    pub(crate) fn take_one(&self) -> bool {
        let kept = self.taken.fetch_add(1, Ordering::Relaxed) < MAX_SPANS as u64;
        if !kept {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        kept
    }

    /// Keeps a thread's gathered spans (each one taken with `take_one`), emptying `spans`.
    pub(crate) fn hand_over(&self, spans: &mut Vec<Span>) {
        let mut kept = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        kept.append(spans);
    }

    /// Keeps `span` now (or counts it, past `MAX_SPANS`).
    pub(crate) fn record(&self, span: Span) {
        if self.take_one() {
            self.spans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(span);
        }
    }

    /// A span of the main thread (tid 0): start-up, teardown and their parts.
    pub(crate) fn main_span(&self, name: &'static str, from: Instant, to: Instant) {
        self.record(Span {
            name,
            tid: 0,
            from,
            to,
            batch: None,
            stream: None,
        });
    }

    /// Writes the timeline to the file given at the start (once; later calls do nothing).
    pub(crate) fn write(&self) -> std::io::Result<()> {
        let Some(file) = self.file.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        let mut out = BufWriter::new(file.create()?);
        let mut spans = std::mem::take(&mut *self.spans.lock().unwrap_or_else(|e| e.into_inner()));
        let (device_spans, clocks) = self.device.place();
        spans.extend(device_spans);
        let threads = self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        write!(
            out,
            "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"spans\":{},\"spans_not_kept\":{},\"max_spans\":{MAX_SPANS},\"device_clocks\":{clocks}}},\"traceEvents\":[",
            spans.len(),
            self.dropped.load(Ordering::Relaxed)
        )?;
        write!(
            out,
            "\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{{\"name\":\"fftd\"}}}}"
        )?;
        for (tid, name) in threads.iter().enumerate() {
            let name = serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".into());
            write!(
                out,
                ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":{tid},\"args\":{{\"name\":{name}}}}}"
            )?;
            write!(
                out,
                ",\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}"
            )?;
        }
        let us = |t: Instant| t.saturating_duration_since(self.origin).as_nanos() as f64 / 1e3;
        for s in &spans {
            let (ts, end) = (us(s.from), us(s.to));
            write!(
                out,
                ",\n{{\"ph\":\"X\",\"name\":\"{}\",\"pid\":1,\"tid\":{},\"ts\":{ts:.3},\"dur\":{:.3},\"args\":{{",
                s.name,
                s.tid,
                (end - ts).max(0.0)
            )?;
            let mut sep = "";
            if let Some(batch) = s.batch {
                write!(out, "\"batch\":{batch}")?;
                sep = ",";
            }
            if let Some(stream) = s.stream {
                write!(out, "{sep}\"stream\":{stream}")?;
            }
            write!(out, "}}}}")?;
        }
        writeln!(out, "\n]}}")?;
        out.flush()
    }
}

/// A track of its own for a thread outside the stages' clocks (the averaging stage, progress,
/// the stall watcher): its spans, gathered and handed over like a `ThreadClock`'s.
pub(crate) struct Track<'a> {
    tracer: &'a Tracer,
    tid: u32,
    spans: Vec<Span>,
}

impl<'a> Track<'a> {
    /// A track named `name` with `--trace` (None without); also the calling thread's track.
    pub(crate) fn new(tracer: Option<&'a Tracer>, name: &str) -> Option<Self> {
        let tracer = tracer?;
        let tid = tracer.track(name.to_string());
        set_current_track(Some(tid));
        Some(Track {
            tracer,
            tid,
            spans: Vec::new(),
        })
    }

    /// A span of this track from `from` to now.
    pub(crate) fn span_since(
        &mut self,
        name: &'static str,
        from: Instant,
        (batch, stream): (Option<u64>, Option<usize>),
    ) {
        if !self.tracer.take_one() {
            return;
        }
        self.spans.push(Span {
            name,
            tid: self.tid,
            from,
            to: Instant::now(),
            batch,
            stream: stream.map(|s| s as u32),
        });
        if self.spans.len() >= FLUSH_SPANS {
            self.tracer.hand_over(&mut self.spans);
        }
    }
}

impl Drop for Track<'_> {
    fn drop(&mut self) {
        self.tracer.hand_over(&mut self.spans);
    }
}
