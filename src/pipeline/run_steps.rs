//! The steps of one run before its threads start and after they end, in the order `run_typed`
//! takes them: what must fail before anything is touched (`Early`), the engines (`Built`), the
//! inputs and products (`Planned`), the outputs (`Sinks`), and at the end the sidecar, the
//! report and what `auto` learns (`finish`).

use super::outputs::{
    image_destinations, open_destinations, place_outputs, plan_outputs, refuse_overwriting_inputs,
};
use super::plan::{plan_streams, Reading, SequentialQueue, StreamPlan};
use super::range_reader::RangeJobs;
use super::{job_key, outputs, planned_rows, run_report, tap_sources};
use crate::error::{FftdError, Result};
use crate::fft::route::record::{learn, AutoRoute, JobKey, RunFigures};
use crate::fft::router;
use crate::fleet::output::{NatsConnection, NatsRows};
use crate::limits;
use crate::pipeline::spec::RunSpec;
use crate::products::{Segmenting, Shaping};
use crate::sink::destination::Destination;
use crate::sink::meta::{write_meta, StreamSummary};
use crate::sink::placed::PlacedOutputs;
use crate::sink::{make_encoder, Encoder, OutputFormat};
use crate::source::spec::Input;
use crate::types::{Sample, StreamMeta};
use std::fs::File;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// What must fail before any output file or input is touched.
pub(super) struct Early {
    pub listener: Option<crate::serve::Bound>,
    pub nats: Option<NatsConnection>,
    /// A live input (the microphone, an rtl_tcp receiver): read as it comes.
    pub live: bool,
}

impl Early {
    pub(super) fn open(settings: &RunSpec) -> Result<Early> {
        // --serve's port first: a taken one must stop the run before any output file is touched
        let listener = (settings.serve.as_ref())
            .map(crate::serve::bind)
            .transpose()?;
        // and the NATS output's server: one that cannot take the rows stops the run before any
        // input is read (or a microphone starts)
        let nats = (settings.nats_output.as_ref())
            .map(NatsConnection::open)
            .transpose()?;
        // the places the run writes, before any input (or device) is touched
        outputs::check_destinations(settings)?;
        if settings.report.stats || settings.report.trace.is_some() {
            // the FFT workers' time splits into upload, kernels and download (event profiling)
            crate::fft::opencl::profile_for_stats();
            run_report::enable_detail(settings.report.trace.is_some());
        }
        Ok(Early {
            listener,
            nats,
            live: settings.source.input.is_live(),
        })
    }
}

/// The engines, built before any input is read: a first-use calibration (a few seconds) must
/// not run while a live source is already capturing into its ring.
pub(super) struct Built<T: Sample> {
    pub set: router::EngineSet<T>,
    /// The shape `auto` keeps its records under (only `auto` reads the inputs' sizes for it).
    pub job: Option<JobKey>,
    /// When building began and ended.
    pub times: (Instant, Instant),
}

impl<T: Sample> Built<T> {
    pub(super) fn build(settings: &RunSpec, live: bool) -> Result<Built<T>> {
        let building = Instant::now();
        let engine = &settings.engine;
        let workers = (engine.workers, engine.device_workers);
        let auto = engine.device == crate::fft::device_choice::DeviceChoice::Auto;
        let job = (auto && !live && teaches_auto(settings)).then(|| job_key::<T>(settings));
        let set = router::build_engine_set::<T>(&engine.device, workers, live, job.as_ref())?;
        Ok(Built {
            set,
            job,
            times: (building, Instant::now()),
        })
    }

    /// With `auto` running this job on the CPU engines alone, the run's spec with batches sized
    /// for them.
    pub(super) fn cpu_only_spec(&self, settings: &RunSpec) -> Option<RunSpec> {
        matches!(self.set.start.auto_route(), Some(AutoRoute::CpuOnly)).then(|| {
            let mut spec = settings.clone();
            spec.engine.device_batches = false;
            spec
        })
    }
}

/// The inputs planned, before any is read: their streams, how each is read, the products'
/// per-frame shaping and the recorder tapping them.
pub(super) struct Planned {
    pub streams: Vec<StreamMeta>,
    pub sequential: SequentialQueue,
    /// The range-read streams' jobs.
    pub range_jobs: RangeJobs,
    /// Frame size and hop the range streams were planned with (every fixed-frame stream's).
    frame: (usize, usize),
    pub recorder: Option<crate::record::Recorder>,
    pub shaping: Option<Shaping>,
}

impl Planned {
    pub(super) fn plan(settings: &RunSpec, stop: &Arc<AtomicBool>) -> Result<Planned> {
        // recordings tap every input's samples, so inputs are then read in order
        let reading = match settings.record {
            Some(_) => Reading::Sequential,
            None => Reading::Fastest,
        };
        let StreamPlan {
            mut sequential,
            ranged,
            mut streams,
            framing,
        } = plan_streams(settings, stop, reading)?;
        let recorder = tap_sources(settings, &mut sequential);
        let products = &settings.analysis.products;
        let look = (settings.analysis.scale, settings.analysis.window);
        let shaping =
            Shaping::new(&mut streams, framing.n, products, look).map_err(FftdError::Usage)?;
        Ok(Planned {
            streams,
            sequential: SequentialQueue::new(sequential, settings, stop),
            frame: (framing.n, framing.hop),
            range_jobs: RangeJobs::new(ranged, framing),
            recorder,
            shaping,
        })
    }

    /// Frame size and hop of the range-read streams (every stream's with fixed frames).
    pub(super) fn frame(&self) -> (usize, usize) {
        self.frame
    }

    /// The products reduced in the engine (`--average` segments), unless `FFTD_ENGINE_AVERAGING=0`.
    pub(super) fn segmenting(&self, settings: &RunSpec, live: bool) -> Result<Option<Segmenting>> {
        let products = &settings.analysis.products;
        match crate::knobs::engine_averaging() {
            false => Ok(None), // every frame to the averaging stage (for comparisons)
            true => Segmenting::new(products, &self.streams, self.frame.1, live)
                .map_err(FftdError::Usage),
        }
    }

    /// Rows each stream will have when known up front (not with `--average`: rows per interval
    /// are known only as they come).
    pub(super) fn rows(&self, averaging: bool) -> Vec<Option<u64>> {
        match averaging {
            false => planned_rows(self.range_jobs.streams(), &self.streams, &self.sequential),
            true => vec![None; self.streams.len()],
        }
    }

    /// Reader threads: a fixed pool for the sequential inputs (`--realtime`: one per input,
    /// each paced), and one range reader per core when there are range jobs.
    pub(super) fn readers(&self, realtime: bool) -> (usize, usize) {
        let sequential = match realtime {
            true => self.sequential.readers_wanted(limits::MAX_PACED_READERS),
            false => self.sequential.readers_wanted(limits::cores()),
        };
        let ranged = match self.range_jobs.streams().is_empty() {
            true => 0,
            false => limits::cores(),
        };
        (sequential, ranged)
    }
}

/// Where the rows go, opened before any input is read.
pub(super) struct Sinks<T: Sample> {
    pub encoder: Box<dyn Encoder<T>>,
    pub dests: Vec<Destination>,
    pub placed: PlacedOutputs,
    /// What each output is, for `--meta` and messages.
    pub outputs: Vec<String>,
    /// The output each stream's rows go to.
    pub writer_of: Vec<usize>,
    pub rotations: Vec<Option<crate::sink::rotate::Rotation>>,
    pub meta_file: Option<File>,
    pub tracer: Option<Arc<crate::trace::Tracer>>,
}

impl<T: Sample> Sinks<T> {
    pub(super) fn open(
        settings: &RunSpec,
        rows: RowsPlanned<'_>,
        nats: Option<NatsConnection>,
        stop: &Arc<AtomicBool>,
        started: Instant,
    ) -> Result<Sinks<T>> {
        let streams = rows.streams;
        let plan = plan_outputs(settings, streams)?;
        refuse_overwriting_inputs(settings, &plan)?;
        // --meta is written at the end, but a place that cannot take it is found now
        let meta_file = (settings.output.meta.as_ref())
            .map(|path| outputs::create_output(path, stop))
            .transpose()?;
        let tracer = run_report::open_trace(settings, stop, started)?;
        let layout = rows.layout;
        let (format, scale) = (settings.analysis.format, settings.analysis.scale);
        let encoder = make_encoder::<T>(format, scale);
        let encoder = crate::sink::measured::wrap(encoder, format, layout);
        let placed = match settings.output.rotate {
            Some(_) => Default::default(), // rotated files take rows in order
            None => {
                let values_of = |s: &StreamMeta| values_per_row(settings, &rows, s);
                let n = rows.frame.0;
                place_outputs(&*encoder, &plan, streams, rows.planned, n, values_of)
            }
        };
        let dests = match (nats, format) {
            (Some(connection), _) => {
                let to = NatsRows::new(connection, &settings.analysis, streams, rows.frame);
                vec![Destination::Messages(Box::new(to))]
            }
            (None, OutputFormat::Png) => image_destinations(settings, &plan, streams, stop)?,
            (None, _) => open_destinations(&*encoder, &plan, &placed, stop)?,
        };
        let outputs: Vec<String> = dests.iter().map(Destination::describe).collect();
        let writer_of = plan.writer_of;
        let rotations = outputs::rotations(settings, &dests, &placed, streams, &writer_of);
        Ok(Sinks {
            encoder,
            dests,
            placed,
            outputs,
            writer_of,
            rotations,
            meta_file,
            tracer,
        })
    }
}

/// The transform every batch of frames of `n` samples of `kind` at `rate` Hz gets.
pub(super) fn transform_spec(
    settings: &RunSpec,
    (n, kind, rate): (usize, crate::types::InputKind, f64),
) -> crate::fft::TransformSpec {
    let analysis = &settings.analysis;
    crate::fft::TransformSpec {
        n,
        kind,
        window: analysis.window,
        scale: analysis.products.engine_scale(analysis.scale),
        rate,
    }
}

/// What the outputs are sized by: the streams, their frames, the rows known up front and the
/// measurements after each row's columns.
pub(super) struct RowsPlanned<'a> {
    pub streams: &'a [StreamMeta],
    pub frame: (usize, usize),
    pub planned: &'a [Option<u64>],
    pub layout: Option<&'a Arc<crate::products::measure::MeasureLayout>>,
}

/// Values in one row of stream `s`: its columns (or bins) times values per bin, plus the
/// measurements after them.
fn values_per_row(settings: &RunSpec, rows: &RowsPlanned<'_>, s: &StreamMeta) -> usize {
    let extras = rows.layout.map_or(0, |l| l.extras());
    match &s.columns {
        Some(_) if rows.layout.is_some_and(|l| l.cross_bins.is_some()) => extras,
        Some(columns) => columns.len() * settings.analysis.scale.values_per_bin() + extras,
        None => transform_spec(settings, (rows.frame.0, s.kind, s.rate)).values_out(),
    }
}

/// `--meta` at the end of a run: what each stream became, and the run's error if it failed.
pub(super) fn write_run_meta(
    settings: &RunSpec,
    file: Option<File>,
    (streams, written): (&[StreamMeta], &[super::StreamWritten]),
    (outputs, writer_of): (&[String], &[usize]),
    error: Option<&FftdError>,
) -> Result<()> {
    let (Some(path), Some(file)) = (&settings.output.meta, file) else {
        return Ok(());
    };
    let summaries: Vec<StreamSummary<'_>> = streams
        .iter()
        .zip(written)
        .map(|(meta, w)| StreamSummary {
            meta,
            n: w.n,
            hop: settings.analysis.fixed().map_or(w.n, |(_, hop)| hop),
            frames: w.frames,
            output: outputs[writer_of[meta.id]].clone(),
        })
        .collect();
    let failure = error.map(ToString::to_string);
    let analysis = &settings.analysis;
    let input_format = settings.source.input_format;
    write_meta(
        path,
        file,
        analysis,
        input_format,
        &summaries,
        failure.as_deref(),
    )
}

/// Whether a run can teach `auto` (and so takes its way from `auto`'s records): whole file jobs
/// only, not stdin's producer rate nor a run paced by a NATS server. The others run the CPU
/// engines alone, as a job with no record would have before any was kept.
pub(super) fn teaches_auto(settings: &RunSpec) -> bool {
    let files = matches!(&settings.source.input, Input::Files(f) if !f.iter().any(|p| p == "-"));
    files && settings.nats_output.is_none()
}

/// What `auto` learns from a finished job run `route`'s way (not from one cut short):
/// `route::record::learn`, from the run's samples, frames and the CPU lane's bridge.
pub(super) fn teach_auto(
    (route, job): (Option<AutoRoute>, Option<JobKey>),
    control: &super::Control,
    lane_set: &crate::fft::lanes::LaneSet,
    started: Instant,
) {
    let Some((route, job)) = route.zip(job).filter(|_| !control.stopping()) else {
        return;
    };
    let frames: u64 = (lane_set.lanes().iter())
        .map(|l| l.counters.frames.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    let run = RunFigures {
        samples: crate::stats::Counters::get(&control.counters.samples_analysed) as f64,
        frames,
        started,
        bridge: *control.bridged.lock().unwrap_or_else(|e| e.into_inner()),
    };
    learn(&job, route, run);
}
