//! FFT worker stage: each worker owns one engine and transforms whole batches. After a fatal
//! engine error the worker keeps draining (and discarding) batches so no other stage blocks.
//! With spectral products the worker also shapes each spectrum into its row (`products::Shaping`:
//! bands, a frequency range), in parallel with the other workers.

use super::batcher::{Batch, FrameMeta};
use super::pool::BufferPool;
use super::Control;
use crate::error::FftdError;
use crate::fft::{transform_reduced, Segments};
use crate::fft::{Engine, HostBuf, Sample, TransformSpec};
use crate::products::{Segmenting, Shaping, MAX_SEGMENT_VALUES};
use crossbeam_channel::{Receiver, Sender};

/// A transformed batch: `frames.len()` rows of `spec.values_out()` values, or of the products'
/// columns (× values per bin) when `columns` says so.
pub struct Done<T> {
    pub id: u64,
    pub spec: TransformSpec,
    pub frames: Vec<FrameMeta>,
    pub values: HostBuf<T>,
    /// Columns per row when products shaped the rows (already in output order: no fftshift left).
    pub columns: Option<usize>,
    /// When rows are segments (`--average` reduced by the engine): each row's frame count and
    /// last frame's start; `frames` then holds each segment's first frame.
    pub segments: Option<Vec<SegmentTail>>,
}

/// What a segment row adds to its first frame's record.
#[derive(Clone, Copy, Debug)]
pub struct SegmentTail {
    pub frames: u32,
    pub last_start: u64,
}

impl<T> Done<T> {
    /// Bins (or product columns) per row.
    pub fn columns(&self) -> usize {
        self.columns.unwrap_or(self.spec.bins())
    }

    /// Values per row.
    pub fn width(&self) -> usize {
        self.columns() * self.spec.scale.values_per_bin()
    }
}

pub fn run_worker<T: Sample>(
    mut engine: Box<dyn Engine<T>>,
    rx: Receiver<Batch<T>>,
    tx: Sender<Done<T>>,
    control: &Control,
    (input_pool, output_pool): (&BufferPool<T>, &BufferPool<T>),
    (shaping, segmenting): (Option<&Shaping>, Option<&Segmenting>),
) {
    let mut failed = false;
    for batch in rx {
        if failed {
            continue;
        }
        // band powers are summed by the engine itself (on a device: only the bands come back)
        let bands = shaping
            .and_then(|s| s.plan(&batch.spec))
            .and_then(|p| p.band_weights());
        let per_frame = bands.map_or(batch.spec.values_out(), |b| b.bands());
        // --average: runs of one group's frames reduced by the engine (on a device, there)
        let lengths = segmenting.map(|s| {
            let frames = batch.frames.iter().map(|f| (f.stream, f.seq, f.start));
            // runs bounded by input too: a long run is a device chunk of its own
            let widest = per_frame.max(batch.spec.values_per_frame()).max(1);
            s.cut(frames, MAX_SEGMENT_VALUES / widest)
        });
        let rows = lengths.as_ref().map_or(batch.frames.len(), Vec::len);
        let len = rows * per_frame;
        let mut values = output_pool.take(len);
        values.set_len_for_overwrite(len);
        let span = tracing::trace_span!("batch", id = batch.id, frames = batch.frames.len());
        let busy = std::time::Instant::now();
        let (spec, frames, data) = (&batch.spec, batch.frames.len(), &batch.data);
        let runs = lengths
            .as_deref()
            .zip(segmenting)
            .map(|(lengths, s)| Segments { lengths, op: s.op });
        let reduction = (bands, runs.as_ref());
        let result = span.in_scope(|| {
            transform_reduced(engine.as_mut(), spec, data, frames, reduction, &mut values)
        });
        crate::stats::Counters::add_since(&control.counters.engine_ns, busy);
        match result {
            Ok(()) => {
                input_pool.give(batch.data);
                let (frames, segments) = match lengths {
                    Some(lengths) => segment_frames(&batch.frames, &lengths),
                    None => (batch.frames, None),
                };
                let mut done = Done {
                    id: batch.id,
                    spec: batch.spec,
                    frames,
                    values,
                    columns: bands.map(|b| b.bands()),
                    segments,
                };
                if let Some(shaping) = shaping {
                    let busy = std::time::Instant::now();
                    match bands {
                        Some(_) => shaping.finish_rows(&mut done.values),
                        None => shape(&mut done, shaping, output_pool),
                    }
                    crate::stats::Counters::add_since(&control.counters.engine_ns, busy);
                }
                if tx.send(done).is_err() {
                    failed = true;
                }
            }
            Err(e) => {
                control.fail(FftdError::Runtime(format!(
                    "FFT engine {}: {e}",
                    engine.name()
                )));
                failed = true;
            }
        }
    }
}

/// Replaces a batch's spectra by its product rows (a new buffer; the spectra go back to the pool).
fn shape<T: Sample>(done: &mut Done<T>, shaping: &Shaping, pool: &BufferPool<T>) {
    let Some(plan) = shaping.plan(&done.spec) else {
        return;
    };
    let len = done.frames.len() * plan.width();
    let mut rows = pool.take(len);
    rows.set_len_for_overwrite(len);
    done.columns = shaping.shape(&done.spec, done.frames.len(), &done.values, &mut rows);
    let spectra = std::mem::replace(&mut done.values, rows);
    pool.give(spectra);
}

/// One record per segment (its first frame's, completed when its last frame was) and the tails.
fn segment_frames(
    frames: &[FrameMeta],
    lengths: &[u32],
) -> (Vec<FrameMeta>, Option<Vec<SegmentTail>>) {
    let mut firsts = Vec::with_capacity(lengths.len());
    let mut tails = Vec::with_capacity(lengths.len());
    let mut at = 0usize;
    for &len in lengths {
        let (first, last) = (frames[at], frames[at + len as usize - 1]);
        firsts.push(FrameMeta {
            completed: last.completed,
            ..first
        });
        tails.push(SegmentTail {
            frames: len,
            last_start: last.start,
        });
        at += len as usize;
    }
    (firsts, Some(tails))
}
