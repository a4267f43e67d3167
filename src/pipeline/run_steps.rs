//! A run's first steps, before anything is read or written, and its last, in the order
//! `run::run_typed` takes them: what must fail before anything is touched (`Early`), the
//! engines (`Built`, started as `fft::route::plan` decides), and at the end what `auto` learns
//! (`teach_auto`). The inputs are planned in `plan` (`Planned`), the outputs opened in
//! `outputs` (`Sinks`).

use super::{destination_checks, run_report};
use crate::error::Result;
use crate::fft::route::record::{learn, AutoRoute, JobKey, RunFigures};
use crate::fft::router;
use crate::fleet::output::NatsConnection;
use crate::frame::FrameSize;
use crate::limits;
use crate::pipeline::spec::RunSpec;
use crate::source::spec::Input;
use crate::types::Sample;
use std::time::Instant;

/// What must fail before any output file or input is touched.
pub(super) struct Early {
    pub listener: Option<crate::serve::Bound>,
    pub nats: Option<NatsConnection>,
    /// A live input (the microphone, an rtl_tcp receiver): read as it comes.
    pub live: bool,
}

impl Early {
    pub(super) fn open(run_spec: &RunSpec) -> Result<Early> {
        // --serve's port first: a taken one must stop the run before any output file is touched
        let listener = (run_spec.serve.as_ref())
            .map(crate::serve::bind)
            .transpose()?;
        // and the NATS output's server: one that cannot take the rows stops the run before any
        // input is read (or a microphone starts)
        let nats = (run_spec.nats_output.as_ref())
            .map(NatsConnection::open)
            .transpose()?;
        // the places the run writes, before any input (or device) is touched
        destination_checks::check_destinations(run_spec)?;
        refuse_closed_streams(run_spec)?;
        if run_spec.report.stats || run_spec.report.trace.is_some() {
            // the FFT workers' time splits into upload, kernels and download (event profiling)
            crate::fft::opencl::profile_for_stats();
            run_report::enable_detail(run_spec.report.trace.is_some());
        }
        Ok(Early {
            listener,
            nats,
            live: run_spec.source.input.is_live(),
        })
    }
}

/// A closed stdout that the rows or events would go to, or a closed stdin the input is: refused
/// before any input is opened (a microphone started, a receiver tuned).
fn refuse_closed_streams(run_spec: &RunSpec) -> Result<()> {
    use crate::stdio::{names_stdout, refuse_closed_stdin, refuse_closed_stdout};
    let output = &run_spec.output;
    let to_stdout = (output.output.as_deref()).is_none_or(names_stdout)
        && output.output_dir.is_none()
        && run_spec.nats_output.is_none();
    if to_stdout {
        let instead = "give --output FILE (--output /dev/null to discard them)";
        refuse_closed_stdout("the spectra", instead)?;
    }
    if run_spec.alerts.events_to_stdout() {
        refuse_closed_stdout("the events", "give --events FILE")?;
    }
    if run_spec.source.input.reads_stdin() {
        refuse_closed_stdin()?;
    }
    Ok(())
}

/// The engines, built before any input is read: a first-use calibration (a few seconds) must
/// not run while a live source is already capturing into its ring.
pub(super) struct Built<T: Sample> {
    pub set: router::EngineSet<T>,
    /// The shape `auto` keeps its records under (only `auto` reads the inputs' sizes for it).
    pub job: Option<JobKey>,
    /// When building began and ended.
    pub building: std::ops::Range<Instant>,
}

impl<T: Sample> Built<T> {
    pub(super) fn build(run_spec: &RunSpec, live: bool) -> Result<Built<T>> {
        let building = Instant::now();
        let engine = &run_spec.engine;
        let workers = (engine.workers, engine.device_workers);
        let auto = engine.device == crate::fft::device_choice::DeviceChoice::Auto;
        let job = (auto && !live && teaches_auto(run_spec)).then(|| job_key(run_spec));
        let set = router::build_engine_set::<T>(&engine.device, workers, live, job.as_ref())?;
        Ok(Built {
            set,
            job,
            building: building..Instant::now(),
        })
    }

    /// With `auto` running this job on the CPU engines alone, the run's spec with batches sized
    /// for them.
    pub(super) fn cpu_only_spec(&self, run_spec: &RunSpec) -> Option<RunSpec> {
        matches!(self.set.start.auto_route(), Some(AutoRoute::CpuOnly)).then(|| {
            let mut spec = run_spec.clone();
            spec.engine.device_batches = false;
            spec
        })
    }
}

/// The shape of this job for `auto`'s records (`route::record`) and for which GPUs the driver
/// shows its runs (`route::gpu_view`).
pub(super) fn job_key(run_spec: &RunSpec) -> JobKey {
    let frame = match run_spec.analysis.frame {
        FrameSize::Fixed(n) => n,
        FrameSize::Whole => 0,
    };
    let p = &run_spec.analysis.products;
    let products = match (p.bands.is_some(), p.average.is_some()) {
        (true, true) => "bands+average",
        (true, false) => "bands",
        (false, true) => "average",
        (false, false) if p.fmin.is_some() || p.fmax.is_some() => "range",
        (false, false) => "plain",
    };
    let input_bytes = match &run_spec.source.input {
        Input::Files(files) => files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum(),
        _ => 0,
    };
    JobKey::new(
        (frame, run_spec.analysis.hop_for(frame)),
        run_spec.analysis.precision.name(),
        &format!("{products} {:?}", run_spec.analysis.scale),
        input_bytes,
        limits::cores(),
    )
}

/// Whether a run can teach `auto` (and so takes its way from `auto`'s records): whole file jobs
/// only, not stdin's producer rate nor a run paced by a NATS server. The others run the CPU
/// engines alone, as a job with no record would have before any was kept.
pub(super) fn teaches_auto(run_spec: &RunSpec) -> bool {
    let files = matches!(&run_spec.source.input, Input::Files(f) if !f.iter().any(|p| p == "-"));
    files && run_spec.nats_output.is_none()
}

/// What `auto` learns from a finished job run `route`'s way (not from one cut short):
/// `route::record::learn`, from the run's samples, frames and the CPU lane's bridge.
pub(super) fn teach_auto(
    route: Option<AutoRoute>,
    job: Option<JobKey>,
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
