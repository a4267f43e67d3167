//! FFT worker stage: each worker owns one engine, belongs to one lane (a device instance, see
//! `dispatch`) and transforms whole batches from its lane's queue into buffers of its lane's
//! home, its samples as the batch holds them and its rows as f32 where the run carries them so
//! (`dispatch::carriage`, `Done::rows`). A batch whose device has failed is handed to another
//! lane (`Dispatcher::hand_off`).
//! After a fatal engine error the worker keeps draining (and discarding) batches so no other
//! stage blocks. With spectral products the worker also shapes each spectrum into its row
//! (`products::Shaping`: bands, a frequency range), in parallel with the other workers.

use super::batcher::{Batch, FrameMeta};
use super::dispatch::{AbandonOnPanic, Dispatcher, LaneId};
use super::pool::{BufferPool, Pools};
use super::Control;
use crate::error::FftdError;
use crate::fft::carry::f32s;
use crate::fft::lanes::{Lane, LaneCounters};
use crate::fft::opencl::job_programs::JobPrograms;
use crate::fft::router;
use crate::fft::{BandWeights, Carry, DeviceTimes, Engine, EngineError, HostBuf, TransformSpec};
use crate::fft::{FrameStep, Samples, Segments};
use crate::products::{Finish, Segmenting, Shaping, MAX_SEGMENT_VALUES};
use crate::stats::Counters;
use crate::timeline::{Kind, Phase, ThreadClock};
use crate::types::{InputKind, Precision, Sample};
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A transformed batch: `frames.len()` rows of `spec.values_out()` values, or of the products'
/// columns (× values per bin) when `columns` says so.
pub(crate) struct Done<T> {
    pub id: u64,
    pub spec: TransformSpec,
    pub frames: Vec<FrameMeta>,
    pub values: HostBuf<T>,
    /// Columns per row when products shaped the rows (already in output order: no fftshift left).
    pub columns: Option<usize>,
    /// When rows are segments (`--average` reduced by the engine): each row's frame count and
    /// last frame's start; `frames` then holds each segment's first frame.
    pub segments: Option<Vec<SegmentTail>>,
    /// `values` holds the rows as f32 (narrowed on a device, `dispatch::carriage`): the first
    /// `values.len()` f32 values of its memory (`carry::f32s`).
    pub rows: Carry,
    /// The scale still to apply to `values` (power rows of `--average`), by the encoder that
    /// takes the batch before anything reads it: dB and square roots on the encode threads, not
    /// on the one averaging thread. `Finish::AS_IS` for rows as they are.
    pub pending: Finish,
}

/// What a segment row adds to its first frame's record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentTail {
    pub frames: u32,
    pub last_start: u64,
}

impl<T> Done<T> {
    /// Bins (or product columns) per row.
    pub(crate) fn columns(&self) -> usize {
        self.columns.unwrap_or(self.spec.bins())
    }

    /// Values per row.
    pub(crate) fn width(&self) -> usize {
        self.columns() * self.spec.scale.values_per_bin()
    }
}

/// What a worker shares with the other workers and the other stages. The workers' threads are
/// not scoped (a worker stuck on a hung device must not keep the run from ending, `dispatch`):
/// they hold it through an `Arc`.
pub(crate) struct WorkerContext<T: Sample> {
    pub control: Control,
    pub dispatcher: Dispatcher<T>,
    pub pools: Pools<T>,
    pub products: (Option<Shaping>, Option<Segmenting>),
}

impl<T: Sample> WorkerContext<T> {
    fn products(&self) -> (Option<&Shaping>, Option<&Segmenting>) {
        (self.products.0.as_ref(), self.products.1.as_ref())
    }
}

/// The finished batches as the stage after the workers receives them: until every worker has
/// ended, or, once the run has given up a stalled lane (`Dispatcher::abandoned`), until none is
/// left in the channel (a stuck worker never ends, nor closes the channel).
pub(super) struct FinishedBatches<T> {
    pub rx: Receiver<Done<T>>,
    /// `Dispatcher::abandoned`, or a channel that never disconnects for a stage fed by another.
    pub abandoned: Receiver<()>,
}

impl<T> Clone for FinishedBatches<T> {
    fn clone(&self) -> Self {
        FinishedBatches {
            rx: self.rx.clone(),
            abandoned: self.abandoned.clone(),
        }
    }
}

impl<T> FinishedBatches<T> {
    /// The next finished batch; None at the end.
    pub(super) fn recv(&self) -> Option<Done<T>> {
        crossbeam_channel::select! {
            recv(self.rx) -> done => done.ok(),
            recv(self.abandoned) -> _ => self.rx.try_recv().ok(),
        }
    }

    /// Every finished batch, in the order they arrive.
    pub(super) fn iter(&self) -> impl Iterator<Item = Done<T>> + '_ {
        std::iter::from_fn(|| self.recv())
    }
}

/// The lane a worker belongs to: its id, its record and its queue.
pub(crate) struct LaneQueue<T> {
    pub id: LaneId,
    pub lane: Arc<Lane>,
    pub rx: Receiver<Batch<T>>,
}

/// How a worker dealt with one batch.
enum Handled<T> {
    /// The finished batch, and the frames it brought in.
    Done(Done<T>, usize),
    /// Its device failed: another lane has the batch now.
    HandedOff,
    Failed(EngineError),
}

/// Tries on one batch at most. A batch is handed off, or given back when no other lane works
/// and then computed by this worker's CPU engine: two tries; more means something is wrong.
const MAX_HANDOFFS: usize = 64;

/// Moves the device's share of a batch's engine time from `fft` to upload, kernels and
/// download (`thread_parts`), and adds its event times as they are to the lane's device times
/// (`--stats`' devices line and bound: a device's copies and kernels, not a thread's time).
fn split_device_time(
    clock: &mut ThreadClock<'_>,
    counters: &LaneCounters,
    (device, engine): (DeviceTimes, Duration),
) {
    let raw = [device.upload_ns, device.kernel_ns, device.download_ns];
    for (counter, ns) in counters.device_ns.iter().zip(raw) {
        counter.fetch_add(ns, Ordering::Relaxed);
    }
    for (phase, ns) in thread_parts(raw, engine) {
        clock.move_ns(Phase::Fft, phase, ns);
    }
}

/// A batch's device event times (uploads, kernels, downloads) as parts of the host's time in
/// the engine: scaled down to it where they sum past it (a batch's chunks are pipelined, so
/// their events overlap).
fn thread_parts(raw: [u64; 3], engine: Duration) -> [(Phase, u64); 3] {
    let sum: u64 = raw.iter().sum();
    let engine_ns = engine.as_nanos() as u64;
    let scale = if sum > engine_ns {
        engine_ns as f64 / sum as f64
    } else {
        1.0
    };
    let phases = Phase::DEVICE_PARTS;
    std::array::from_fn(|i| (phases[i], (raw[i] as f64 * scale) as u64))
}

pub(super) fn run_worker<T: Sample>(
    mut engine: Box<dyn Engine<T>>,
    queue: LaneQueue<T>,
    tx: Sender<Done<T>>,
    ctx: &WorkerContext<T>,
) {
    let _abandon = AbandonOnPanic(&ctx.dispatcher);
    let mut failed = false;
    let mut clock = ctx.control.clock(Kind::Worker, Phase::WorkerInput);
    let mut queue_tracks = crate::trace::device_timeline::QueueTracks::default();
    for batch in queue.rx.iter() {
        let id = batch.id;
        let stream = batch.frames.first().map(|f| f.stream);
        clock.lap(Phase::WorkerInput);
        ctx.dispatcher.received(queue.id, id);
        if failed {
            ctx.dispatcher.finished(queue.id, id);
            continue;
        }
        // a retired lane (the CPU lane that bridged a device's start-up) still computes the
        // batches queued to it: they are the run's oldest, and handed on they raced the
        // readers' new batches for room in the device's queue, held up to half a second while
        // the sink kept every later batch for order (an H200 at 16 cores, session 20)
        let handled = work_on(engine.as_mut(), batch, &queue, ctx);
        let (from, to) = clock.lap(Phase::Fft);
        clock.span(Phase::Fft.span_name(), from, to, Some(id), stream);
        if let Some(device) = engine.take_device_times() {
            let times = (device, to.duration_since(from));
            split_device_time(&mut clock, &queue.lane.counters, times);
        }
        if let Some(tracer) = clock.tracer() {
            queue_tracks.record(tracer, engine.take_device_trace(), id, stream);
        }
        match handled {
            Handled::HandedOff => continue, // the lane that took it finishes it
            Handled::Done(done, frames) => {
                let counters = &queue.lane.counters;
                if counters.batches.fetch_add(1, Ordering::Relaxed) == 0 && !queue.lane.is_cpu {
                    // a device's first batch is back: a CPU lane that bridged its start-up
                    // may stop now, not when the device joined (issue 41's hole)
                    ctx.dispatcher.lane_set().first_device_batch_returned();
                }
                counters.frames.fetch_add(frames as u64, Ordering::Relaxed);
                // the device is done: a slow stage after the workers is not a stall
                ctx.dispatcher.computed(queue.id, id);
                if tx.send(done).is_err() {
                    failed = true;
                }
                clock.lap_span(Phase::WorkerOutput, Some(id), stream);
            }
            Handled::Failed(e) => {
                ctx.control.fail(FftdError::Runtime(format!(
                    "FFT engine {}: {e}",
                    engine.name()
                )));
                failed = true;
            }
        }
        ctx.dispatcher.finished(queue.id, id);
    }
    // the lane is done: a device's engine (its context, queues and device memory) is left to
    // the process's exit, which frees it at once (`left_behind::keep`)
    if engine.pinned_memory().is_some() {
        crate::left_behind::keep(Box::new(engine));
    }
}

/// Runs `engine` once on one frame of zeros with the run's first `spec` (and the band sums its
/// products reduce on the engine), before its lane asks for work (`Engine::warm_up`): a device
/// builds its programs and first buffers here, and PoCL compiles each kernel (at its first
/// launch), not on the run's first batch, where the stall watch would time it as the device's
/// and a CPU lane that stopped would wait for it (issue 41). What it computes is dropped; an
/// error is left to the first real batch to report.
pub(super) fn warm_up<T: Sample>(
    engine: &mut dyn Engine<T>,
    spec: &TransformSpec,
    ctx: &WorkerContext<T>,
) {
    let bands = band_weights(ctx.products().0, spec);
    let per_frame = row_values(ctx.products().0, spec);
    // carried as the device's batches will be (`carry`: its widen and narrow kernels too)
    let carriage = ctx.dispatcher.device_carriage();
    // `--average`'s segment kernel too: one run of the one frame
    let one_run = [1u32];
    let runs = (ctx.products().1).map(|s| Segments {
        lengths: &one_run,
        op: s.op,
    });
    let carried = (carriage.samples_f32, carriage.rows_f32);
    let reduction = (bands, runs.as_ref());
    let warmed = crate::fft::warm::warm_once(engine, spec, carried, reduction, per_frame);
    if let Err(e) = warmed {
        tracing::debug!(engine = engine.name(), "warm-up: {e}");
    }
}

/// What `warm_up` builds on the device at `address` (`opencl:P:D`) for `spec` in this run:
/// the programs a builder of their own makes (`fft::opencl::job_programs`) where the run ends
/// first.
pub(super) fn programs_of_warm_up<T: Sample>(
    address: &str,
    spec: &TransformSpec,
    ctx: &WorkerContext<T>,
) -> JobPrograms {
    let carriage = ctx.dispatcher.device_carriage();
    JobPrograms {
        device: address.to_string(),
        frame: spec.n,
        complex: spec.kind == InputKind::Complex,
        window: spec.window,
        scale: spec.scale,
        precision: match T::NAME {
            "f64" => Precision::F64,
            _ => Precision::F32,
        },
        bands: band_weights(ctx.products().0, spec).is_some(),
        runs: ctx.products().1.is_some(),
        samples_f32: carriage.samples_f32,
        rows_f32: carriage.rows_f32,
    }
}

/// `warm_up` for every engine of a device's lane (a CPU lane has nothing to warm), before the
/// lane joins the dispatcher: a device named outright (`Workers::new`) or one that joins late
/// (`late_join`).
pub(super) fn warm_up_lane<T: Sample>(
    lane: &mut router::LaneEngines<T>,
    spec: &TransformSpec,
    ctx: &WorkerContext<T>,
) {
    if !lane.lane.is_cpu {
        (lane.engines.iter_mut()).for_each(|e| warm_up(e.as_mut(), spec, ctx));
    }
}

/// Transforms `batch`, handing it to another lane when the engine says its device failed (and
/// computing it here when no lane takes it).
fn work_on<T: Sample>(
    engine: &mut dyn Engine<T>,
    mut batch: Batch<T>,
    queue: &LaneQueue<T>,
    ctx: &WorkerContext<T>,
) -> Handled<T> {
    for _ in 0..MAX_HANDOFFS {
        match transform_batch(engine, &batch, queue, ctx) {
            Ok(done) => {
                let frames = batch.frames.len();
                return Handled::Done(done.finish(batch, queue.id, ctx), frames);
            }
            Err(EngineError::HandOff { .. }) => match ctx.dispatcher.hand_off(batch, queue.id) {
                Ok(()) => return Handled::HandedOff,
                Err(back) => batch = back, // no live lane left: the engine computes it here
            },
            Err(e) => return Handled::Failed(e),
        }
    }
    Handled::Failed(EngineError::Device {
        engine: "router",
        what: format!("batch {} could not be handed on", batch.id),
    })
}

/// The band matrix the engine sums for `spec`'s frames, if the products have one: band powers
/// are summed by the engine itself (on a device: only the bands come back).
fn band_weights<'a>(shaping: Option<&'a Shaping>, spec: &TransformSpec) -> Option<&'a BandWeights> {
    shaping
        .and_then(|s| s.plan(spec))
        .and_then(|p| p.band_weights())
}

/// Values per frame of the rows an engine gives for `spec`: the bands it sums, else the spectrum.
pub(super) fn row_values(shaping: Option<&Shaping>, spec: &TransformSpec) -> usize {
    band_weights(shaping, spec).map_or(spec.values_out(), |b| b.bands())
}

/// A batch's rows, before its frames' records are attached.
struct Transformed<T> {
    values: HostBuf<T>,
    /// The rows came back as f32 (`Done::rows`).
    rows: Carry,
    /// Run lengths when the engine reduced runs (`--average`).
    lengths: Option<Vec<u32>>,
    /// Bands per row when the engine summed bands.
    columns: Option<usize>,
}

/// Runs the engine on one batch, with the products it reduces (bands, `--average` runs), into a
/// buffer of the worker's lane.
fn transform_batch<T: Sample>(
    engine: &mut dyn Engine<T>,
    batch: &Batch<T>,
    queue: &LaneQueue<T>,
    ctx: &WorkerContext<T>,
) -> Result<Transformed<T>, EngineError> {
    let (shaping, segmenting) = ctx.products();
    let output_pool = &ctx.pools.spectra;
    let bands = band_weights(shaping, &batch.spec);
    let per_frame = row_values(shaping, &batch.spec);
    // --average: runs of one group's frames reduced by the engine (on a device, there)
    let lengths = segmenting.map(|s| {
        let frames = batch.frames.iter().map(|f| (f.stream, f.seq, f.start));
        // runs bounded by input too: a long run is a device chunk of its own
        let widest = per_frame.max(batch.spec.values_per_frame()).max(1);
        s.cut(frames, MAX_SEGMENT_VALUES / widest)
    });
    let rows = lengths.as_ref().map_or(batch.frames.len(), Vec::len);
    let len = rows * per_frame;
    let mut values = output_pool.take(queue.id, len);
    values.set_len_for_overwrite(len);
    let span = tracing::trace_span!("batch", id = batch.id, frames = batch.frames.len());
    let busy = std::time::Instant::now();
    let spec = &batch.spec;
    let runs = lengths
        .as_deref()
        .zip(segmenting)
        .map(|(lengths, s)| Segments { lengths, op: s.op });
    let reduction = (bands, runs.as_ref());
    let rows = Carry::f32_if(ctx.dispatcher.carriage(queue.id).rows_f32);
    let result = span
        .in_scope(|| engine.transform_carried(spec, batch.samples(), rows, reduction, &mut values));
    Counters::add_since(&ctx.control.counters.engine_ns, busy);
    Counters::add_since(&queue.lane.counters.busy_ns, busy);
    match result {
        Ok(rows) => Ok(Transformed {
            values,
            rows,
            lengths,
            columns: bands.map(|b| b.bands()),
        }),
        Err(e) => {
            output_pool.give(values);
            Err(e)
        }
    }
}

impl<T: Sample> Transformed<T> {
    /// The finished batch: its input buffer back to the pool, its rows shaped by the products.
    fn finish(self, batch: Batch<T>, lane: LaneId, ctx: &WorkerContext<T>) -> Done<T> {
        let (input_pool, output_pool) = (&ctx.pools.samples, &ctx.pools.spectra);
        let (shaping, _) = ctx.products();
        input_pool.give(batch.data);
        let (frames, segments) = match &self.lengths {
            Some(lengths) => segment_frames(&batch.frames, lengths),
            None => (batch.frames, None),
        };
        let mut done = Done {
            id: batch.id,
            spec: batch.spec,
            frames,
            values: self.values,
            columns: self.columns,
            segments,
            rows: self.rows,
            pending: Finish::AS_IS,
        };
        // band rows come from the engine finished (`BandWeights::finish`); others are shaped
        if let Some(shaping) = shaping.filter(|_| self.columns.is_none()) {
            let busy = std::time::Instant::now();
            shape(&mut done, shaping, (output_pool, lane));
            Counters::add_since(&ctx.control.counters.engine_ns, busy);
        }
        done
    }
}

/// Replaces a batch's spectra by its product rows (a new buffer; the spectra go back to the pool),
/// or finishes them in place where the rows are the spectra (every bin, nothing added: an
/// `--average` of whole spectra, whose runs were 0.4-0.9 ms of a device worker's batch, copied
/// bin by bin, against 0.1 ms of device commands).
fn shape<T: Sample>(done: &mut Done<T>, shaping: &Shaping, (pool, lane): (&BufferPool<T>, LaneId)) {
    let Some(plan) = shaping.plan(&done.spec) else {
        return;
    };
    if plan.keeps_spectrum() {
        shaping.finish_rows(&mut done.values);
        done.columns = Some(plan.columns());
        return;
    }
    let len = done.frames.len() * plan.width();
    let mut rows = pool.take(lane, len);
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

impl<T: Sample> Batch<T> {
    /// The batch's frames as its buffer holds them (`Batch::samples`).
    fn samples(&self) -> Samples<'_, T> {
        let (count, step) = (self.frames.len(), self.step);
        match self.samples {
            Carry::Run => Samples::Run(FrameStep {
                data: &self.data,
                count,
                step,
            }),
            Carry::F32 => Samples::F32(FrameStep {
                data: &f32s(&self.data)[..self.data.len()],
                count,
                step,
            }),
        }
    }
}
