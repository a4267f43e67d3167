//! A run's stages, assembled (`Stages::assemble`: products, outputs, live view, the FFT side,
//! alerts) and wired (`Stages::run_threads`, the one function that shows the data path: source →
//! frame → batch → fft → products → encode → sink): sequential readers and the progress line,
//! the dispatcher's producers (range readers, batcher), the FFT workers with the stall watcher
//! and the lanes that join late, averaging, encoders, and the sink on the calling thread.
//! Each stage gets its own spec or view of the run (`ReadSpec`, `BatchSpec`, `EncodeStage`,
//! `SinkStage`).

use super::averaging::AveragingStage;
use super::dispatch::carriage::RunFacts;
use super::dispatch::StopFlags;
use super::fft_side::{EngineLanes, Handoff, Workers};
use super::live_view::LiveView;
use super::outputs::{RowsPlanned, Sinks};
use super::plan::{Planned, ReaderThreads, Taps};
use super::run_steps::Early;
use super::{
    average_stage, averaging, batcher, encode, encode_threads, late_join,
    late_join::{LateJoin, LateLanes},
    live_view, pool, range_reader, reader, sink_stage, wire_alerts, worker, Control, JoinedLane,
    StreamWritten,
};
use crate::alerts::level::BandLevels;
use crate::error::{FftdError, Result};
use crate::fft::TransformSpec;
use crate::frame::{Frame, FrameSize};
use crate::limits;
use crate::pipeline::spec::{BatchSpec, ReadSpec, RunSpec};
use crate::products::measure::MeasureLayout;
use crate::sink::destination::Destination;
use crate::sink::output::{open_files_budget, Outputs};
use crate::sink::Encoder;
use crate::stats::Latency;
use crate::types::Signals;
use crate::types::{InputKind, Sample, StreamMeta};
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::Scope;
use std::time::Instant;

/// Everything the stages' threads share, assembled before any of them starts.
pub(super) struct Stages<'a, T: Sample> {
    run_spec: &'a RunSpec,
    planned: &'a Planned,
    pub(super) readers: ReaderThreads,
    reading: ReadSpec,
    batching: BatchSpec,
    /// A progress total when every sample count is known up front (range-read inputs only).
    total_samples: Option<u64>,
    show_progress: bool,
    /// Stops the progress line.
    finished: AtomicBool,
    /// `--average`: one ordered stage between the workers and the encoders.
    averaging: Option<AveragingStage<'a>>,
    layout: Option<Arc<MeasureLayout>>,
    /// `--alert`'s levels, measured by the encode threads.
    band_levels: Option<BandLevels>,
    pub(super) workers: Workers<T>,
    pub(super) encoders: usize,
    bytes_pool: pool::BytePool,
    pub(super) sinks: Sinks<T>,
    pub(super) meta_file: Option<crate::types::deferred_file::DeferredFile>,
    pub(super) live_view: Option<LiveView>,
    /// `/spectra`'s NDJSON rows, with a live view.
    live_rows: Option<Box<dyn Encoder<T>>>,
}

/// What the threads leave: each stream's rows written, and when the sink ended.
pub(super) struct Ran {
    pub(super) written: Vec<StreamWritten>,
    pub(super) sink_ended: Instant,
}

impl<'a, T: Sample> Stages<'a, T> {
    /// The products, the outputs, the live view, the FFT side and the alerts, in this order.
    pub(super) fn assemble(
        run_spec: &'a RunSpec,
        planned: &'a Planned,
        taps: Taps,
        engines: EngineLanes<T>,
        early: Early,
        stop: &Arc<AtomicBool>,
        started: Instant,
    ) -> Result<(Self, Handoff<T>)> {
        let Taps { recorder, shaping } = taps;
        let streams = &planned.streams[..];
        let averaging = average_stage(run_spec, streams, planned.frame())?;
        let layout = (averaging.as_ref())
            .and_then(|a| a.measuring.as_ref())
            .map(|m| m.layout.clone());
        let segmenting = planned.segmenting(run_spec, early.live)?;
        let planned_rows = planned.rows(averaging.is_some());
        let rows = RowsPlanned {
            streams,
            frame: planned.frame(),
            planned: &planned_rows,
            layout: layout.as_ref(),
        };
        check_named_bins(run_spec, streams, planned.frame().0)?; // (before any output opens)
        let mut sinks = Sinks::<T>::open(run_spec, rows, early.nats, stop, started)?;
        let mut control = Control::new(stop.clone());
        control.tracer = sinks.tracer.take();
        let live_view = (early.listener)
            .map(|listener| live_view::start(run_spec, listener, streams, &averaging, &control))
            .transpose()?;
        let live_rows = live_view
            .as_ref()
            .map(|_| live_view::rows_encoder(run_spec, layout.as_ref()));
        let encoders = encode_threads();
        // a late lane's pinned buffers are made the size of a device's batches (`join_lane`)
        let device_batch_values = engines.later.is_some().then(|| {
            let spec_of = |n, kind, rate| run_spec.transform(n, kind, rate);
            let row_values = |spec: &TransformSpec| worker::row_values(shaping.as_ref(), spec);
            (planned.range_jobs).device_batch_values(&spec_of, &row_values)
        });
        let band_levels = band_levels(run_spec, streams, planned.frame().0);
        let rows_read = shaping.is_some()
            || segmenting.is_some()
            || averaging.is_some()
            || live_view.is_some()
            || band_levels.is_some();
        let facts = run_facts::<T>(run_spec, &*sinks.encoder, rows_read);
        let products = ((shaping, segmenting), facts);
        // (live input is being captured already: a compile there would fill its ring; its
        // first batch builds the kernels, within the capture's backlog)
        let warm = planned.first_spec(run_spec).filter(|_| !early.live);
        let batches = (device_batch_values, warm);
        let (workers, mut handoff) = Workers::new(engines, control, products, batches);
        let bytes_pool = pool::BytePool::new(workers.in_flight + 3 * encoders);
        let (view, events) = (live_view.as_ref(), sinks.nats_events.take());
        handoff.alerts = wire_alerts(run_spec, streams, view, (events, recorder, stop))?;
        handoff.outputs = sinks.take_outputs();
        let stages = Stages {
            run_spec,
            planned,
            readers: planned.readers(run_spec.source.realtime),
            reading: ReadSpec::of(run_spec),
            batching: BatchSpec::of(run_spec),
            total_samples: (planned.sequential.remaining() == 0)
                .then(|| planned.range_jobs.total_samples()),
            show_progress: crate::progress::wanted(run_spec.report.quiet, early.live),
            finished: AtomicBool::new(false),
            averaging,
            layout,
            band_levels,
            workers,
            encoders,
            bytes_pool,
            meta_file: sinks.meta_file.take(),
            sinks,
            live_view,
            live_rows,
        };
        Ok((stages, handoff))
    }

    /// The data path, every stage on its threads joined by bounded channels, until the sink
    /// has written the last row: source → frame → batch → fft → products → encode → sink.
    pub(super) fn run_threads(
        &self,
        handoff: Handoff<T>,
        signals: &Signals,
        latency: &mut Latency,
    ) -> Ran {
        let (frames_tx, frames) =
            crossbeam_channel::bounded(frame_queue_capacity::<T>(self.run_spec));
        let (spectra_tx, spectra) = crossbeam_channel::bounded(2 * self.workers.ready.max(1));
        let (encoded_tx, encoded) = crossbeam_channel::bounded(2 * self.encoders);
        let encode_stage = self.encode_stage();
        let Handoff {
            ready_lanes,
            late_lanes,
            outputs,
            alerts,
        } = handoff;
        let lanes = (ready_lanes, late_lanes);
        let sink = self.sink_stage(outputs, alerts, signals);
        let (written, sink_ended) = std::thread::scope(|scope| {
            // source → frame: sequential inputs read and framed (range-read inputs are framed
            // straight into batches by their producers)
            self.spawn_readers(scope, frames_tx);
            // → batch: frames gathered into batches, each for the lane `route::rank` picks
            self.spawn_batching(scope, frames);
            // → fft: every lane's workers; lanes built meanwhile join when ready
            self.spawn_fft(scope, lanes, spectra_tx, &signals.interrupted);
            // → products: `--average` (the engines shape and reduce the rest)
            let spectra = worker::FinishedBatches {
                rx: spectra,
                // (a given-up lane is not waited for: `dispatch`)
                abandoned: self.workers.context.dispatcher.abandoned(),
            };
            let rows = self.spawn_products(scope, spectra);
            // → encode
            self.spawn_encoders(scope, rows, encoded_tx, &encode_stage);
            // → sink, on this thread
            let _stop_progress = crate::progress::StopOnDrop(&self.finished); // on a panic too
            let control = &self.workers.context.control;
            let written = sink_stage::run_sink::<T>(encoded, sink, control, latency);
            (written, Instant::now())
        });
        Ran {
            written,
            sink_ended,
        }
    }

    /// The sink's stage: the outputs (rotated on SIGHUP or by size), the live view's hub and
    /// the alerts.
    fn sink_stage(
        &self,
        (dests, rotations): (Vec<Destination>, Vec<Option<crate::sink::rotate::Rotation>>),
        alerts: Option<crate::alerts::Alerts>,
        signals: &Signals,
    ) -> sink_stage::SinkStage<'_, T> {
        let sinks = &self.sinks;
        // the sink puts the workers' batches in order (with --average, the averaging stage's,
        // numbered anew): it tells the dispatcher its place (before any producer starts)
        let order = self
            .averaging
            .is_none()
            .then_some(&self.workers.context.dispatcher);
        if let Some(dispatcher) = order {
            dispatcher.follow_order();
        }
        let mut outputs = Outputs::new(&*sinks.encoder, dests, open_files_budget(), &sinks.placed);
        outputs.rotate(rotations, signals.reopen.clone());
        outputs.expect_shapes(sinks.shapes.clone());
        sink_stage::SinkStage {
            outputs,
            streams: &self.planned.streams,
            pool: &self.bytes_pool,
            values_pool: &self.workers.pools().spectra,
            live: self.live_view.as_ref().map(|view| &*view.hub),
            // rows are frames here (with --average, the averaging stage applies the cuts)
            cuts_apply: self.averaging.is_none(),
            alerts,
            order,
        }
    }

    /// The sequential readers (a pool), and the progress line.
    fn spawn_readers<'s>(&'s self, scope: &'s Scope<'s, '_>, frame_tx: Sender<Frame<T>>) {
        let control = &self.workers.context.control;
        let (sequential, reading) = (&self.planned.sequential, &self.reading);
        for _ in 0..self.readers.sequential {
            let tx = frame_tx.clone();
            scope.spawn(move || reader::read_sequential::<T>(sequential, reading, tx, control));
        }
        drop(frame_tx);
        if self.show_progress {
            let (samples, finished) = (&control.counters.samples_in, &self.finished);
            let track = control.tracer.as_deref();
            let total = self.total_samples;
            scope.spawn(move || crate::progress::show(samples, total, finished, track));
        }
    }

    /// The dispatcher's producers, which fill batches: the range readers (which read and frame
    /// their inputs themselves) and the batcher (the sequential readers' frames).
    fn spawn_batching<'s>(&'s self, scope: &'s Scope<'s, '_>, frame_rx: Receiver<Frame<T>>) {
        let context = &*self.workers.context;
        let (control, dispatcher, input_pool) = (
            &context.control,
            &context.dispatcher,
            &context.pools.samples,
        );
        let run_spec = self.run_spec;
        let spec_of = move |n: usize, kind: InputKind, rate: f64| -> TransformSpec {
            run_spec.transform(n, kind, rate)
        };
        let range_jobs = &self.planned.range_jobs;
        // every producer's guard before any producer starts: the queues close when all have
        // ended and every batch is finished (`dispatch`)
        let range_readers = self.readers.ranged;
        let mut producers: Vec<_> = (0..=range_readers).map(|_| dispatcher.producer()).collect();
        for producer in producers.drain(1..) {
            scope.spawn(move || {
                let _producer = producer;
                let read = range_reader::run_range_reader::<T>;
                if let Err(e) = read(range_jobs, dispatcher, control, input_pool, &spec_of) {
                    control.fail(e);
                }
            });
        }
        let batcher_guard = producers.pop();
        let batching = self.batching;
        scope.spawn(move || {
            let _producer = batcher_guard;
            batcher::run_batcher::<T>(
                frame_rx, dispatcher, batching, &spec_of, input_pool, control,
            )
        });
    }

    /// The FFT workers of the ready lanes, the stall watcher, and the lanes built meanwhile.
    fn spawn_fft<'s>(
        &'s self,
        scope: &'s Scope<'s, '_>,
        (ready_lanes, late_lanes): (Vec<JoinedLane<T>>, Option<LateLanes<T>>),
        done_tx: Sender<worker::Done<T>>,
        interrupted: &'s AtomicBool,
    ) {
        let (context, threads) = (&self.workers.context, &self.workers.threads);
        let (control, dispatcher) = (&context.control, &context.dispatcher);
        for joined in ready_lanes {
            threads.spawn(joined.queue, joined.engines, &done_tx, context);
        }
        let watched = self.workers.dispatch_ended.clone();
        scope.spawn(move || {
            let stop = StopFlags {
                stop: &control.stop,
                interrupted,
            };
            dispatcher.watch_traced(&watched, stop, control.tracer.as_deref())
        });
        // lanes built meanwhile (`auto`'s GPUs, `router::build_engine_set`) join the
        // dispatcher; a job that ends first does not wait for them (`StartUpThread`)
        let Some((built, gate)) = late_lanes else {
            return;
        };
        let ended = self.workers.dispatch_ended.clone();
        let joining = LateJoin {
            context,
            threads,
            pools: self.workers.pools(),
            lane_set: &self.workers.lane_set,
            retire_cpu: self.workers.retire_cpu,
            progress: (self.total_samples, Instant::now()),
            warm: self.workers.warm,
        };
        // (one hand-over, or one per device under gpu:all, until the builder is done; the
        // devices in reserve start once the first bounds the run, or never)
        let demand_tick = crossbeam_channel::tick(late_join::DEMAND_WINDOW);
        let mut gate_tick = crossbeam_channel::tick(late_join::GATE_LOOK);
        scope.spawn(move || {
            let (mut demand, mut built) = (late_join::DemandWatch::default(), built);
            let (warmed_tx, warmed) = crossbeam_channel::unbounded();
            let mut gate = Some(gate);
            loop {
                crossbeam_channel::select! {
                    recv(built) -> late => match late {
                        Ok(late) => joining.warm(late, &warmed_tx),
                        Err(_) => built = crossbeam_channel::never(),
                    },
                    recv(warmed) -> late => if let Ok(late) = late {
                        joining.join(late, &done_tx);
                    },
                    recv(ended) -> _ => break,
                    recv(demand_tick) -> _ => joining.watch_demand(&mut demand),
                    recv(gate_tick) -> _ => if joining.open_gate(&mut gate) {
                        gate_tick = crossbeam_channel::never();
                    },
                }
            }
            demand.end(joining.lane_set);
            if let Some(gate) = &gate {
                joining.note_gate_unopened(gate);
            }
            // lanes handed over after the run's end never join: left to the exit, not torn
            // down inside the run's teardown
            for late in built.try_iter().chain(warmed.try_iter()) {
                crate::left_behind::keep(Box::new(late.lanes));
            }
        });
    }

    /// The products after the engines: `--average`, one ordered stage between the workers and
    /// the encoders; what the encoders take.
    fn spawn_products<'s>(
        &'s self,
        scope: &'s Scope<'s, '_>,
        from_workers: worker::FinishedBatches<T>,
    ) -> worker::FinishedBatches<T> {
        let Some(stage) = &self.averaging else {
            return from_workers;
        };
        let (control, pools) = (&self.workers.context.control, self.workers.pools());
        let (tx, rx) = crossbeam_channel::bounded(2 * self.encoders);
        scope.spawn(move || {
            averaging::run_averaging::<T>(from_workers, tx, stage, control, &pools.spectra)
        });
        worker::FinishedBatches {
            rx,
            abandoned: crossbeam_channel::never(),
        }
    }

    fn spawn_encoders<'s>(
        &'s self,
        scope: &'s Scope<'s, '_>,
        to_encoders: worker::FinishedBatches<T>,
        encoded_tx: Sender<encode::Encoded<T>>,
        stage: &'s encode::EncodeStage<'s, T>,
    ) {
        let control = &self.workers.context.control;
        for _ in 0..self.encoders {
            let (rx, tx) = (to_encoders.clone(), encoded_tx.clone());
            scope.spawn(move || encode::run_encoder::<T>(rx, tx, stage, control));
        }
    }

    /// What the encode threads share.
    fn encode_stage(&self) -> encode::EncodeStage<'_, T> {
        let layout = self.layout.as_ref();
        let live = (self.live_view.as_ref())
            .zip(self.live_rows.as_deref())
            .map(|(view, rows)| encode::LiveTap {
                hub: &view.hub,
                rows,
                extras: layout.map_or(0, |l| l.extras()),
                cross_bins: layout.and_then(|l| l.cross_bins),
            });
        let run_spec = self.run_spec;
        encode::EncodeStage {
            encoder: &*self.sinks.encoder,
            streams: &self.planned.streams,
            output_of: &self.sinks.writer_of,
            values_pool: &self.workers.pools().spectra,
            bytes_pool: &self.bytes_pool,
            placed: &self.sinks.placed,
            live,
            mark_rows: run_spec.nats_output.is_some() || run_spec.output.rotate.is_some(),
            alerts: self.band_levels.as_ref(),
        }
    }
}

/// What the run's batches may carry as f32 (`dispatch::carriage`): `rows_read` when products,
/// averaging, the live view or alerts read the rows after the device.
fn run_facts<T: Sample>(run_spec: &RunSpec, encoder: &dyn Encoder<T>, rows_read: bool) -> RunFacts {
    let analysis = &run_spec.analysis;
    RunFacts {
        f64: T::NAME == "f64",
        dc_remove: analysis.dc_remove,
        writes_f32: encoder.writes_f32(),
        rows_read: rows_read || analysis.fftshift,
    }
}

/// `--alert` rules whose band holds no bin of a stream (`alerts::level::check_band_bins`), and
/// `--distortion` with too few columns or a `--tone` outside them (`measure::check_tone_bins`),
/// an A or C weighting or `--distortion` of bins labelled about a centre, and measured
/// frequencies f32 rows would round by more than a tenth of a bin.
fn check_named_bins(run_spec: &RunSpec, streams: &[StreamMeta], frame_n: usize) -> Result<()> {
    let rules = &run_spec.alerts.rules;
    crate::alerts::level::check_band_bins(rules, streams, frame_n).map_err(FftdError::Usage)?;
    let measure = &run_spec.analysis.products.measure;
    let f32_rows = run_spec.analysis.precision == crate::types::Precision::F32;
    use crate::products::measure as m;
    (m::check_tone_bins(measure, streams, frame_n))
        .and_then(|()| m::check_audio_figures_centre(measure, streams))
        .and_then(|()| m::check_frequencies_held(measure, streams, frame_n, f32_rows))
        .map_err(FftdError::Usage)
}

/// `--alert`'s band levels (encode threads), None without rules.
fn band_levels(run_spec: &RunSpec, streams: &[StreamMeta], frame_n: usize) -> Option<BandLevels> {
    let rules = &run_spec.alerts.rules;
    let look = (run_spec.analysis.scale, run_spec.analysis.window);
    let products = &run_spec.analysis.products;
    let rows = (&products.measure, products.bands.is_some());
    (!rules.is_empty()).then(|| BandLevels::new(rules, streams, frame_n, look, rows))
}

/// Frames waiting for the batcher at most: two batches' worth, within a byte budget.
fn frame_queue_capacity<T: Sample>(run_spec: &RunSpec) -> usize {
    match run_spec.analysis.frame {
        FrameSize::Fixed(n) => {
            let by_bytes = limits::FRAME_QUEUE_BYTES / (n * std::mem::size_of::<T>()).max(1);
            (2 * BatchSpec::of(run_spec).frames(n))
                .clamp(8, 4096)
                .min(by_bytes.max(2))
        }
        FrameSize::Whole => 2,
    }
}
