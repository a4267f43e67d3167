//! The pipeline: source → frame → batch → fft → products → encode → sink, each stage on its own
//! threads joined by bounded channels. Readers frame the inputs (`reader`, or `range_reader`
//! straight into batches); the batcher fills batches (`batcher`), each for the lane
//! `fft::route::rank` picks (`dispatch`: one lane per device); FFT workers transform them, one
//! engine each (`worker`); `--average` reduces rows (`averaging`); encoders turn rows into bytes
//! (`encode`); the sink writes them re-ordered by batch number (`sink_stage`).
//!
//! A run, top to bottom, is `run::run_typed`: its first steps (`run_steps`, `plan`, `outputs`),
//! the one wiring function `run_stages::Stages::run_threads`, and the teardown.
//!
//! Memory stays bounded whatever the input size: every channel is bounded, and the sink's re-order
//! buffer holds at most the dispatcher's window of batches (`dispatch`), even when a device hangs.
//! Shutdown (end of input, `--max-frames`, `--duration`, SIGINT/SIGTERM, a closed stdout, an
//! error) sets `Control::stop`; readers stop reading and finish their streams, and everything
//! already queued drains through the sink (but for a hung device's batches: `dispatch` gives
//! them up, and the output ends before the first of them).

mod averaging;
mod batcher;
mod destination_checks;
mod dispatch;
mod encode;
mod fft_side;
mod late_join;
mod live_view;
mod outputs;
pub(crate) mod plan;
mod pool;
mod range_reader;
mod reader;
mod run;
mod run_report;
mod run_stages;
mod run_steps;
mod sink_stage;
pub(crate) mod spec;
mod worker;

use crate::pipeline::spec::RunSpec;

use crate::error::{FftdError, Result};
use crate::fft::router;
use crate::frame::Frame;
use crate::products::finish_for_scale;
use crate::stats::Counters;
use crate::timeline::{Kind, Phase};
use crate::types::StreamMeta;
use crate::types::WithSample;
use crate::types::{Sample, Signals};
use dispatch::{Dispatcher, LaneId};
use plan::{plan_streams, Reading, SequentialInput, SequentialQueue};
use range_reader::RangeStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// State every stage shares: the stop flag, counters and the first error.
pub(crate) struct Control {
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
    /// What the CPU engines did before late lanes (a GPU) joined, which `auto` learns from
    /// (`run_steps::teach_auto`).
    pub bridged: Mutex<Option<crate::fft::route::record::Bridge>>,
    /// Why a device start-up in the background was not begun, or its lanes not joined
    /// (`late_join`), for `--stats` (`fftd device start-up:`): the first note stands.
    device_start_up: Mutex<Option<String>>,
    /// The output's reader went away (a closed pipe): the run stopped before its inputs ended.
    output_closed: AtomicBool,
}

impl Control {
    pub(crate) fn new(stop: Arc<AtomicBool>) -> Self {
        Control {
            stop,
            counters: Arc::default(),
            error: Mutex::new(None),
            next_batch: Arc::default(),
            cuts: Mutex::default(),
            skipped: Mutex::default(),
            tracer: None,
            bridged: Mutex::default(),
            device_start_up: Mutex::default(),
            output_closed: AtomicBool::new(false),
        }
    }

    /// Stops the run because the output's reader went away (`| head`): not an error, but the
    /// rows stop early, and `--meta` says so (`interrupted`).
    pub(crate) fn stop_for_closed_output(&self) {
        self.output_closed.store(true, Ordering::Relaxed);
        self.request_stop();
    }

    /// Whether `stop_for_closed_output` stopped the run.
    pub(crate) fn output_closed(&self) -> bool {
        self.output_closed.load(Ordering::Relaxed)
    }

    /// Notes why a device start-up in the background was not begun or not joined.
    pub(crate) fn note_device_start_up(&self, why: String) {
        let mut note = (self.device_start_up.lock()).unwrap_or_else(|e| e.into_inner());
        note.get_or_insert(why);
    }

    /// The note of `note_device_start_up`, if any.
    pub(crate) fn device_start_up_note(&self) -> Option<String> {
        let note = (self.device_start_up.lock()).unwrap_or_else(|e| e.into_inner());
        note.clone()
    }

    /// A new batch number: numbers are handed out once each, from 0 without gaps, and the sink
    /// writes batches in that order.
    pub(crate) fn take_batch_id(&self) -> u64 {
        self.next_batch.fetch_add(1, Ordering::SeqCst)
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(crate) fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Records the first error and asks every stage to stop.
    pub(crate) fn fail(&self, e: FftdError) {
        self.fail_input(e);
        self.request_stop();
    }

    /// Records an input's error without stopping the other inputs: the run ends as usual and
    /// fails with the first error; later ones are logged as they come.
    pub(crate) fn fail_input(&self, e: FftdError) {
        if let Ok(mut slot) = self.error.lock() {
            match *slot {
                None => *slot = Some(e),
                // said now: the run's error at the end is the first one
                Some(_) => tracing::error!("{e}"),
            }
        }
    }

    /// Whether an error has been recorded (`fail`, `fail_input`): the run will fail.
    pub(crate) fn has_failed(&self) -> bool {
        self.error.lock().is_ok_and(|slot| slot.is_some())
    }

    /// Ends stream `stream` before frame `seq`: frames from there on are not written, though
    /// batches read in parallel may hold some. Called before the failed batch's number is given
    /// up, so the stage that puts batches in order sees the cut before any later batch.
    pub(crate) fn cut_stream(&self, stream: usize, seq: u64) {
        if let Ok(mut cuts) = self.cuts.lock() {
            match cuts.iter_mut().find(|(s, _)| *s == stream) {
                Some((_, cut)) => *cut = (*cut).min(seq),
                None => cuts.push((stream, seq)),
            }
        }
    }

    /// Whether frame `seq` of `stream` lies past a cut (`cut_stream`).
    pub(crate) fn is_cut(&self, stream: usize, seq: u64) -> bool {
        self.cuts
            .lock()
            .is_ok_and(|cuts| cuts.iter().any(|&(s, cut)| s == stream && seq >= cut))
    }

    /// Batch `id` will never come (its input failed while it was being read): the stages that
    /// put batches in order go past it (`next_in_order`).
    pub(crate) fn skip_batch(&self, id: u64) {
        if let Ok(mut skipped) = self.skipped.lock() {
            skipped.insert(id);
        }
    }

    /// The batch numbered `*next` from `reorder`, past numbers that will never come; None while
    /// it has not arrived.
    pub(crate) fn next_in_order<B>(
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

/// A fleet worker's own files (`--meta`, `--trace`, `--events`) against the files it reads
/// (`--config`, the `--nats-*` files): the check a run makes before it writes anything
/// (`destination_checks::refuse_overwriting_inputs`), for a worker, which writes no rows to files.
pub fn refuse_overwriting_worker_inputs(run_spec: &RunSpec) -> Result<()> {
    destination_checks::refuse_overwriting_inputs(run_spec, &[])
}

/// Runs the whole analysis; returns when every stream has been written (or the run was stopped)
/// and, with `--serve`, once interrupted after that.
pub fn run(run_spec: &RunSpec, signals: Signals) -> Result<()> {
    // (what decides which devices a run sees, read before OpenCL loads: see there)
    crate::fft::route::kinds::environment();
    run_spec
        .analysis
        .precision
        .dispatch(Run { run_spec, signals })
}

/// Shows NVIDIA's driver only the GPU this run uses first, where what runs of its device
/// choice and its job's shape found here says so (`fft::route::gpu_view`).
///
/// # Safety
///
/// To be called by the program's main thread before it starts any other thread (and before
/// OpenCL loads): it changes the process's environment, which another thread reading it
/// meanwhile could see half written.
pub unsafe fn narrow_gpu_view(run_spec: &RunSpec) {
    let live = run_spec.source.input.is_live();
    let job = || run_steps::job_key(run_spec).as_str().to_string();
    // SAFETY: the caller's promise, passed on
    unsafe { crate::fft::route::gpu_view::narrow_gpu_view(&run_spec.engine.device, live, job) }
}

/// A run in the sample type of its precision.
struct Run<'a> {
    run_spec: &'a RunSpec,
    signals: Signals,
}

impl WithSample for Run<'_> {
    type Output = Result<()>;
    fn run<T: Sample>(self) -> Result<()> {
        run::run_typed::<T>(self.run_spec, self.signals)
    }
}

/// Cuts every input into frames exactly as a run would (channels, hop, tail, limits) and hands
/// them to `consume` in each stream's order, for tools that work on frames (`fftd check`).
pub(crate) fn for_each_frame<T: Sample>(
    run_spec: &RunSpec,
    stop: Arc<AtomicBool>,
    consume: &mut dyn FnMut(Frame<T>) -> Result<()>,
) -> Result<()> {
    let plan = plan_streams(run_spec, &stop, Reading::Sequential)?;
    let control = Control::new(stop);
    let reading = spec::ReadSpec::of(run_spec);
    let (tx, rx) = crossbeam_channel::bounded(64);
    std::thread::scope(|scope| {
        let (control, reading) = (&control, &reading);
        for input in plan.sequential {
            let SequentialInput::Open(plan) = input else {
                continue; // Reading::Sequential opens every input
            };
            let tx = tx.clone();
            scope.spawn(move || {
                let mut clock = control.clock(Kind::Reader, Phase::ReaderWait);
                let read = reader::read_source::<T>(plan, reading, tx, control, &mut clock);
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

/// A lane joined to the dispatcher: its queue and its engines.
struct JoinedLane<T: Sample> {
    queue: worker::LaneQueue<T>,
    engines: router::Engines<T>,
}

/// Joins `lane` to the dispatcher, with its home in both pools: its device's pinned memory, or
/// heap memory, with the pinned blocks `blocks` says made before it takes batches (a lane that
/// joins a running pipeline: `late_join::JOIN_BLOCKS`), the others pinned in the background as
/// takes miss them (`pool::BufferPool::take`). None when dispatching has already ended.
fn join_lane<T: Sample>(
    dispatcher: &Dispatcher<T>,
    pools: &pool::Pools<T>,
    lane: router::LaneEngines<T>,
    blocks: pool::HomeBlocks,
) -> Option<JoinedLane<T>> {
    // batches live in the lane's device's pinned memory when it has some (no staging copies)
    let pinned = lane.engines.iter().find_map(|e| e.pinned_memory());
    let queue = lane.engines.len();
    let now = |pool: &pool::BufferPool<T>, kind| match &pinned {
        Some(memory) => {
            let count = blocks.before_join(kind, queue);
            pool.premade(memory, count, &|| dispatcher.closed())
        }
        _ => Vec::new(),
    };
    let (samples, spectra) = (pool::PoolKind::Samples, pool::PoolKind::Spectra);
    let mut premade = Some((now(&pools.samples, samples), now(&pools.spectra, spectra)));
    let homes = |id| {
        let (made_in, made_out) = premade.take().unwrap_or_default();
        let most = |kind: pool::PoolKind| Some(kind.device_blocks());
        (pools.samples).add_lane_with(id, pinned.clone(), made_in, most(samples));
        (pools.spectra).add_lane_with(id, pinned.clone(), made_out, most(spectra));
    };
    let Some((id, rx)) = dispatcher.add_lane(lane.lane.clone(), lane.speed, queue, homes) else {
        // dispatching ended while the lane came up (its blocks being made): its engines and
        // blocks are left to the exit, not released by the driver on the run's way there
        crate::left_behind::keep(Box::new((lane.engines, premade)));
        return None;
    };
    let queue = worker::LaneQueue {
        id,
        lane: lane.lane,
        rx,
    };
    Some(JoinedLane {
        queue,
        engines: lane.engines,
    })
}

/// After a worker's panic, how long the other workers are waited for at the end (one may be
/// stuck on a hung device for good; the panic goes on once they are joined).
pub(super) const PANIC_JOIN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// The FFT workers' threads. They are not scoped: a worker stuck on a hung device never returns,
/// and the run must still be able to end (`dispatch`); the others are joined at the end.
#[derive(Default)]
pub(super) struct WorkerThreads {
    threads: Mutex<Vec<(LaneId, std::thread::JoinHandle<()>)>>,
}

impl WorkerThreads {
    /// One FFT worker thread per engine of a lane.
    pub(super) fn spawn<T: Sample>(
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
    pub(super) fn join(
        &self,
        left: impl Fn(LaneId) -> bool,
        patience: Option<std::time::Duration>,
    ) {
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

/// issue 27: `--events` opened. `nats` (a server connected) is done before any output is
/// opened, so that a server that fails refuses the run with the user's files as they were; a
/// file or FIFO after the outputs (a reader opens an output FIFO first, then the events').
pub(super) fn open_events(
    run_spec: &RunSpec,
    nats: bool,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Option<crate::alerts::events::EventWriter>> {
    use crate::alerts::events::{EventWriter, EventsTarget};
    let options = &run_spec.alerts;
    match &options.events {
        Some(target) if options.wanted() && matches!(target, EventsTarget::Nats(_)) == nats => {
            EventWriter::open(target, &options.nats, options.retry, stop).map(Some)
        }
        _ => Ok(None),
    }
}

/// issue 27: the sink's alerts (None without `--alert`): their `--events` (a NATS one opened
/// already, `open_events`), the live view's feed set.
pub(super) fn wire_alerts(
    run_spec: &RunSpec,
    streams: &[crate::types::StreamMeta],
    live_view: Option<&live_view::LiveView>,
    (nats, recorder, stop): (
        Option<crate::alerts::events::EventWriter>,
        Option<crate::record::Recorder>,
        &std::sync::atomic::AtomicBool,
    ),
) -> Result<Option<crate::alerts::Alerts>> {
    let options = &run_spec.alerts;
    if !options.wanted() {
        return Ok(None);
    }
    let writer = match nats {
        Some(nats) => Some(nats),
        None => open_events(run_spec, false, stop)?,
    };
    // (the live view made the feed before it started serving: `LiveView::start`)
    let feed = live_view.and_then(|view| view.hub.alerts.get().cloned());
    let rules = options.rules.clone();
    let mut alerts = crate::alerts::Alerts::new(rules, streams.len(), writer, feed);
    if let Some(recorder) = recorder {
        alerts.listen(Box::new(recorder));
    }
    Ok(Some(alerts))
}

/// issue 27: with `--record-on-alert`, every input's source copies its samples into a pre-roll
/// ring (`record::tap`); the recorder that writes from them.
pub(super) fn tap_sources(
    run_spec: &RunSpec,
    sequential: &mut [SequentialInput],
) -> Result<Option<crate::record::Recorder>> {
    let Some(options) = run_spec.record.clone() else {
        return Ok(None);
    };
    let epoch = crate::sink::rotate::now_epoch();
    let mut recorder = crate::record::Recorder::new(options, epoch);
    let infos: Vec<_> = (sequential.iter())
        .filter_map(|input| match input {
            SequentialInput::Open(plan) => Some(plan.source.info()),
            _ => None,
        })
        .collect();
    (recorder.check_wav_rates(infos.iter().copied()))
        .and_then(|()| recorder.check_memory(infos.into_iter()))
        .map_err(FftdError::Usage)?;
    for input in sequential.iter_mut() {
        if let SequentialInput::Open(plan) = input {
            let streams = plan.splitter.streams();
            let ring = recorder.tap(plan.source.info(), plan.first_stream, streams);
            crate::record::tap::wrap(&mut plan.source, ring);
        }
    }
    Ok(Some(recorder))
}

/// The error of a run that gave up stalled lanes after a stop that was not SIGINT/SIGTERM (a
/// limit, a closed output): frames it should have written may be missing.
pub(super) fn stalled_error(
    given_up: &[(LaneId, String, u64)],
    cut: Option<u64>,
) -> Option<FftdError> {
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

/// Frames written for one stream, and the frame size it used.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StreamWritten {
    pub frames: u64,
    pub n: usize,
}

/// Encode threads: one per CPU core (tuning knob FFTD_ENCODERS=N).
pub(super) fn encode_threads() -> usize {
    crate::knobs::encoders()
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 256)
}

/// The averaging stage of `--average`, with every stream's grouping checked now (an interval
/// shorter than a hop is a usage error before the run, not during it).
pub(super) fn average_stage<'a>(
    run_spec: &RunSpec,
    streams: &'a [StreamMeta],
    (n, hop): (usize, usize),
) -> Result<Option<averaging::AveragingStage<'a>>> {
    let Some(spec) = run_spec.analysis.products.row_average() else {
        return Ok(None);
    };
    for stream in streams {
        spec.grouping(stream.rate, hop).map_err(FftdError::Usage)?;
    }
    Ok(Some(averaging::AveragingStage {
        spec,
        mode: run_spec.analysis.products.mode,
        hop,
        streams,
        finish: finish_for_scale(run_spec.analysis.scale, &run_spec.analysis.products, n),
        numbering: Arc::default(),
        cross: match run_spec.analysis.products.measure.cross {
            Some(cross) => Some(
                crate::products::measure::cross::CrossPlan::new(
                    cross,
                    streams,
                    (n, hop),
                    run_spec.analysis.window,
                    run_spec.analysis.products.average,
                )
                .map_err(FftdError::Usage)?,
            ),
            None => None,
        },
        measuring: crate::products::measure::Measuring::new(
            &run_spec.analysis.products,
            streams,
            (n, hop),
            run_spec.analysis.scale,
            run_spec.analysis.window,
        ),
    }))
}

/// Rows each stream will give, where that is known before the run: every stream of a run with no
/// sequential input is range-read, and its frame count follows from the file's length.
pub(super) fn planned_rows(
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
