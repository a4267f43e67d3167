//! Averaging stage (`--average`): one thread between the FFT workers and the encoders. It puts
//! batches back in batch order (each stream's frames then arrive in frame order), pushes every
//! frame's power row (or an engine's run of them) into its stream's `products::average::Averager`
//! and sends the rows they emit on as batches numbered from 0 (the sink's order), with the
//! requested scale left to the encode threads (`Done::pending`).
//! At the end of the input every stream's last, partial group is emitted too.
//! With measurements (`products::measure`) every run passes here (one frame per row without
//! `--average`): each stream's level meter follows its frames, and rows are finished by
//! `Measuring::finish_row` (columns in the requested scale, then the measurements).

use super::batcher::FrameMeta;
use super::pool::BufferPool;
use super::worker::{Done, FinishedBatches};
use super::Control;
use crate::fft::{HostBuf, TransformSpec};
use crate::products::average::{AverageMode, AverageSpec, AveragedRow, Averager, Segment};
use crate::products::measure::cross::{CrossPair, CrossPlan, CrossRow};
use crate::products::measure::levels::LevelMeter;
use crate::products::measure::Measuring;
use crate::products::Finish;
use crate::stats::Counters;
use crate::types::Sample;
use crate::types::StreamMeta;
use crossbeam_channel::Sender;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What the stage needs to know.
pub(crate) struct AveragingStage<'a> {
    pub spec: AverageSpec,
    pub mode: AverageMode,
    /// Samples between frame starts.
    pub hop: usize,
    pub streams: &'a [StreamMeta],
    /// The requested scale of the averaged power rows (applied by the encoders, or here with
    /// measurements).
    pub finish: Finish,
    /// Numbers the batches it sends (from 0; shared with the live view, which must know the
    /// next one).
    pub numbering: Arc<AtomicU64>,
    /// The measurement layer, when the run measures.
    pub measuring: Option<Measuring>,
    /// `--cross`: the channel pairs, whose frames are combined instead of averaged.
    pub cross: Option<CrossPlan>,
}

/// `--cross`: each pair's accumulator and rows written.
struct CrossState {
    pairs: Vec<CrossPair>,
    rows: Vec<u64>,
}

/// One stream's averager and what its rows need.
struct StreamAverage<T> {
    stream: usize,
    averager: Averager<T>,
    spec: TransformSpec,
    columns: Option<usize>,
    rows: u64,
    meter: Option<LevelMeter>,
}

pub(super) fn run_averaging<T: Sample>(
    rx: FinishedBatches<T>,
    tx: Sender<Done<T>>,
    stage: &AveragingStage<'_>,
    control: &Control,
    values_pool: &BufferPool<T>,
) {
    let mut states: Vec<Option<StreamAverage<T>>> = stage.streams.iter().map(|_| None).collect();
    let mut cross = stage.cross.as_ref().map(|plan| CrossState {
        pairs: plan.accumulators(),
        rows: vec![0; plan.pairs.len()],
    });
    let mut spec_seen: Option<TransformSpec> = None;
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
            spec_seen = Some(batch.spec);
            let averaged = match (&mut cross, &stage.cross) {
                (Some(state), Some(plan)) => Ok(cross_batch(&batch, plan, state, control)),
                _ => average_batch(&batch, stage, &mut states, control),
            };
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
    if let (Some(state), Some(plan), Some(spec)) = (&mut cross, &stage.cross, spec_seen) {
        let mut out = RowsOut::new(Finish::AS_IS, None);
        for (p, pair) in state.pairs.iter_mut().enumerate() {
            if let Some(row) = pair.take() {
                out.push_cross(plan.pairs[p], &mut state.rows[p], Instant::now(), row);
            }
        }
        if let Some(rows) = out.into_done(cross_spec(spec), None) {
            let _ = send(rows);
        }
        return;
    }
    for state in states.iter_mut().flatten() {
        if let Some(rows) = finish_stream(state, stage) {
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
    let measuring = stage.measuring.as_ref();
    let mut out = RowsOut::new(stage.finish, measuring);
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
                meter: measuring.and_then(|m| m.meter(frame.stream)),
            }),
        };
        let power = &batch.values[i * width..(i + 1) * width];
        let (stream, completed) = (frame.stream, frame.completed);
        let total = measuring.and_then(|m| m.total(stream, power));
        if let (Some(meter), Some(total)) = (state.meter.as_mut(), total) {
            meter.push(total);
        }
        let (rows, meter) = (&mut state.rows, &mut state.meter);
        let tail = batch.segments.as_ref().and_then(|t| t.get(i));
        let segment = Segment {
            first_frame: frame.seq,
            first_start: frame.start,
            last_start: tail.map_or(frame.start, |t| t.last_start),
            frames: tail.map_or(1, |t| t.frames as usize),
        };
        state.averager.push_segment(segment, power, &mut |row| {
            out.push((stream, rows, meter.as_mut()), completed, row)
        });
    }
    Ok(out.into_done(batch.spec, batch.columns))
}

/// `--cross`: a batch's frames into their pairs' accumulators; the rows completed, as a batch.
fn cross_batch<T: Sample>(
    batch: &Done<T>,
    plan: &CrossPlan,
    state: &mut CrossState,
    control: &Control,
) -> Option<Done<T>> {
    let width = batch.width();
    let mut out = RowsOut::new(Finish::AS_IS, None);
    for (i, frame) in batch.frames.iter().enumerate() {
        let Some((p, side)) = plan.sides.get(frame.stream).copied().flatten() else {
            continue; // another channel
        };
        if control.is_cut(frame.stream, frame.seq) {
            continue;
        }
        let spectrum = batch.values[i * width..(i + 1) * width]
            .iter()
            .map(|v| v.into_f64())
            .collect();
        let (rows, completed) = (&mut state.rows[p], frame.completed);
        state.pairs[p].push(side, (frame.seq, frame.start), spectrum, &mut |row| {
            out.push_cross(plan.pairs[p], rows, completed, row)
        });
    }
    out.into_done(cross_spec(batch.spec), None)
}

/// The spec of `--cross` rows: one value per column (csd's re and im are columns of their own).
fn cross_spec(spec: TransformSpec) -> TransformSpec {
    TransformSpec {
        scale: crate::fft::Scale::Spectrum,
        ..spec
    }
}

/// A stream's last (partial) group, as a batch of one row (None when it has no frame left).
fn finish_stream<T: Sample>(
    state: &mut StreamAverage<T>,
    stage: &AveragingStage<'_>,
) -> Option<Done<T>> {
    let mut out = RowsOut::new(stage.finish, stage.measuring.as_ref());
    let (stream, rows, now) = (state.stream, &mut state.rows, Instant::now());
    let meter = &mut state.meter;
    state
        .averager
        .finish(&mut |row| out.push((stream, rows, meter.as_mut()), now, row));
    out.into_done(state.spec, state.columns)
}

/// Rows emitted while a batch is averaged, with their frame records.
struct RowsOut<'a, T> {
    finish: Finish,
    measuring: Option<&'a Measuring>,
    frames: Vec<FrameMeta>,
    values: Vec<T>,
    /// Values per finished row, when measurements change it.
    width: Option<usize>,
}

impl<'a, T: Sample> RowsOut<'a, T> {
    fn new(finish: Finish, measuring: Option<&'a Measuring>) -> Self {
        RowsOut {
            finish,
            measuring,
            frames: Vec::new(),
            values: Vec::new(),
            width: None,
        }
    }

    /// Adds an emitted row of `stream` (its `rows`-th; `meter`: its level meter): finished here
    /// with measurements, else left to the encoders (`into_done`'s `pending`).
    fn push(
        &mut self,
        (stream, rows, meter): (usize, &mut u64, Option<&mut LevelMeter>),
        completed: Instant,
        row: AveragedRow<T>,
    ) {
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
        if let Some(measuring) = self.measuring {
            let start = self.values.len();
            measuring.finish_row(stream, finish, &row.values, meter, &mut self.values);
            self.width = Some(self.values.len() - start);
            return;
        }
        self.values.extend_from_slice(&row.values); // finished by the encoders (`pending`)
    }

    /// Adds a `--cross` row of the pair whose channel A is `stream` (at `rate`).
    fn push_cross(
        &mut self,
        (stream, rate): (usize, f64),
        rows: &mut u64,
        completed: Instant,
        row: CrossRow,
    ) {
        self.frames.push(FrameMeta {
            stream,
            seq: *rows,
            start: row.first_start,
            time_s: Some(row.first_start as f64 / rate),
            frames: 1, // a cross-spectrum row: rtl-power's sample count does not apply
            completed,
        });
        *rows += 1;
        self.width = Some(row.values.len());
        self.values.extend(row.values.into_iter().map(T::of_f64));
    }

    fn into_done(self, spec: TransformSpec, columns: Option<usize>) -> Option<Done<T>> {
        let columns = self.width.or(columns);
        if self.frames.is_empty() {
            return None;
        }
        Some(Done {
            id: 0, // numbered when sent
            spec,
            frames: self.frames,
            values: HostBuf::from_vec(self.values),
            columns,
            segments: None,
            rows: crate::fft::Carry::Run,
            pending: match self.measuring {
                Some(_) => Finish::AS_IS, // `Measuring::finish_row` finished them
                None => self.finish,
            },
        })
    }
}
