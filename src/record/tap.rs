//! The pre-roll ring: a source wrapped by `TapSource` copies every sample frame it reads into its
//! `Ring` (bounded: the pre-roll plus `LAG_S` seconds, for the reader running ahead of the alerts),
//! and writes them on to the recordings that are open. `Recorder` opens and ends recordings from
//! the sink's thread; both sides hold the ring's lock only to copy.

use super::writer::SampleWriter;
use crate::error::Result;
use crate::source::{SampleSource, SourceInfo};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Seconds of samples kept beyond the pre-roll: how far the reader may run ahead of the sink.
pub(crate) const LAG_S: f64 = 10.0;

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
    capacity: usize,
    pub recordings: Vec<Active>,
}

impl Ring {
    pub(crate) fn new(width: usize, capacity_frames: usize) -> Self {
        Ring {
            values: VecDeque::new(),
            width: width.max(1),
            start: 0,
            capacity: capacity_frames.max(1),
            recordings: Vec::new(),
        }
    }

    /// Index of the frame after the newest.
    pub(crate) fn end(&self) -> u64 {
        self.start + (self.values.len() / self.width) as u64
    }

    /// Appends sample frames and writes them to the open recordings.
    pub(crate) fn push(&mut self, values: &[f64]) -> std::io::Result<()> {
        self.values.extend(values.iter().map(|&v| v as f32));
        let over = (self.values.len() / self.width).saturating_sub(self.capacity);
        if over > 0 {
            self.values.drain(..over * self.width);
            self.start += over as u64;
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
            r.writer.append(&copy)?;
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
                tracing::warn!("--record-on-alert: cannot write a recording: {e}");
                ring.recordings.clear();
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
