//! Averaging stage (`--average`): one thread between the FFT workers and the encoders. It puts
//! batches back in batch order (each stream's frames then arrive in frame order), pushes every
//! frame's power row into its stream's `products::average::Averager`, applies the requested scale
//! to the rows they emit and sends those rows on as batches numbered from 0 (the sink's order).
//! At the end of the input every stream's last, partial group is emitted too.

use super::batcher::FrameMeta;
use super::pool::BufferPool;
use super::worker::{Done, FinishedBatches};
use super::Control;
use crate::fft::{HostBuf, Sample, TransformSpec};
use crate::products::average::{AverageMode, AverageSpec, AveragedRow, Averager, Segment};
use crate::products::Finish;
use crate::sink::StreamMeta;
use crate::stats::Counters;
use crossbeam_channel::Sender;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What the stage needs to know.
pub struct AveragingStage<'a> {
    pub spec: AverageSpec,
    pub mode: AverageMode,
    /// Samples between frame starts.
    pub hop: usize,
    pub streams: &'a [StreamMeta],
    /// The requested scale, applied to each averaged power row.
    pub finish: Finish,
    /// Numbers the batches it sends (from 0; shared with the live view, which must know the
    /// next one).
    pub numbering: Arc<AtomicU64>,
}

/// One stream's averager and what its rows need.
struct StreamAverage<T> {
    stream: usize,
    averager: Averager<T>,
    spec: TransformSpec,
    columns: Option<usize>,
    rows: u64,
}

pub fn run_averaging<T: Sample>(
    rx: FinishedBatches<T>,
    tx: Sender<Done<T>>,
    stage: &AveragingStage<'_>,
    control: &Control,
    values_pool: &BufferPool<T>,
) {
    let mut states: Vec<Option<StreamAverage<T>>> = stage.streams.iter().map(|_| None).collect();
    let mut reorder: BTreeMap<u64, Done<T>> = BTreeMap::new();
    let mut next = 0u64;
    // --trace: a span per batch averaged (the sends to the encoders included)
    let mut track = crate::trace::Track::new(control.tracer.as_deref(), "averaging");
    let send = |done: Done<T>| {
        let id = stage.numbering.fetch_add(1, Ordering::SeqCst);
        tx.send(Done { id, ..done }).is_ok()
    };
    // after the last batch, once more (None): batches a failed input's numbers held back
    for arrived in rx.iter().map(Some).chain(std::iter::once(None)) {
        if let Some(done) = arrived {
            reorder.insert(done.id, done);
            Counters::raise(&control.counters.reorder_peak, reorder.len() as u64);
        }
        while let Some(batch) = control.next_in_order(&mut next, &mut reorder) {
            let busy = std::time::Instant::now();
            let ids = (Some(batch.id), batch.frames.first().map(|f| f.stream));
            let averaged = average_batch(&batch, stage, &mut states, control);
            values_pool.give(batch.values); // the spectra buffer goes back to the workers
            match averaged {
                Ok(Some(rows)) => {
                    if !send(rows) {
                        return;
                    }
                }
                Ok(None) => {}
                Err(e) => return control.fail(crate::error::FftdError::Usage(e)),
            }
            if let Some(track) = &mut track {
                track.span_since("average", busy, ids);
            }
        }
    }
    for state in states.iter_mut().flatten() {
        if let Some(rows) = finish_stream(state, stage.finish) {
            if !send(rows) {
                return;
            }
        }
    }
}

/// Pushes a batch's rows into their streams' averagers; the rows they emit, as a batch.
fn average_batch<T: Sample>(
    batch: &Done<T>,
    stage: &AveragingStage<'_>,
    states: &mut [Option<StreamAverage<T>>],
    control: &Control,
) -> Result<Option<Done<T>>, String> {
    let width = batch.width();
    let mut out = RowsOut::new(stage.finish);
    for (i, frame) in batch.frames.iter().enumerate() {
        if control.is_cut(frame.stream, frame.seq) {
            continue; // past a failed input's cut (`Control::cut_stream`)
        }
        let state = match &mut states[frame.stream] {
            Some(state) => state,
            slot => slot.insert(StreamAverage {
                stream: frame.stream,
                averager: Averager::new(
                    stage
                        .spec
                        .grouping(stage.streams[frame.stream].rate, stage.hop)?,
                    stage.mode,
                    width,
                ),
                spec: batch.spec,
                columns: batch.columns,
                rows: 0,
            }),
        };
        let power = &batch.values[i * width..(i + 1) * width];
        let (stream, completed) = (frame.stream, frame.completed);
        let rows = &mut state.rows;
        let tail = batch.segments.as_ref().and_then(|t| t.get(i));
        let segment = Segment {
            first_frame: frame.seq,
            first_start: frame.start,
            last_start: tail.map_or(frame.start, |t| t.last_start),
            frames: tail.map_or(1, |t| t.frames as usize),
        };
        state.averager.push_segment(segment, power, &mut |row| {
            out.push(stream, rows, completed, row)
        });
    }
    Ok(out.into_done(batch.spec, batch.columns))
}

/// A stream's last (partial) group, as a batch of one row (None when it has no frame left).
fn finish_stream<T: Sample>(state: &mut StreamAverage<T>, finish: Finish) -> Option<Done<T>> {
    let mut out = RowsOut::new(finish);
    let (stream, rows, now) = (state.stream, &mut state.rows, Instant::now());
    state
        .averager
        .finish(&mut |row| out.push(stream, rows, now, row));
    out.into_done(state.spec, state.columns)
}

/// Rows emitted while a batch is averaged, with their frame records.
struct RowsOut<T> {
    finish: Finish,
    frames: Vec<FrameMeta>,
    values: Vec<T>,
}

impl<T: Sample> RowsOut<T> {
    fn new(finish: Finish) -> Self {
        RowsOut {
            finish,
            frames: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Adds an emitted row of `stream` (its `rows`-th), finishing its values.
    fn push(&mut self, stream: usize, rows: &mut u64, completed: Instant, row: AveragedRow<T>) {
        self.frames.push(FrameMeta {
            stream,
            seq: *rows,
            start: row.first_start_sample,
            time_s: Some(row.time_s),
            frames: u32::try_from(row.frames).unwrap_or(u32::MAX),
            completed,
        });
        *rows += 1;
        let finish = self.finish;
        self.values.extend(
            row.values
                .iter()
                .map(|v| T::of_f64(finish.apply(v.into_f64()))),
        );
    }

    fn into_done(self, spec: TransformSpec, columns: Option<usize>) -> Option<Done<T>> {
        if self.frames.is_empty() {
            return None;
        }
        let mut values = HostBuf::heap(self.values.len());
        values.extend_from_slice(&self.values);
        Some(Done {
            id: 0, // numbered when sent
            spec,
            frames: self.frames,
            values,
            columns,
            segments: None,
        })
    }
}
