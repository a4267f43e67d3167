//! The one place the stages are wired: sources → readers (framing) → bounded channel → batcher →
//! dispatcher (spreads batches over the lanes: one per device, `dispatch`) → FFT workers (one
//! engine each, in their lane) → encoders (rows → bytes, several threads) → sink (re-ordered by
//! batch number, written in sequence order).
//!
//! Memory stays bounded whatever the input size: every channel is bounded, and the sink's re-order
//! buffer holds at most the dispatcher's window of batches (`dispatch`), even when a device hangs.
//! Shutdown (end of input, `--max-frames`, `--duration`, SIGINT/SIGTERM, a closed stdout, an
//! error) sets `Control::stop`; readers stop reading and finish their streams, and everything
//! already queued drains through the sink (but for a hung device's batches: `dispatch` gives
//! them up, and the output ends before the first of them).

mod averaging;
mod batcher;
mod dispatch;
mod encode;
mod live;
mod outputs;
pub(crate) mod plan;
mod pool;
mod range_reader;
mod reader;
mod run_report;
mod sink_stage;
pub mod spec;
mod worker;

use crate::pipeline::spec::RunSpec;
use crate::source::spec::Input;

use crate::error::{FftdError, Result};
use crate::fft::lanes::LaneSet;
use crate::fft::{router, TransformSpec};
use crate::fleet::output::{NatsConnection, NatsRows};
use crate::frame::{Frame, FrameSize};
use crate::limits;
use crate::products::{finish_for_scale, Segmenting, Shaping};
use crate::sink::destination::Destination;
use crate::sink::meta::{write_meta, StreamSummary};
use crate::sink::output::{open_files_budget, Outputs};
use crate::sink::{make_encoder, OutputFormat};
use crate::stats::{self, Counters, Latency};
use crate::timeline::{Kind, Phase};
use crate::types::Sample;
use crate::types::StreamMeta;
use crate::types::WithSample;
use dispatch::{Dispatcher, LaneId, StopFlags};
use outputs::{
    image_destinations, open_destinations, place_outputs, plan_outputs, refuse_overwriting_inputs,
};
use plan::{plan_streams, Reading, SequentialInput, SequentialQueue, StreamPlan};
use range_reader::{RangeJobs, RangeStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// State every stage shares: the stop flag, counters and the first error.
pub struct Control {
    pub stop: Arc<AtomicBool>,
    /// Shared with the live view's `/metrics` when serving.
    pub counters: Arc<Counters>,
    error: Mutex<Option<FftdError>>,
    /// The next batch number (the batcher and the range readers number batches from it).
    next_batch: Arc<AtomicU64>,
    /// Per stream, the first frame not to be written: a range-read input failed there
    /// (`cut_stream`).
    cuts: Mutex<Vec<(usize, u64)>>,
    /// Batch numbers a failed input's job took and will never send (`skip_batch`).
    skipped: Mutex<std::collections::BTreeSet<u64>>,
    /// `--trace`: the run's timeline (None: tracing off, nothing recorded).
    pub tracer: Option<Arc<crate::trace::Tracer>>,
}

impl Control {
    pub fn new(stop: Arc<AtomicBool>) -> Self {
        Control {
            stop,
            counters: Arc::default(),
            error: Mutex::new(None),
            next_batch: Arc::default(),
            cuts: Mutex::default(),
            skipped: Mutex::default(),
            tracer: None,
        }
    }

    /// A new batch number: numbers are handed out once each, from 0 without gaps, and the sink
    /// writes batches in that order.
    pub fn take_batch_id(&self) -> u64 {
        self.next_batch.fetch_add(1, Ordering::SeqCst)
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Records the first error and asks every stage to stop.
    pub fn fail(&self, e: FftdError) {
        self.fail_input(e);
        self.request_stop();
    }

    /// Records an input's error without stopping the other inputs: the run ends as usual and
    /// fails with the first error; later ones are logged as they come.
    pub fn fail_input(&self, e: FftdError) {
        if let Ok(mut slot) = self.error.lock() {
            match *slot {
                None => *slot = Some(e),
                // said now: the run's error at the end is the first one
                Some(_) => tracing::error!("{e}"),
            }
        }
    }

    /// Ends stream `stream` before frame `seq`: frames from there on are not written, though
    /// batches read in parallel may hold some. Called before the failed batch's number is given
    /// up, so the stage that puts batches in order sees the cut before any later batch.
    pub fn cut_stream(&self, stream: usize, seq: u64) {
        if let Ok(mut cuts) = self.cuts.lock() {
            match cuts.iter_mut().find(|(s, _)| *s == stream) {
                Some((_, cut)) => *cut = (*cut).min(seq),
                None => cuts.push((stream, seq)),
            }
        }
    }

    /// Whether frame `seq` of `stream` lies past a cut (`cut_stream`).
    pub fn is_cut(&self, stream: usize, seq: u64) -> bool {
        self.cuts
            .lock()
            .is_ok_and(|cuts| cuts.iter().any(|&(s, cut)| s == stream && seq >= cut))
    }

    /// Batch `id` will never come (its input failed while it was being read): the stages that
    /// put batches in order go past it (`next_in_order`).
    pub fn skip_batch(&self, id: u64) {
        if let Ok(mut skipped) = self.skipped.lock() {
            skipped.insert(id);
        }
    }

    /// The batch numbered `*next` from `reorder`, past numbers that will never come; None while
    /// it has not arrived.
    pub fn next_in_order<B>(
        &self,
        next: &mut u64,
        reorder: &mut std::collections::BTreeMap<u64, B>,
    ) -> Option<B> {
        loop {
            if let Some(batch) = reorder.remove(next) {
                *next += 1;
                return Some(batch);
            }
            if !self.skipped.lock().is_ok_and(|s| s.contains(next)) {
                return None;
            }
            *next += 1;
        }
    }

    fn take_error(&self) -> Option<FftdError> {
        self.error.lock().ok().and_then(|mut e| e.take())
    }
}

pub use crate::types::Signals;

/// Runs the whole analysis; returns when every stream has been written (or the run was stopped)
/// and, with `--serve`, once interrupted after that.
pub fn run(settings: &RunSpec, signals: Signals) -> Result<()> {
    settings
        .analysis
        .precision
        .dispatch(Run { settings, signals })
}

/// A run in the sample type of its precision.
struct Run<'a> {
    settings: &'a RunSpec,
    signals: Signals,
}

impl WithSample for Run<'_> {
    type Output = Result<()>;
    fn run<T: Sample>(self) -> Result<()> {
        run_typed::<T>(self.settings, self.signals)
    }
}

/// Cuts every input into frames exactly as a run would (channels, hop, tail, limits) and hands
/// them to `consume` in each stream's order, for tools that work on frames (`fftd check`).
pub fn for_each_frame<T: Sample>(
    settings: &RunSpec,
    stop: Arc<AtomicBool>,
    consume: &mut dyn FnMut(Frame<T>) -> Result<()>,
) -> Result<()> {
    let plan = plan_streams(settings, &stop, Reading::Sequential)?;
    let control = Control::new(stop);
    let (tx, rx) = crossbeam_channel::bounded(64);
    std::thread::scope(|scope| {
        let control = &control;
        for input in plan.sequential {
            let SequentialInput::Open(plan) = input else {
                continue; // Reading::Sequential opens every input
            };
            let tx = tx.clone();
            scope.spawn(move || {
                let mut clock = control.clock(Kind::Reader, Phase::ReaderWait);
                let read = reader::read_source::<T>(plan, settings, tx, control, &mut clock);
                if let Err(e) = read {
                    control.fail(e);
                }
            });
        }
        drop(tx);
        for frame in rx.iter() {
            if let Err(e) = consume(frame) {
                control.fail(e);
                break;
            }
        }
        rx.iter().for_each(drop); // let the readers finish
    });
    match control.take_error() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn run_typed<T: Sample>(settings: &RunSpec, signals: Signals) -> Result<()> {
    let started = Instant::now();
    let stop = signals.stop.clone();
    // --serve's port first: a taken one must stop the run before any output file is touched
    let listener = settings
        .serve
        .as_ref()
        .map(crate::serve::bind)
        .transpose()?;
    // and the NATS output's server: one that cannot take the rows stops the run before any input
    // is read (or a microphone starts)
    let nats = settings
        .nats_output
        .as_ref()
        .map(NatsConnection::open)
        .transpose()?;
    // engines first: a first-use calibration (a few seconds) must not run while a live source is
    // already capturing into its ring
    let live = matches!(settings.source.input, Input::Mic(_))
        || crate::source::rtl_tcp::among(&settings.source.input);
    // the places the run writes, before any input (or device) is touched
    outputs::check_destinations(settings)?;
    let building = Instant::now();
    if settings.report.stats || settings.report.trace.is_some() {
        // the FFT workers' time splits into upload, kernels and download (event profiling)
        crate::fft::opencl::profile_for_stats();
        run_report::enable_detail(settings.report.trace.is_some());
    }
    let workers = (settings.engine.workers, settings.engine.device_workers);
    // the shape `auto` keeps its records under (only `auto` reads the inputs' sizes for it)
    let job = (settings.engine.device == crate::fft::device_choice::DeviceChoice::Auto && !live)
        .then(|| job_key::<T>(settings));
    let router::EngineSet {
        lane_set,
        ready: lanes,
        later: late_lanes,
        auto_route,
        retire_cpu,
    } = router::build_engine_set::<T>(&settings.engine.device, workers, live, job.as_ref())?;
    let engines_built = (building, Instant::now());
    // `auto` running this job on the CPU engines alone: batches sized for them
    let cpu_only;
    let settings = match auto_route {
        Some(crate::fft::route_record::AutoRoute::CpuOnly) => {
            let mut spec = settings.clone();
            spec.engine.device_batches = false;
            cpu_only = spec;
            &cpu_only
        }
        _ => settings,
    };
    let ready_workers: usize = lanes.iter().map(|l| l.engines.len()).sum();
    let lane_workers = lanes.iter().map(|l| l.engines.len()).max().unwrap_or(1);
    tracing::debug!(
        ms = started.elapsed().as_secs_f64() * 1e3,
        workers = ready_workers,
        lanes = lanes.len(),
        "engines ready"
    );
    // issue 27: recordings tap every input's samples, so inputs are read in order
    let reading = match settings.record {
        Some(_) => Reading::Sequential,
        None => Reading::Fastest,
    };
    let StreamPlan {
        mut sequential,
        ranged,
        mut streams,
        framing,
    } = plan_streams(settings, &stop, reading)?;
    let recorder = tap_sources(settings, &mut sequential);
    let products = &settings.analysis.products;
    let shaping = Shaping::new(
        &mut streams,
        framing.n,
        products,
        (settings.analysis.scale, settings.analysis.window),
    )
    .map_err(FftdError::Usage)?;
    let averaging = average_stage(settings, &streams, (framing.n, framing.hop))?;
    let layout = averaging
        .as_ref()
        .and_then(|a| a.measuring.as_ref())
        .map(|m| m.layout.clone());
    let extras = layout.as_ref().map_or(0, |l| l.extras());
    let segmenting = match crate::knobs::engine_averaging() {
        false => None, // every frame to the averaging stage (for comparisons)
        true => Segmenting::new(products, &streams, framing.hop, live).map_err(FftdError::Usage)?,
    };
    let spec_of = |n, kind, rate| TransformSpec {
        n,
        kind,
        window: settings.analysis.window,
        scale: products.engine_scale(settings.analysis.scale),
        rate,
    };
    let spec_of = &spec_of;
    let sequential = SequentialQueue::new(sequential, settings, &stop);
    let planned_rows = match averaging {
        None => planned_rows(&ranged, &streams, &sequential),
        Some(_) => vec![None; streams.len()], // rows per interval are known only as they come
    };
    let (frame_n, frame_hop) = (framing.n, framing.hop);
    let range_jobs = RangeJobs::new(ranged, framing);
    // a fixed pool of reader threads, whatever the number of inputs
    // (--realtime: every input plays at once, each paced by its own reader)
    let sequential_readers = match settings.source.realtime {
        true => sequential.readers_wanted(limits::MAX_PACED_READERS),
        false => sequential.readers_wanted(limits::cores()),
    };
    let range_readers = if range_jobs.is_empty() {
        0
    } else {
        limits::cores()
    };
    let readers = sequential_readers + range_readers;
    // a progress total when every sample count is known up front (range-read inputs only)
    let total_samples = (sequential.remaining() == 0).then(|| range_jobs.total_samples());
    let show_progress = crate::progress::wanted(settings.report.quiet, live);
    let finished = AtomicBool::new(false);
    let plan = plan_outputs(settings, &streams)?;
    refuse_overwriting_inputs(settings, &plan)?;
    // --meta is written at the end, but a place that cannot take it is found now
    let meta_file = settings
        .output
        .meta
        .as_ref()
        .map(|path| outputs::create_output(path, &stop))
        .transpose()?;
    let tracer = run_report::open_trace(settings, &stop, started)?;
    let encoder = make_encoder::<T>(settings.analysis.format, settings.analysis.scale);
    let encoder = crate::sink::measured::wrap(encoder, settings.analysis.format, layout.as_ref());
    let values_of = |s: &StreamMeta| match &s.columns {
        Some(_) if layout.as_ref().is_some_and(|l| l.cross_bins.is_some()) => extras,
        Some(columns) => columns.len() * settings.analysis.scale.values_per_bin() + extras,
        None => spec_of(frame_n, s.kind, s.rate).values_out(),
    };
    let placed = match settings.output.rotate {
        Some(_) => Default::default(), // issue 27: rotated files take rows in order
        None => place_outputs(
            &*encoder,
            &plan,
            &streams,
            &planned_rows,
            frame_n,
            values_of,
        ),
    };
    let dests = match (nats, settings.analysis.format) {
        (Some(connection), _) => {
            let rows = NatsRows::new(
                connection,
                &settings.analysis,
                &streams,
                (frame_n, frame_hop),
            );
            vec![Destination::Messages(Box::new(rows))]
        }
        (None, OutputFormat::Png) => image_destinations(settings, &plan, &streams, &stop)?,
        (None, _) => open_destinations(&*encoder, &plan, &placed, &stop)?,
    };
    let outputs: Vec<String> = dests.iter().map(Destination::describe).collect();
    let writer_of = plan.writer_of;
    let rotations = outputs::rotations(settings, &dests, &placed, &streams, &writer_of); // issue 27
    let encoders = encode_threads();
    let mut control = Control::new(stop);
    control.tracer = tracer;
    let mut latency = Latency::default();
    let live_view = match listener {
        Some(listener) => {
            // the numbers of the batches the encoders get: the averaging stage's, or the batches'
            let numbering = averaging.as_ref().map_or_else(
                || control.next_batch.clone(),
                |stage| stage.numbering.clone(),
            );
            let counters = control.counters.clone();
            let scale = settings.analysis.scale;
            let measure = &settings.analysis.products.measure;
            Some(live::LiveView::start(
                listener,
                &streams,
                (scale, measure),
                counters,
                numbering,
            )?)
        }
        None => None,
    };
    let live_rows = live_view
        .as_ref()
        .map(|_| make_encoder::<T>(OutputFormat::Ndjson, settings.analysis.scale))
        .map(|e| crate::sink::measured::wrap(e, OutputFormat::Ndjson, layout.as_ref()));
    let live_tap = live_view
        .as_ref()
        .zip(live_rows.as_deref())
        .map(|(view, rows)| encode::LiveTap {
            hub: &view.hub,
            rows,
            extras,
            cross_bins: layout.as_ref().and_then(|l| l.cross_bins),
        });

    let frame_capacity = match settings.analysis.frame {
        FrameSize::Fixed(n) => {
            let by_bytes = limits::FRAME_QUEUE_BYTES / (n * std::mem::size_of::<T>()).max(1);
            (2 * settings.engine.batch_frames(n))
                .clamp(8, 4096)
                .min(by_bytes.max(2))
        }
        FrameSize::Whole => 2,
    };
    let (frame_tx, frame_rx) = crossbeam_channel::bounded(frame_capacity);
    let (done_tx, done_rx) = crossbeam_channel::bounded(2 * ready_workers.max(1));
    let (encoded_tx, encoded_rx) = crossbeam_channel::bounded(2 * encoders);

    // spare batch buffers per lane: enough for every batch that can be in flight in one lane
    let in_flight = limits::batch_buffers_in_flight(lane_workers);
    let bytes_pool = pool::BytePool::new(in_flight + 3 * encoders);
    let (dispatcher, dispatch_ended) = Dispatcher::new(lane_set.clone());
    // what the FFT workers share with the other stages: their threads are not scoped (`dispatch`)
    let context = Arc::new(worker::WorkerContext {
        control,
        dispatcher,
        pools: (
            pool::BufferPool::<T>::new(in_flight),
            pool::BufferPool::<T>::new(in_flight),
        ),
        products: (shaping, segmenting),
    });
    let (control, dispatcher) = (&context.control, &context.dispatcher);
    let (input_pool, output_pool) = (&context.pools.0, &context.pools.1);
    let pools = (input_pool, output_pool);
    let worker_threads = WorkerThreads::default();
    // the ready lanes join before any producer starts
    let ready_lanes: Vec<_> = lanes
        .into_iter()
        .filter_map(|lane| join_lane(dispatcher, pools, lane))
        .collect();
    // issue 27: --alert's levels (encode threads) and rules (sink), events opened before the run
    let band_levels = (!settings.alerts.rules.is_empty()).then(|| {
        let rules = &settings.alerts.rules;
        let scale = settings.analysis.scale;
        crate::alerts::level::BandLevels::new(
            rules,
            &streams,
            frame_n,
            scale,
            settings.analysis.window,
        )
    });
    let alerts = wire_alerts(settings, streams.len(), live_view.as_ref(), recorder)?;
    let encode_stage = encode::EncodeStage {
        encoder: &*encoder,
        streams: &streams,
        output_of: &writer_of,
        values_pool: output_pool,
        bytes_pool: &bytes_pool,
        placed: &placed,
        live: live_tap,
        mark_rows: settings.nats_output.is_some() || settings.output.rotate.is_some(),
        alerts: band_levels.as_ref(),
    };

    let mut late_builder = None;
    let startup = run_report::Startup {
        started,
        engines: engines_built,
        ended: Instant::now(),
    };
    startup.record(control);
    let (written, sink_ended) = std::thread::scope(|scope| {
        let sequential = &sequential;
        for _ in 0..sequential_readers {
            let tx = frame_tx.clone();
            scope.spawn(move || reader::read_sequential::<T>(sequential, settings, tx, control));
        }
        drop(frame_tx);
        let range_jobs = &range_jobs;
        if show_progress {
            let (samples, finished) = (&control.counters.samples_in, &finished);
            let track = control.tracer.as_deref();
            scope.spawn(move || crate::progress::show(samples, total_samples, finished, track));
        }
        // every producer's guard before any producer starts: the queues close when all have
        // ended and every batch is finished (`dispatch`)
        let mut producers: Vec<_> = (0..=range_readers).map(|_| dispatcher.producer()).collect();
        for producer in producers.drain(1..) {
            scope.spawn(move || {
                let _producer = producer;
                let read = range_reader::run_range_reader::<T>;
                if let Err(e) = read(range_jobs, dispatcher, control, input_pool, spec_of) {
                    control.fail(e);
                }
            });
        }
        let batcher_guard = producers.pop();
        scope.spawn(move || {
            let _producer = batcher_guard;
            batcher::run_batcher::<T>(frame_rx, dispatcher, settings, spec_of, input_pool, control)
        });
        let (context, threads) = (&context, &worker_threads);
        for (queue, engines) in ready_lanes {
            threads.spawn(queue, engines, &done_tx, context);
        }
        let watched = dispatch_ended.clone();
        let interrupted = &signals.interrupted;
        scope.spawn(move || {
            let stop = StopFlags {
                stop: &control.stop,
                interrupted,
            };
            dispatcher.watch_traced(&watched, stop, control.tracer.as_deref())
        });
        if let Some(build) = late_lanes {
            // lanes built meanwhile (`auto`'s GPUs, `router::build_engine_set`) join the
            // dispatcher; a job that ends first does not wait for them
            let (built, builder) = late_lanes_thread(build);
            late_builder = Some(builder);
            let tx = done_tx.clone();
            let lane_set = &lane_set;
            scope.spawn(move || {
                crossbeam_channel::select! {
                    recv(built) -> late => if let Ok(late) = late {
                        if let Some(e) = late.error {
                            control.fail(e); // the device the run named is unusable
                        }
                        if let (Some(speed), false) = (late.cpu_speed, late.lanes.is_empty()) {
                            dispatcher.set_cpu_speed(speed);
                        }
                        let joined = !late.lanes.is_empty();
                        for lane in late.lanes {
                            // (its pinned pools are made here, before it takes batches)
                            if let Some((queue, engines)) = join_late_lane(dispatcher, pools, lane) {
                                threads.spawn(queue, engines, &tx, context);
                            }
                        }
                        // the devices alone from now on: the CPU lane hands on what it holds
                        if joined && retire_cpu {
                            let lanes = lane_set.lanes();
                            lanes.iter().filter(|l| l.is_cpu).for_each(|l| l.retire());
                        }
                    },
                    recv(dispatch_ended) -> _ => {}
                }
            });
        }
        drop(done_tx);
        // the stage after the workers stops waiting for a given-up lane (`dispatch`)
        let from_workers = worker::FinishedBatches {
            rx: done_rx,
            abandoned: dispatcher.abandoned(),
        };
        // --average: one ordered stage between the workers and the encoders
        let to_encoders = match &averaging {
            Some(stage) => {
                let (tx, rx) = crossbeam_channel::bounded(2 * encoders);
                scope.spawn(move || {
                    averaging::run_averaging::<T>(from_workers, tx, stage, control, pools.1)
                });
                worker::FinishedBatches {
                    rx,
                    abandoned: crossbeam_channel::never(),
                }
            }
            None => from_workers,
        };
        let encode_stage = &encode_stage;
        for _ in 0..encoders {
            let (rx, tx) = (to_encoders.clone(), encoded_tx.clone());
            scope.spawn(move || encode::run_encoder::<T>(rx, tx, encode_stage, control));
        }
        drop(to_encoders);
        drop(encoded_tx);
        let mut outputs = Outputs::new(&*encoder, dests, open_files_budget(), &placed);
        outputs.rotate(rotations, signals.reopen.clone()); // issue 27
        let stage = sink_stage::SinkStage {
            outputs,
            streams: &streams,
            pool: &bytes_pool,
            live: live_view.as_ref().map(|view| &*view.hub),
            // rows are frames here (with --average, the averaging stage applies the cuts)
            cuts_apply: averaging.is_none(),
            alerts,
        };
        let _stop_progress = crate::progress::StopOnDrop(&finished); // on a panic too
        let written = sink_stage::run_sink::<T>(encoded_rx, stage, control, &mut latency);
        (written, Instant::now())
    });
    // the workers have ended, but those stuck on a lane the run gave up (never to return)
    let given_up = dispatcher.given_up();
    // after a worker's panic a worker may be stuck on a hung device: it is not waited for long
    let patience = dispatcher.was_abandoned().then_some(PANIC_JOIN_PATIENCE);
    worker_threads.join(|lane| given_up.iter().any(|(i, _, _)| *i == lane), patience);

    if let Some(builder) = late_builder {
        let _ = builder.join(); // the output is complete: only the device start-up is left
    }
    let error = control.take_error().or_else(|| {
        let interrupted = signals.interrupted.load(Ordering::Relaxed);
        let cut = dispatcher.cut();
        (!interrupted)
            .then(|| stalled_error(&given_up, cut))
            .flatten()
    });
    let mut meta_written = Ok(());
    if let (Some(path), Some(file)) = (&settings.output.meta, meta_file) {
        let summaries: Vec<StreamSummary<'_>> = streams
            .iter()
            .zip(&written)
            .map(|(meta, w)| StreamSummary {
                meta,
                n: w.n,
                hop: settings.analysis.fixed().map_or(w.n, |(_, hop)| hop),
                frames: w.frames,
                output: outputs[writer_of[meta.id]].clone(),
            })
            .collect();
        let failure = error.as_ref().map(ToString::to_string);
        meta_written = write_meta(
            path,
            file,
            &settings.analysis,
            settings.source.input_format,
            &summaries,
            failure.as_deref(),
        );
    }
    // pinned spares released now, inside the teardown that --stats and --trace account for
    // (and `auto`'s clock: left to the process's exit, the driver's unpinning still holds the
    // exit, unseen; issue 23)
    input_pool.release_spares();
    output_pool.release_spares();
    // everything the run does is done: the report, then the timeline
    let ended = run_report::Ended {
        started,
        sink_ended,
        readers,
        encoders,
        window: dispatcher.window(),
    };
    let traced = ended.report(settings, control, &latency, &lane_set);
    meta_written?;
    traced?;

    if let Some(e) = error {
        if let Some(view) = live_view {
            view.finish(false, &signals.interrupted);
        }
        return Err(e);
    }

    // only whole file jobs teach `auto` (not stdin's producer rate, nor a run cut short, nor one
    // paced by a NATS server)
    let whole_file_job = matches!(&settings.source.input, Input::Files(f) if !f.iter().any(|p| p == "-"))
        && settings.nats_output.is_none();
    let finished_job = auto_route
        .zip(job)
        .filter(|_| whole_file_job && !control.stopping());
    if let Some((route, job)) = finished_job {
        let samples = Counters::get(&control.counters.samples_analysed) as f64;
        let rate = samples / started.elapsed().as_secs_f64();
        crate::fft::route_record::RouteRecord::record(&job, route, rate);
    }
    if let Some(view) = live_view {
        view.finish(true, &signals.interrupted);
    }
    Ok(())
}

/// A lane joined to the dispatcher (with its home in both pools: its device's pinned memory, or
/// heap memory), and its engines; None when dispatching has already ended.
/// The shape of this job for `auto`'s records (`route_record`).
fn job_key<T: Sample>(settings: &RunSpec) -> crate::fft::route_record::JobKey {
    let frame = match settings.analysis.frame {
        FrameSize::Fixed(n) => n,
        FrameSize::Whole => 0,
    };
    let p = &settings.analysis.products;
    let products = match (p.bands.is_some(), p.average.is_some()) {
        (true, true) => "bands+average",
        (true, false) => "bands",
        (false, true) => "average",
        (false, false) if p.fmin.is_some() || p.fmax.is_some() => "range",
        (false, false) => "plain",
    };
    let input_bytes = match &settings.source.input {
        Input::Files(files) => files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum(),
        _ => 0,
    };
    crate::fft::route_record::JobKey::new(
        (frame, settings.analysis.hop_for(frame)),
        T::NAME,
        &format!("{products} {:?}", settings.analysis.scale),
        input_bytes,
        limits::cores(),
    )
}

fn join_lane<T: Sample>(
    dispatcher: &Dispatcher<T>,
    pools: (&pool::BufferPool<T>, &pool::BufferPool<T>),
    lane: router::LaneEngines<T>,
) -> Option<(worker::LaneQueue<T>, router::Engines<T>)> {
    join_lane_with(dispatcher, pools, lane, false)
}

/// `join_lane` for a lane built while the run goes on: its pinned pools are filled first, with
/// buffers the size the run's batches have had, so no reader or worker waits for an allocation.
fn join_late_lane<T: Sample>(
    dispatcher: &Dispatcher<T>,
    pools: (&pool::BufferPool<T>, &pool::BufferPool<T>),
    lane: router::LaneEngines<T>,
) -> Option<(worker::LaneQueue<T>, router::Engines<T>)> {
    join_lane_with(dispatcher, pools, lane, true)
}

fn join_lane_with<T: Sample>(
    dispatcher: &Dispatcher<T>,
    (input_pool, output_pool): (&pool::BufferPool<T>, &pool::BufferPool<T>),
    lane: router::LaneEngines<T>,
    premade: bool,
) -> Option<(worker::LaneQueue<T>, router::Engines<T>)> {
    // batches live in the lane's device's pinned memory when it has some (no staging copies)
    // (tuning knob FFTD_PINNED_BATCHES=0: ordinary memory, the engine stages every copy)
    let pinned = match crate::knobs::pinned_batches() {
        false => None,
        true => lane.engines.iter().find_map(|e| e.pinned_memory()),
    };
    let queue = lane.engines.len();
    let spares = |pool: &pool::BufferPool<T>| match (&pinned, premade) {
        (Some(memory), true) => pool.premade(memory, 2 * queue + 2, &|| dispatcher.closed()),
        _ => Vec::new(),
    };
    let (premade_in, premade_out) = (spares(input_pool), spares(output_pool));
    let homes = |id| {
        input_pool.add_lane_with(id, pinned.clone(), premade_in);
        output_pool.add_lane_with(id, pinned.clone(), premade_out);
    };
    let (id, rx) = dispatcher.add_lane(lane.lane.clone(), lane.speed, queue, homes)?;
    let queue = worker::LaneQueue {
        id,
        lane: lane.lane,
        rx,
    };
    Some((queue, lane.engines))
}

/// After a worker's panic, how long the other workers are waited for at the end (one may be
/// stuck on a hung device for good; the panic goes on once they are joined).
const PANIC_JOIN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// The FFT workers' threads. They are not scoped: a worker stuck on a hung device never returns,
/// and the run must still be able to end (`dispatch`); the others are joined at the end.
#[derive(Default)]
struct WorkerThreads {
    threads: Mutex<Vec<(LaneId, std::thread::JoinHandle<()>)>>,
}

impl WorkerThreads {
    /// One FFT worker thread per engine of a lane.
    fn spawn<T: Sample>(
        &self,
        queue: worker::LaneQueue<T>,
        engines: router::Engines<T>,
        done: &crossbeam_channel::Sender<worker::Done<T>>,
        context: &Arc<worker::WorkerContext<T>>,
    ) {
        for engine in engines {
            let queue = worker::LaneQueue {
                id: queue.id,
                lane: queue.lane.clone(),
                rx: queue.rx.clone(),
            };
            let lane = queue.id;
            let (tx, context) = (done.clone(), context.clone());
            let thread =
                std::thread::spawn(move || worker::run_worker::<T>(engine, queue, tx, &context));
            self.lock().push((lane, thread));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(LaneId, std::thread::JoinHandle<()>)>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for every worker but those of the lanes `left` names (given up: stuck for good),
    /// and with `patience` (after a worker's panic, when nothing gave a hung lane up) only for
    /// that long in all: a worker still running then is left behind. A worker's panic goes on
    /// from here once all are joined.
    fn join(&self, left: impl Fn(LaneId) -> bool, patience: Option<std::time::Duration>) {
        let threads = std::mem::take(&mut *self.lock());
        let deadline = patience.map(|p| std::time::Instant::now() + p);
        let mut panicked = None;
        for (lane, thread) in threads {
            if left(lane) {
                continue;
            }
            if let Some(deadline) = deadline {
                while !thread.is_finished() && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                if !thread.is_finished() {
                    continue; // stuck (a hung device): it never returns
                }
            }
            if let Err(panic) = thread.join() {
                panicked.get_or_insert(panic);
            }
        }
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
    }
}

/// issue 27: the sink's alerts (None without `--alert`): `--events` opened now, the live view's
/// feed set.
fn wire_alerts(
    settings: &RunSpec,
    streams: usize,
    live_view: Option<&live::LiveView>,
    recorder: Option<crate::record::Recorder>,
) -> Result<Option<crate::alerts::Alerts>> {
    let options = &settings.alerts;
    if options.rules.is_empty() {
        return Ok(None);
    }
    let writer = options
        .events
        .as_ref()
        .map(crate::alerts::events::EventWriter::open)
        .transpose()
        .map_err(FftdError::Runtime)?;
    let feed = live_view.map(|view| {
        let names = options.rules.iter().map(|r| r.name.clone());
        let feed = Arc::new(crate::alerts::feed::AlertFeed::new(names));
        let _ = view.hub.alerts.set(feed.clone());
        feed
    });
    let rules = options.rules.clone();
    let mut alerts = crate::alerts::Alerts::new(rules, streams, writer, feed);
    if let Some(recorder) = recorder {
        alerts.listen(Box::new(recorder));
    }
    Ok(Some(alerts))
}

/// issue 27: with `--record-on-alert`, every input's source copies its samples into a pre-roll
/// ring (`record::tap`); the recorder that writes from them.
fn tap_sources(
    settings: &RunSpec,
    sequential: &mut [SequentialInput],
) -> Option<crate::record::Recorder> {
    let options = settings.record.clone()?;
    let epoch = crate::sink::rotate::now_epoch();
    let mut recorder = crate::record::Recorder::new(options, epoch);
    for input in sequential.iter_mut() {
        if let SequentialInput::Open(plan) = input {
            let streams = plan.splitter.streams();
            let ring = recorder.tap(plan.source.info(), plan.first_stream, streams);
            crate::record::tap::wrap(&mut plan.source, ring);
        }
    }
    Some(recorder)
}

/// The error of a run that gave up stalled lanes after a stop that was not SIGINT/SIGTERM (a
/// limit, a closed output): frames it should have written may be missing.
fn stalled_error(given_up: &[(LaneId, String, u64)], cut: Option<u64>) -> Option<FftdError> {
    let stuck: Vec<String> = given_up
        .iter()
        .map(|(_, title, batch)| format!("{title} did not finish batch {batch}"))
        .collect();
    let ends = cut.map_or("early".to_string(), |cut| format!("before batch {cut}"));
    (!stuck.is_empty()).then(|| {
        FftdError::Runtime(format!(
            "{}: given up after the stop, the output ends {ends}",
            stuck.join("; ")
        ))
    })
}

/// Each lane's share of the run, for `--stats`.
pub(super) fn device_shares(lane_set: &LaneSet) -> Vec<stats::DeviceShare> {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    lane_set
        .lanes()
        .iter()
        .map(|lane| stats::DeviceShare {
            title: lane.title(),
            is_cpu: lane.is_cpu,
            workers: lane.workers,
            batches: get(&lane.counters.batches),
            frames: get(&lane.counters.frames),
            busy_ns: get(&lane.counters.busy_ns),
            failed: lane.failed(),
            handed_off: get(&lane.counters.handed_off),
            cpu_frames: get(&lane.counters.cpu_frames),
        })
        .collect()
}

/// Builds deferred lanes on a thread outside the pipeline, so the work never waits for a device
/// start-up it no longer needs; they arrive on the returned channel. Join the thread before the
/// process ends (a device driver torn down mid-start-up can abort the process).
fn late_lanes_thread<T: Sample>(
    build: router::DeferredLanes<T>,
) -> (
    crossbeam_channel::Receiver<router::LateLanes<T>>,
    std::thread::JoinHandle<()>,
) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let builder = std::thread::spawn(move || {
        let _ = tx.send(build());
    });
    (rx, builder)
}

/// Frames written for one stream, and the frame size it used.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamWritten {
    pub frames: u64,
    pub n: usize,
}

/// Encode threads: one per CPU core (tuning knob FFTD_ENCODERS=N).
fn encode_threads() -> usize {
    crate::knobs::encoders()
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 256)
}

/// The averaging stage of `--average`, with every stream's grouping checked now (an interval
/// shorter than a hop is a usage error before the run, not during it).
fn average_stage<'a>(
    settings: &RunSpec,
    streams: &'a [StreamMeta],
    (n, hop): (usize, usize),
) -> Result<Option<averaging::AveragingStage<'a>>> {
    let Some(spec) = settings.analysis.products.row_average() else {
        return Ok(None);
    };
    for stream in streams {
        spec.grouping(stream.rate, hop).map_err(FftdError::Usage)?;
    }
    Ok(Some(averaging::AveragingStage {
        spec,
        mode: settings.analysis.products.mode,
        hop,
        streams,
        finish: finish_for_scale(settings.analysis.scale, &settings.analysis.products),
        numbering: Arc::default(),
        cross: match settings.analysis.products.measure.cross {
            Some(cross) => Some(
                crate::products::measure::cross::CrossPlan::new(
                    cross,
                    streams,
                    (n, hop),
                    settings.analysis.window,
                    settings.analysis.products.average,
                )
                .map_err(FftdError::Usage)?,
            ),
            None => None,
        },
        measuring: crate::products::measure::Measuring::new(
            &settings.analysis.products,
            streams,
            (n, hop),
            settings.analysis.scale,
            settings.analysis.window,
        ),
    }))
}

/// Rows each stream will give, where that is known before the run: every stream of a run with no
/// sequential input is range-read, and its frame count follows from the file's length.
fn planned_rows(
    ranged: &[RangeStream],
    streams: &[StreamMeta],
    sequential: &SequentialQueue,
) -> Vec<Option<u64>> {
    let mut rows = vec![None; streams.len()];
    if sequential.remaining() == 0 {
        for r in ranged {
            rows[r.stream] = Some(r.frames);
        }
    }
    rows
}
