//! One run, top to bottom: the set-up steps (`run_steps`), then every stage on its own threads
//! joined by bounded channels (readers → batcher → FFT workers → averaging → encoders → sink),
//! then the sidecar, the report and what `auto` learns.

use super::dispatch::{Dispatcher, StopFlags};
use super::run_steps::{
    teach_auto, transform_spec, write_run_meta, Built, Early, Planned, RowsPlanned, Sinks,
};
use super::{
    average_stage, averaging, batcher, encode, encode_threads, join_lane, join_late_lane, live,
    pool, range_reader, reader, run_report, sink_stage, stalled_error, wire_alerts, worker,
    Control, WorkerThreads, PANIC_JOIN_PATIENCE,
};
use crate::error::Result;
use crate::fft::router;
use crate::frame::FrameSize;
use crate::limits;
use crate::pipeline::spec::RunSpec;
use crate::sink::output::{open_files_budget, Outputs};
use crate::sink::{make_encoder, OutputFormat};
use crate::stats::Latency;
use crate::types::Sample;
use crate::types::Signals;
use range_reader::RangeJobs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub(super) fn run_typed<T: Sample>(settings: &RunSpec, signals: Signals) -> Result<()> {
    let started = Instant::now();
    let stop = signals.stop.clone();
    let early = Early::open(settings)?;
    let built = Built::<T>::build(settings, early.live)?;
    let cpu_only = built.cpu_only_spec(settings);
    let settings = cpu_only.as_ref().unwrap_or(settings);
    let router::EngineSet {
        lane_set,
        ready: lanes,
        later: late_lanes,
        auto_route,
        retire_cpu,
    } = built.set;
    // a device started in the background begins now, while the run plans and opens outputs
    let (late_lanes, _start_up) = late_lanes.map(super::late_lanes_thread).unzip();
    let ready_workers: usize = lanes.iter().map(|l| l.engines.len()).sum();
    let lane_workers = lanes.iter().map(|l| l.engines.len()).max().unwrap_or(1);
    tracing::debug!(
        ms = started.elapsed().as_secs_f64() * 1e3,
        workers = ready_workers,
        lanes = lanes.len(),
        "engines ready"
    );
    let planned = Planned::plan(settings, &stop)?;
    let averaging = average_stage(settings, &planned.streams, planned.frame())?;
    let layout = (averaging.as_ref())
        .and_then(|a| a.measuring.as_ref())
        .map(|m| m.layout.clone());
    let extras = layout.as_ref().map_or(0, |l| l.extras());
    let segmenting = planned.segmenting(settings, early.live)?;
    let planned_rows = planned.rows(averaging.is_some());
    let (sequential_readers, range_readers) = planned.readers(settings.source.realtime);
    let readers = sequential_readers + range_readers;
    let show_progress = crate::progress::wanted(settings.report.quiet, early.live);
    let finished = AtomicBool::new(false);
    let rows = RowsPlanned {
        streams: &planned.streams,
        frame: planned.frame(),
        planned: &planned_rows,
        layout: layout.as_ref(),
    };
    let sinks = Sinks::<T>::open(settings, rows, early.nats, &stop, started)?;
    let Sinks {
        encoder,
        dests,
        placed,
        outputs,
        writer_of,
        rotations,
        meta_file,
        tracer,
    } = sinks;
    let streams = &planned.streams;
    let (sequential, ranged, framing) = (planned.sequential, planned.ranged, planned.framing);
    let (recorder, shaping) = (planned.recorder, planned.shaping);
    let frame_n = framing.n;
    let range_jobs = RangeJobs::new(ranged, framing);
    let device_batch_values = late_lanes.is_some().then(|| {
        range_jobs.device_batch_values(&|n, kind, rate| transform_spec(settings, (n, kind, rate)))
    });
    // a progress total when every sample count is known up front (range-read inputs only)
    let total_samples = (sequential.remaining() == 0).then(|| range_jobs.total_samples());
    let spec_of = |n, kind, rate| transform_spec(settings, (n, kind, rate));
    let spec_of = &spec_of;
    let encoders = encode_threads();
    let mut control = Control::new(stop);
    control.tracer = tracer;
    let mut latency = Latency::default();
    let live_view = match early.listener {
        Some(listener) => {
            // the numbers of the batches the encoders get: the averaging stage's, or the batches'
            let numbering = averaging.as_ref().map_or_else(
                || control.next_batch.clone(),
                |stage| stage.numbering.clone(),
            );
            let counters = control.counters.clone();
            let scale = settings.analysis.scale;
            let measure = &settings.analysis.products.measure;
            let look = (scale, measure);
            Some(live::LiveView::start(
                listener, streams, look, counters, numbering,
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

    let frame_capacity = frame_queue_capacity::<T>(settings);
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
    // a late lane's pinned buffers are made the size of a device's batches (`join_late_lane`)
    if let Some((values_in, values_out)) = device_batch_values {
        input_pool.expect(values_in);
        output_pool.expect(values_out);
    }
    let pools = (input_pool, output_pool);
    let worker_threads = WorkerThreads::default();
    // the ready lanes join before any producer starts
    let ready_lanes: Vec<_> = lanes
        .into_iter()
        .filter_map(|lane| join_lane(dispatcher, pools, lane))
        .collect();
    // --alert's levels (encode threads) and rules (sink), events opened before the run
    let band_levels = (!settings.alerts.rules.is_empty()).then(|| {
        let rules = &settings.alerts.rules;
        let look = (settings.analysis.scale, settings.analysis.window);
        let measure = &settings.analysis.products.measure;
        crate::alerts::level::BandLevels::new(rules, streams, frame_n, look, measure)
    });
    let alerts = wire_alerts(settings, streams.len(), live_view.as_ref(), recorder)?;
    let encode_stage = encode::EncodeStage {
        encoder: &*encoder,
        streams,
        output_of: &writer_of,
        values_pool: output_pool,
        bytes_pool: &bytes_pool,
        placed: &placed,
        live: live_tap,
        mark_rows: settings.nats_output.is_some() || settings.output.rotate.is_some(),
        alerts: band_levels.as_ref(),
    };

    let startup = run_report::Startup {
        started,
        engines: built.times,
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
        if let Some(built) = late_lanes {
            // lanes built meanwhile (`auto`'s GPUs, `router::build_engine_set`) join the
            // dispatcher; a job that ends first does not wait for them (`StartUpThread`)
            let tx = done_tx.clone();
            let lane_set = &lane_set;
            let ended = dispatch_ended;
            scope.spawn(move || {
                crossbeam_channel::select! {
                    recv(built) -> late => if let Ok(late) = late {
                        let holders = (readers, encoders);
                        let joining =
                            LateJoin { context, threads, pools, lane_set, retire_cpu, holders };
                        joining.join(late, &tx);
                    },
                    recv(ended) -> _ => {}
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
        outputs.rotate(rotations, signals.reopen.clone());
        let stage = sink_stage::SinkStage {
            outputs,
            streams,
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
    if lane_set.has_device() {
        // the devices' work is done: their driver's exit handlers are not waited for
        crate::left_behind::skip_driver_exit();
    }

    let error = control.take_error().or_else(|| {
        let interrupted = signals.interrupted.load(Ordering::Relaxed);
        let cut = dispatcher.cut();
        (!interrupted)
            .then(|| stalled_error(&given_up, cut))
            .flatten()
    });
    let by_stream = (&streams[..], &written[..]);
    let to = (&outputs[..], &writer_of[..]);
    let meta_written = write_run_meta(settings, meta_file, by_stream, to, error.as_ref());
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
    teach_auto(settings, (auto_route, built.job), control, started);
    if let Some(view) = live_view {
        view.finish(true, &signals.interrupted);
    }
    Ok(())
}

/// Frames waiting for the batcher at most: two batches' worth, within a byte budget.
fn frame_queue_capacity<T: Sample>(settings: &RunSpec) -> usize {
    match settings.analysis.frame {
        FrameSize::Fixed(n) => {
            let by_bytes = limits::FRAME_QUEUE_BYTES / (n * std::mem::size_of::<T>()).max(1);
            (2 * settings.engine.batch_frames(n))
                .clamp(8, 4096)
                .min(by_bytes.max(2))
        }
        FrameSize::Whole => 2,
    }
}

/// Lanes built while the run went on (`auto`'s GPUs, a device started in the background)
/// joining the dispatcher.
struct LateJoin<'a, T: Sample> {
    context: &'a Arc<worker::WorkerContext<T>>,
    threads: &'a WorkerThreads,
    pools: (&'a pool::BufferPool<T>, &'a pool::BufferPool<T>),
    lane_set: &'a Arc<crate::fft::lanes::LaneSet>,
    retire_cpu: bool,
    /// Reader and encoder threads: how many batches and spectra may be held besides the lane's
    /// queue (`join_late_lane`).
    holders: (usize, usize),
}

impl<T: Sample> LateJoin<'_, T> {
    fn join(&self, late: router::LateLanes<T>, done: &crossbeam_channel::Sender<worker::Done<T>>) {
        let (control, dispatcher) = (&self.context.control, &self.context.dispatcher);
        if let Some(e) = late.error {
            control.fail(e); // the device the run named is unusable
        }
        if let (Some(speed), false) = (late.cpu_speed, late.lanes.is_empty()) {
            dispatcher.set_cpu_speed(speed);
        }
        let joined = !late.lanes.is_empty();
        for lane in late.lanes {
            // (its pinned pools are made here, before it takes batches)
            let joined = join_late_lane(dispatcher, self.pools, lane, self.holders);
            if let Some((queue, engines)) = joined {
                self.threads.spawn(queue, engines, done, self.context);
            }
        }
        // the devices alone from now on: the CPU lane hands on what it holds
        if joined && self.retire_cpu {
            let lanes = self.lane_set.lanes();
            lanes.iter().filter(|l| l.is_cpu).for_each(|l| l.retire());
        }
    }
}
