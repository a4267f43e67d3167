//! The pre-roll ring: a source wrapped by `TapSource` copies every sample frame it reads into its
//! `Ring`, and writes them on to the recordings that are open. `Recorder` opens and ends
//! recordings from the sink's thread; both sides hold the ring's lock only to copy.
//!
//! The ring keeps every frame from the pre-roll before the oldest row the sink has seen
//! (`Ring::keep_from`): a reader of a file runs ahead of the alerts by as much as the pipeline
//! holds in flight (a minute of audio and more), so a ring of a fixed number of seconds lost the
//! pre-roll and the alert's start. It holds at most `--pre`, `--post` and `LAG_S` seconds plus
//! its share of `RING_LEAD_VALUES` (what the memory check counts); past that the oldest frames
//! go, and a recording that wanted them starts later, with a warning.

use super::writer::SampleWriter;
use crate::error::Result;
use crate::source::{SampleSource, SourceInfo};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Seconds of samples a ring holds at least beyond the pre-roll (the memory check of `--pre` and
/// `--post` counts them): how far a live input's reader may run ahead of the sink.
pub(crate) const LAG_S: f64 = 10.0;

/// Values the run's rings hold between them beyond their seconds (256 MiB of f32, shared by the
/// tapped inputs), for a file's reader running ahead of the alerts: 72 s of 48 kHz audio was seen.
pub(crate) const RING_LEAD_VALUES: usize = 1 << 26;

/// One open recording of a source.
pub(crate) struct Active {
    pub rule: String,
    pub stream: usize,
    pub writer: SampleWriter,
    /// The first sample frame it holds and the next it takes.
    pub first: u64,
    pub next: u64,
    /// The frame it ends before, once its alert ended (None: still on).
    pub end: Option<u64>,
}

/// A source's newest samples and its open recordings.
pub(crate) struct Ring {
    values: VecDeque<f32>,
    /// Values per sample frame.
    pub width: usize,
    /// Index of the ring's first sample frame in the stream.
    pub start: u64,
    /// Frames before this one may go (the sink's oldest row, less the pre-roll).
    keep_from: u64,
    /// The most frames it holds whatever `keep_from` says.
    most: usize,
    pub recordings: Vec<Active>,
    /// A recording the reader's side could not write (the sink's side fails the run with it).
    pub failed: Option<String>,
}

impl Ring {
    /// A ring of `width` values a frame, holding at most `least` frames and `lead` values more.
    pub(crate) fn new(width: usize, least: usize, lead: usize) -> Self {
        let width = width.max(1);
        Ring {
            values: VecDeque::new(),
            width,
            start: 0,
            keep_from: 0,
            most: least.saturating_add(lead / width).max(1),
            recordings: Vec::new(),
            failed: None,
        }
    }

    /// The frames before `frame` are no longer wanted (the sink has seen every stream's rows
    /// past them, pre-roll included).
    pub(crate) fn keep_from(&mut self, frame: u64) {
        self.keep_from = self.keep_from.max(frame);
    }

    /// Index of the frame after the newest.
    pub(crate) fn end(&self) -> u64 {
        self.start + (self.values.len() / self.width) as u64
    }

    /// Appends sample frames and writes them to the open recordings.
    pub(crate) fn push(&mut self, values: &[f64]) -> std::io::Result<()> {
        // (frames go before the new ones come in: the deque never grows past `most`)
        let (held, incoming) = (self.values.len() / self.width, values.len() / self.width);
        let unwanted = self.keep_from.saturating_sub(self.start) as usize;
        let over = unwanted.max((held + incoming).saturating_sub(self.most));
        let first = over.min(held);
        self.values.drain(..first * self.width);
        self.start += first as u64;
        self.values.extend(values.iter().map(|&v| v as f32));
        let rest = (over - first).min(incoming);
        if rest > 0 {
            self.values.drain(..rest * self.width);
            self.start += rest as u64;
        }
        self.feed()
    }

    /// Samples lost in the source (a gap): the ring starts again after them.
    pub(crate) fn skip(&mut self, frames: u64) {
        let end = self.end() + frames;
        self.values.clear();
        self.start = end;
        for r in &mut self.recordings {
            r.next = r.next.max(end);
        }
    }

    /// Writes every open recording up to the newest frame.
    pub(crate) fn feed(&mut self) -> std::io::Result<()> {
        let end = self.end();
        let (start, width) = (self.start, self.width);
        for r in &mut self.recordings {
            if r.next < start {
                r.next = start; // fell out of the ring: the recording has a hole
            }
            if r.next >= end {
                continue;
            }
            let (a, b) = (
                (r.next - start) as usize * width,
                (end - start) as usize * width,
            );
            let (head, tail) = self.values.as_slices();
            let copy: Vec<f32> = head
                .iter()
                .chain(tail)
                .skip(a)
                .take(b - a)
                .copied()
                .collect();
            let path = crate::types::shown_path(r.writer.path()).to_string();
            (r.writer.append(&copy))
                .map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?;
            r.next = end;
        }
        Ok(())
    }
}

/// A source whose samples also go to a ring.
pub(crate) struct TapSource {
    inner: Box<dyn SampleSource>,
    ring: Arc<Mutex<Ring>>,
    /// An outage the ring has skipped and the reader has not been told of yet.
    outage: u64,
}

impl TapSource {
    pub(crate) fn new(inner: Box<dyn SampleSource>, ring: Arc<Mutex<Ring>>) -> Self {
        TapSource {
            inner,
            ring,
            outage: 0,
        }
    }
}

impl SampleSource for TapSource {
    fn info(&self) -> &SourceInfo {
        self.inner.info()
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        let before = out.len();
        let got = self.inner.read(out, max_frames)?;
        // an outage (--retry) lies before the samples just read: the ring's place skips it first
        let outage = self.inner.take_outage();
        self.outage += outage;
        if let Ok(mut ring) = self.ring.lock() {
            if outage > 0 {
                ring.skip(outage);
            }
            if let Err(e) = ring.push(&out[before..]) {
                // (the sink's recorder fails the run with it at its next row: one line)
                ring.recordings.clear();
                ring.failed.get_or_insert(e.to_string());
            }
        }
        Ok(got)
    }

    fn take_gap(&mut self) -> u64 {
        let gap = self.inner.take_gap();
        if gap > 0 {
            if let Ok(mut ring) = self.ring.lock() {
                ring.skip(gap);
            }
        }
        gap
    }

    fn take_outage(&mut self) -> u64 {
        std::mem::take(&mut self.outage)
    }

    fn take_decode_ns(&mut self) -> u64 {
        self.inner.take_decode_ns()
    }

    fn tuning(&self) -> Option<Arc<crate::types::tuning::Tuning>> {
        self.inner.tuning()
    }
}

/// Stands in for a source while it is being wrapped (never read).
pub(crate) struct Detached(pub SourceInfo);

impl SampleSource for Detached {
    fn info(&self) -> &SourceInfo {
        &self.0
    }

    fn read(&mut self, _out: &mut Vec<f64>, _max_frames: usize) -> Result<usize> {
        Ok(0)
    }
}

/// Wraps `source` in place with a `TapSource` feeding `ring`.
pub(crate) fn wrap(source: &mut Box<dyn SampleSource>, ring: Arc<Mutex<Ring>>) {
    let info = source.info().clone();
    let inner = std::mem::replace(source, Box::new(Detached(info)));
    *source = Box::new(TapSource::new(inner, ring));
}
