//! Builds the engines of a run from `--device`, as lanes: one lane per device instance
//! (`device_set`), each with one engine per FFT worker. `build_engine_set` is what the pipeline
//! asks for; `build_engines` / `build_engines_with` give the engines of every lane in one list
//! (for tools and tests that drive engines themselves).
//!
//! - `cpu`: one lane of CPU engines.
//! - `gpu`, `opencl:P:D`: one OpenCL lane; no usable device is an error.
//! - `gpu:all`, lists: one lane per device instance (a `cpu` entry is a lane of CPU engines).
//!   With several lanes each OpenCL device is calibrated (cached per device model and driver,
//!   see `calibrate`; measured on first use), so the pipeline can spread batches in proportion
//!   to the measured rates (`route::LaneSpeed`).
//! - `auto`: a lane of CPU engines, and GPU lanes (`auto`): on file input, when its record says
//!   they help, the strongest GPU at once and the others in reserve; on live input, the
//!   strongest device whose calibration finds it faster than the CPU for some size. The
//!   dispatcher gives each batch to the lane predicted to finish it first (`route::rank`). The
//!   CPU engine alone when there is no OpenCL.
//!
//! Which lanes start, and when, is `route::plan`'s decision; this module builds what it says.
//!
//! Every OpenCL lane's engines are `routed::RoutedEngine`s (CPU fallback, failure hand-off).
//! Workers of one lane share a context and program cache (`opencl::device::SharedDevice`, one
//! per device instance); each worker has its own queues, kernels and buffers.

use super::calibrate::{self, Calibration};
use super::cpu::CpuEngine;
pub use super::device_choice::DeviceChoice;
use super::device_set::{self, LaneDevice, LaneSpec};
use super::fault::FaultPlan;
use super::lanes::{Lane, LaneSet};
use super::opencl::device::SharedDevice;
use super::opencl::{OpenClEngine, OpenClOptions};
use super::route::record::JobKey;
use super::route::{self, kinds, Facts, LaneSpeed, SpeedSide, Start};
use super::routed::RoutedEngine;
use super::Engine;
use crate::error::FftdError;
use crate::setup_log::What;
use crate::types::Sample;
use std::sync::{Arc, Mutex};

mod auto;
use auto::{auto_background_lanes, auto_live_lanes};

/// Everything `build_engines_with` needs.
#[derive(Clone, Debug)]
pub struct RouterOptions {
    pub choice: DeviceChoice,
    /// FFT worker threads per lane: one engine each.
    pub workers: usize,
    /// Engines per OpenCL device (`--workers` when given); None: `limits::DEVICE_WORKERS`.
    pub device_workers: Option<usize>,
    /// A calibration may be measured when none is cached (a few seconds on first use): tools,
    /// tests and live `auto`; a run's devices named outright never (`build_engine_set`). When
    /// false and none is cached, `auto` uses the CPU engine and several devices get equal
    /// shares.
    pub calibrate_allowed: bool,
    /// `auto` measures a new calibration even when one is cached (`fftd bench --calibrate`).
    pub recalibrate: bool,
    pub opencl: OpenClOptions,
}

impl RouterOptions {
    /// OpenCL engines (FFT workers) per device instance.
    pub(crate) fn engines_per_device(&self) -> usize {
        let default = crate::limits::DEVICE_WORKERS;
        self.device_workers.unwrap_or(default).max(1)
    }

    /// Defaults: calibration allowed, OpenCL options from the environment.
    pub fn new(choice: DeviceChoice, workers: usize) -> Self {
        RouterOptions {
            choice,
            workers,
            device_workers: None,
            calibrate_allowed: true,
            recalibrate: false,
            opencl: OpenClOptions::from_env(),
        }
    }
}

/// One engine per FFT worker.
pub(crate) type Engines<T> = Vec<Box<dyn Engine<T>>>;

/// One lane's engines, ready to run.
pub(crate) struct LaneEngines<T: Sample> {
    pub lane: Arc<Lane>,
    pub engines: Engines<T>,
    pub speed: LaneSpeed,
}

/// Lanes built on a thread of their own (`auto`'s GPUs on file input), and the speed their
/// calibration gives the CPU lane already running.
pub(crate) struct LateLanes<T: Sample> {
    pub lanes: Vec<LaneEngines<T>>,
    pub cpu_speed: Option<LaneSpeed>,
    /// Why the device a run named (`--device gpu`, started in the background) is unusable: the
    /// run fails with it.
    pub error: Option<FftdError>,
}

/// Where late lanes are handed over, once or (under `gpu:all`: each device as it comes up)
/// several times.
pub(crate) type Arrival<'a, T> = &'a (dyn Fn(LateLanes<T>) + Sync);

/// Builds `LateLanes` (device start-up, calibration) when called, handing them to the arrival.
pub(crate) type DeferredLanes<T> = Box<dyn FnOnce(Arrival<'_, T>) + Send>;

/// The pipeline's engines: the lanes ready now, and lanes still to be built.
pub(crate) struct EngineSet<T: Sample> {
    /// Where the lanes report failures; a lane joins it when it starts taking batches.
    pub lane_set: Arc<LaneSet>,
    pub ready: Vec<LaneEngines<T>>,
    pub later: Option<DeferredLanes<T>>,
    /// How the lanes start (`route::plan`): whether the CPU lane retires once the later lanes
    /// join, and the way `auto` runs this file job.
    pub start: Start,
}

/// One engine per FFT worker per lane, in one list, with default `RouterOptions`.
pub(crate) fn build_engines<T: Sample>(
    choice: &DeviceChoice,
    workers: usize,
) -> Result<Engines<T>, FftdError> {
    build_engines_with(&RouterOptions::new(choice.clone(), workers))
}

/// The engines of every lane for `opts.choice`, in one list. Nothing hands batches between
/// lanes here: a lane whose device fails computes on its CPU engines.
pub fn build_engines_with<T: Sample>(opts: &RouterOptions) -> Result<Engines<T>, FftdError> {
    let lane_set = LaneSet::new(false);
    let lanes = build_lanes::<T>(opts, &lane_set)?;
    for l in &lanes {
        lane_set.join(&l.lane);
    }
    Ok(lanes.into_iter().flat_map(|l| l.engines).collect())
}

/// The engines for a run, started as `route::plan` decides: the named devices opened now, or
/// built in the background while a CPU lane bridges their start-up; for `auto` on a file job,
/// the CPU engines at once and the GPUs' lanes in the background when its record says they help
/// (only GPU-type devices: an OpenCL device on the CPU would share the CPU engines' cores). A
/// short job so never waits for a device and a long one gets them all.
pub(crate) fn build_engine_set<T: Sample>(
    choice: &DeviceChoice,
    (workers, device_workers): (usize, Option<usize>),
    live: bool,
    job: Option<&JobKey>,
) -> Result<EngineSet<T>, FftdError> {
    let lane_set = LaneSet::new(true);
    let start = route::plan(&Facts::gather(choice, live, job));
    let mut opts = RouterOptions::new(choice.clone(), workers);
    opts.device_workers = device_workers;
    // a run's devices named outright share by cached calibrations, or equally (their backlogs
    // adapt): a first run on a machine never waits for a calibration (issue 41); `auto` on live
    // input may calibrate; `auto` on a file job never (measured while the CPU engines load
    // every core it would be skewed, and cached; `fftd bench --calibrate` makes one)
    opts.calibrate_allowed = *choice == DeviceChoice::Auto && live;
    let later: Option<DeferredLanes<T>> = match start {
        Start::Opened => {
            let OpenedLanes { ready, later } = opened_lanes(opts, &lane_set)?;
            if choice.names_a_device() && !live {
                kinds::remember(choice);
            }
            return Ok(EngineSet {
                ready,
                lane_set,
                later,
                start,
            });
        }
        Start::Bridged => Some(background_lanes(opts, lane_set.clone())),
        Start::Auto { shares, .. } => start
            .builds_late()
            .then(|| auto_background_lanes(opts, lane_set.clone(), shares)),
    };
    Ok(EngineSet {
        lane_set,
        ready: vec![cpu_lane(workers)],
        later,
        start,
    })
}

/// The named devices' lanes (context, programs, engines), built when called on a thread of its
/// own, each device's lane handed over as soon as it is up (`lanes_as_they_come`): none waits
/// for another's context (the driver makes a second one after the first: on two H200s the
/// first device's lane waited 0.12 s for the second's, session 36). A device that cannot be
/// opened fails the run (`LateLanes::error`), as it does when opened first; one waiting in
/// reserve (`gpu:all`) is a warning, and starts only when the run wants it
/// (`LaneSet::await_later_devices`).
fn background_lanes<T: Sample>(opts: RouterOptions, lane_set: Arc<LaneSet>) -> DeferredLanes<T> {
    Box::new(move |arrive| {
        // (what the choice named, for the next run's plan: a first run's guess corrected)
        kinds::remember(&opts.choice);
        lanes_as_they_come(&opts, &lane_set, arrive);
    })
}

/// The lanes of a run opened before it starts (`Start::Opened`): all of them, or under
/// `gpu:all` the first device's, the others left to come once it bounds the run
/// (`open_as_they_come`), as when started in the background.
fn opened_lanes<T: Sample>(
    opts: RouterOptions,
    lane_set: &Arc<LaneSet>,
) -> Result<OpenedLanes<T>, FftdError> {
    let all_now = |opts: &RouterOptions| -> Result<OpenedLanes<T>, FftdError> {
        let ready = build_lanes(opts, lane_set)?;
        Ok(OpenedLanes { ready, later: None })
    };
    if opts.choice != DeviceChoice::AllGpus {
        return all_now(&opts);
    }
    let mut specs: Vec<(usize, LaneSpec)> = (device_set::resolve(&opts.choice)?)
        .into_iter()
        .enumerate()
        .collect();
    if specs.len() < 2 {
        return all_now(&opts);
    }
    let rest = specs.split_off(1);
    let (_, first) = &specs[0];
    let gpus = open_engines::<T>(first, &opts)
        .map_err(|e| FftdError::Runtime(format!("{}: {e}", first.label())))?;
    let ready = vec![routed_lane(first, gpus, lane_set)];
    let lane_set = lane_set.clone();
    let later: DeferredLanes<T> =
        Box::new(move |arrive| open_as_they_come(&opts, &lane_set, &rest, arrive));
    Ok(OpenedLanes {
        ready,
        later: Some(later),
    })
}

/// The lanes opened before a run, and those to come during it.
struct OpenedLanes<T: Sample> {
    ready: Vec<LaneEngines<T>>,
    later: Option<DeferredLanes<T>>,
}

/// Each device of `opts.choice` opened on a thread of its own and handed to `arrive` as one
/// lane when it is up, or as the error that fails the run. Under `gpu:all` the first in the
/// choice's order takes batches and the others wait in reserve: they open once the first
/// bounds the run (`route::another_device_pays`), so none contends with its start-up and none
/// starts where it would not raise the run's rate; one that cannot be opened is a warning and
/// a note in `--stats`. A list's devices all open at once, each with its cached calibration as
/// its speed (`listed_speed`).
fn lanes_as_they_come<T: Sample>(
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
    arrive: Arrival<'_, T>,
) {
    match device_set::resolve(&opts.choice) {
        Ok(specs) => {
            let numbered: Vec<_> = specs.into_iter().enumerate().collect();
            open_as_they_come(opts, lane_set, &numbered, arrive);
        }
        Err(e) => arrive(LateLanes::of(Err(e))),
    }
}

/// `lanes_as_they_come` for the devices of `specs`, each with its place in the choice's order.
fn open_as_they_come<T: Sample>(
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
    specs: &[(usize, LaneSpec)],
    arrive: Arrival<'_, T>,
) {
    let listed = specs.len() > 1 && !route::later_devices_in_reserve(&opts.choice);
    let open = |(i, spec): (usize, &LaneSpec)| {
        let in_reserve = route::waits_in_reserve(&opts.choice, i);
        if in_reserve && !lane_set.await_later_devices() {
            return;
        }
        let lane = open_engines::<T>(spec, opts).map(|gpus| {
            let mut lane = routed_lane(spec, gpus, lane_set);
            if in_reserve {
                lane.lane.keep_in_reserve();
            }
            if listed {
                lane.speed = listed_speed::<T>(spec, opts);
            }
            vec![lane]
        });
        match lane {
            Ok(lane) => arrive(LateLanes::of(Ok(lane))),
            // a device in reserve only adds rate to a run that already works: without it the
            // run goes on, as under `auto`, rather than fail by how busy the first one was
            Err(e) if in_reserve => {
                let what = format!("{} could not be opened ({e})", spec.label());
                tracing::warn!("{what}; the run goes on without it");
                lane_set.note_reserve_failure(what);
            }
            Err(e) => {
                let e = FftdError::Runtime(format!("{}: {e}", spec.label()));
                arrive(LateLanes::of(Err(e)));
            }
        }
    };
    std::thread::scope(|scope| {
        for (i, spec) in specs {
            scope.spawn(move || open((*i, spec)));
        }
    });
}

/// A listed device's speed from its cached calibration (`--device` lists never measure one
/// during a run), or `Even`: the dispatcher weighs the lanes by their calibrations only where
/// every lane has one (`route::rank`), as `build_lanes` does for lists opened before a run.
fn listed_speed<T: Sample>(spec: &LaneSpec, opts: &RouterOptions) -> LaneSpeed {
    match calibration_of::<T>(spec, opts) {
        Ok(cal) => LaneSpeed::Measured(cal, SpeedSide::OpenCl),
        Err(e) => {
            tracing::debug!(lane = %spec.label(), "no calibration ({e}); equal shares");
            LaneSpeed::Even
        }
    }
}

impl<T: Sample> LateLanes<T> {
    /// Lanes built, or the error that fails the run.
    fn of(built: Result<Vec<LaneEngines<T>>, FftdError>) -> Self {
        let (lanes, error) = match built {
            Ok(lanes) => (lanes, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        LateLanes {
            lanes,
            cpu_speed: None,
            error,
        }
    }
}

fn cpu_engines<T: Sample>(workers: usize) -> Engines<T> {
    (0..workers.max(1))
        .map(|_| Box::new(CpuEngine::<T>::new()) as Box<dyn Engine<T>>)
        .collect()
}

fn cpu_lane<T: Sample>(workers: usize) -> LaneEngines<T> {
    let workers = workers.max(1);
    LaneEngines {
        lane: Lane::new("cpu".into(), "CPU engine".into(), true, workers),
        engines: cpu_engines(workers),
        speed: LaneSpeed::Even,
    }
}

/// The lanes for `opts.choice` (the CPU lane for `cpu`, and for `auto` without a usable device
/// or calibration).
fn build_lanes<T: Sample>(
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
) -> Result<Vec<LaneEngines<T>>, FftdError> {
    let specs = device_set::resolve(&opts.choice)?;
    if opts.choice == DeviceChoice::Auto {
        // (only live input opens `auto`'s devices before the run: `route::plan`)
        let found = auto_live_lanes(&specs, opts, lane_set);
        let mut cpu = cpu_lane(opts.workers);
        if let Some(cal) = found.calibration {
            cpu.speed = LaneSpeed::cpu(cal, opts.workers);
        }
        reserve_later_devices(&opts.choice, &found.lanes);
        return Ok(std::iter::once(cpu).chain(found.lanes).collect());
    }
    let several = specs.len() > 1;
    let mut lanes = Vec::new();
    // per lane: its device's calibration (None for the CPU lane), when there are several
    let mut calibrations = Vec::new();
    let mut missing = false;
    for (spec, opened) in specs.iter().zip(open_all::<T>(&specs, opts, several)) {
        let Opened { gpus, calibration } =
            opened.map_err(|e| FftdError::Runtime(format!("{}: {e}", spec.label())))?;
        if gpus.is_empty() {
            lanes.push(cpu_lane(opts.workers));
            calibrations.push(None);
            continue;
        }
        let cal = match calibration {
            Some(Ok(c)) => Some(c),
            Some(Err(e)) => {
                tracing::debug!(lane = %spec.label(), "no calibration ({e}); equal shares");
                None
            }
            None => None,
        };
        missing |= several && cal.is_none();
        calibrations.push(cal);
        lanes.push(routed_lane(spec, gpus, lane_set));
    }
    // one device without a calibration: equal shares for all
    if several && !missing {
        measured_speeds(&mut lanes, &calibrations);
    }
    reserve_later_devices(&opts.choice, &lanes);
    Ok(lanes)
}

/// A device instance opened for a lane: its engines (none for the CPU) and, when asked for, its
/// calibration.
struct Opened<T: Sample> {
    gpus: Vec<OpenClEngine<T>>,
    calibration: Option<Result<Arc<Calibration>, String>>,
}

/// Opens every OpenCL device instance of `specs` at once, one thread each (a GPU context and
/// its engines take a good part of a second), with its calibration when `calibrate`.
fn open_all<T: Sample>(
    specs: &[LaneSpec],
    opts: &RouterOptions,
    calibrate: bool,
) -> Vec<Result<Opened<T>, String>> {
    let open = |spec: &LaneSpec| -> Result<Opened<T>, String> {
        if let LaneDevice::Cpu = spec.device {
            return Ok(Opened {
                gpus: Vec::new(),
                calibration: None,
            });
        }
        let gpus = open_engines::<T>(spec, opts)?;
        let calibration = calibrate.then(|| calibration_of::<T>(spec, opts));
        Ok(Opened { gpus, calibration })
    };
    std::thread::scope(|scope| {
        let opening: Vec<_> = specs
            .iter()
            .map(|spec| scope.spawn(move || open(spec)))
            .collect();
        opening
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("opening the device panicked".into()))
            })
            .collect()
    })
}

/// Speeds from the devices' calibrations; the CPU lane's from the first one's CPU timings.
fn measured_speeds<T: Sample>(
    lanes: &mut [LaneEngines<T>],
    calibrations: &[Option<Arc<Calibration>>],
) {
    let Some(reference) = calibrations.iter().flatten().next() else {
        return;
    };
    for (lane, cal) in lanes.iter_mut().zip(calibrations) {
        lane.speed = match cal {
            Some(cal) => LaneSpeed::Measured(cal.clone(), SpeedSide::OpenCl),
            None => LaneSpeed::cpu(reference.clone(), lane.engines.len()),
        };
    }
}

/// `spec`'s device's calibration (cached, or measured when `opts` allow), measured on an engine
/// of its own: its batches must not count towards the lane's engines' injected faults.
fn calibration_of<T: Sample>(
    spec: &LaneSpec,
    opts: &RouterOptions,
) -> Result<Arc<Calibration>, String> {
    let LaneDevice::OpenCl(entry) = spec.device else {
        return Err("not an OpenCL device".into());
    };
    let dev = SharedDevice::open_instance(entry, spec.instance)?;
    let options = OpenClOptions {
        fault: None,
        ..opts.opencl.clone()
    };
    let measure = || {
        let mut engine = OpenClEngine::<T>::on_device(dev, options)?;
        // one measurement at a time: devices measured at once would skew each other's CPU side
        // (and identical devices share one calibration: the second finds the first's in the cache)
        static MEASURING: Mutex<()> = Mutex::new(());
        let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
        calibrate::obtain(&mut engine, opts.calibrate_allowed, opts.recalibrate).map(Arc::new)
    };
    crate::setup_log::timed(What::Calibration, || entry.info.address(), (0, 0), measure)
}

/// `opts.engines_per_device()` OpenCL engines on `spec`'s device instance, with the fault injection aimed at it.
fn open_engines<T: Sample>(
    spec: &LaneSpec,
    opts: &RouterOptions,
) -> Result<Vec<OpenClEngine<T>>, String> {
    let LaneDevice::OpenCl(entry) = spec.device else {
        return Err("not an OpenCL device".into());
    };
    let dev = SharedDevice::open_instance(entry, spec.instance)?;
    let mut options = opts.opencl.clone();
    if let Some(fault) = FaultPlan::from_env().for_device(&spec.address(), spec.instance) {
        options.fault = Some(fault);
    }
    let workers = opts.engines_per_device();
    let make = || {
        (0..workers)
            .map(|_| OpenClEngine::<T>::on_device(dev.clone(), options.clone()))
            .collect()
    };
    let count = (workers as u64, 0);
    crate::setup_log::timed(What::Engines, || entry.info.address(), count, make)
}

fn routed_lane<T: Sample>(
    spec: &LaneSpec,
    gpus: Vec<OpenClEngine<T>>,
    lane_set: &Arc<LaneSet>,
) -> LaneEngines<T> {
    let lane = Lane::new(spec.label(), spec.name(), false, gpus.len());
    tracing::debug!(
        lane = %lane.label,
        device = %lane.name,
        precision = T::NAME,
        workers = gpus.len(),
        "OpenCL lane ready"
    );
    let engines = gpus
        .into_iter()
        .map(|g| {
            let routed = RoutedEngine::new(g, lane.clone(), lane_set.clone());
            Box::new(routed) as Box<dyn Engine<T>>
        })
        .collect();
    LaneEngines {
        lane,
        engines,
        speed: LaneSpeed::Even,
    }
}

/// The device lanes that wait in reserve under `choice` (`route::waits_in_reserve`) marked so.
fn reserve_later_devices<T: Sample>(choice: &DeviceChoice, lanes: &[LaneEngines<T>]) {
    let devices = lanes.iter().filter(|l| !l.lane.is_cpu).enumerate();
    for (nth, lane) in devices {
        if route::waits_in_reserve(choice, nth) {
            lane.lane.keep_in_reserve();
        }
    }
}

#[cfg(test)]
mod tests;
