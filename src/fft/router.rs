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
//!   to the measured rates (`lanes::LaneSpeed`).
//! - `auto`: a lane of CPU engines, and a lane for every device whose calibration finds it
//!   faster than the CPU for some size (GPU-type devices for file input); the dispatcher gives
//!   each batch to the lane predicted to finish it first (`lanes::LaneSpeed` from the
//!   calibration, or the rates `route_record` keeps). The CPU engine alone when there is no
//!   OpenCL. For file input, CPU engines start at once and the GPUs' lanes join when ready.
//!
//! Every OpenCL lane's engines are `routed::RoutedEngine`s (CPU fallback, failure hand-off).
//! Workers of one lane share a context and program cache (`opencl::device::SharedDevice`, one
//! per device instance); each worker has its own queues, kernels and buffers.

use super::calibrate::{self, Calibration};
use super::cpu::CpuEngine;
pub use super::device_choice::DeviceChoice;
use super::device_kinds;
use super::device_set::{self, LaneDevice, LaneSpec};
use super::fault::FaultPlan;
use super::lanes::{Lane, LaneSet, LaneSpeed, SpeedSide};
use super::opencl::device::SharedDevice;
use super::opencl::{OpenClEngine, OpenClOptions};
use super::route_record::{AutoRoute, JobKey, RouteRecord};
use super::routed::RoutedEngine;
use super::Engine;
use crate::error::FftdError;
use crate::setup_log::What;
use crate::types::Sample;
use std::sync::{Arc, Mutex};

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

/// Builds `LateLanes` (device start-up, calibration) when called.
pub(crate) type DeferredLanes<T> = Box<dyn FnOnce() -> LateLanes<T> + Send>;

/// The pipeline's engines: the lanes ready now, and lanes still to be built.
pub(crate) struct EngineSet<T: Sample> {
    /// Where the lanes report failures; a lane joins it when it starts taking batches.
    pub lane_set: Arc<LaneSet>,
    pub ready: Vec<LaneEngines<T>>,
    pub later: Option<DeferredLanes<T>>,
    /// The way `auto` runs this file job (its rate is recorded at the end, `route_record`).
    pub auto_route: Option<AutoRoute>,
    /// Whether the CPU lane retires once the later lanes join (it only bridged their start-up:
    /// `auto`'s GPU-alone way, and a device named outright).
    pub retire_cpu: bool,
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

/// The engines for a run. `auto` on file input takes the CPU engines at once and builds the
/// GPUs' lanes (device start-up, calibration) in the background; they join when ready, so a
/// short job never waits for a device and a long one gets them all. Whether the GPUs join at all
/// follows the end-to-end rates of earlier runs (`route_record`). Only GPU-type devices join:
/// an OpenCL device on the CPU would share the CPU engines' cores. Live input keeps the start-up
/// before capture.
pub(crate) fn build_engine_set<T: Sample>(
    choice: &DeviceChoice,
    (workers, device_workers): (usize, Option<usize>),
    live: bool,
    job: Option<&JobKey>,
) -> Result<EngineSet<T>, FftdError> {
    let lane_set = LaneSet::new(true);
    if *choice != DeviceChoice::Auto || live {
        let mut opts = RouterOptions::new(choice.clone(), workers);
        opts.device_workers = device_workers;
        // several devices named outright share by cached calibrations, or equally (their
        // backlogs adapt): a first run on a machine never waits for a calibration (issue 41)
        opts.calibrate_allowed = *choice == DeviceChoice::Auto;
        if starts_in_background(choice, live) {
            return Ok(background_start(opts, lane_set, workers));
        }
        let ready = build_lanes(&opts, &lane_set)?;
        if choice.names_a_device() && !live {
            device_kinds::remember(choice);
        }
        return Ok(EngineSet {
            ready,
            lane_set,
            later: None,
            auto_route: None,
            retire_cpu: false,
        });
    }
    // (`auto` on file input always comes with its job's shape)
    // (a job that cannot teach `auto`, or with nowhere to keep records, runs the CPU engines)
    let learning = job.filter(|_| RouteRecord::kept() && device_kinds::auto_may_find_gpus());
    let route = learning.map_or(AutoRoute::CpuOnly, |job| RouteRecord::load(job).choose());
    let ready = vec![cpu_lane(workers)];
    if route == AutoRoute::CpuOnly {
        return Ok(EngineSet {
            lane_set,
            ready,
            later: None,
            auto_route: Some(route),
            retire_cpu: false,
        });
    }
    let mut opts = RouterOptions::new(DeviceChoice::Auto, workers);
    opts.device_workers = device_workers;
    // no first-use calibration here: measured while the CPU engines load every core it would be
    // skewed (and cached); without one the GPUs do not join (`fftd bench --calibrate` makes one)
    opts.calibrate_allowed = false;
    let late_lanes = lane_set.clone();
    // both lanes: batches shared by the rates each way delivered alone (`route_record`)
    let shares = (route == AutoRoute::WithGpu)
        .then(|| job.map(|job| RouteRecord::load(job).shares()))
        .flatten()
        .flatten();
    Ok(EngineSet {
        lane_set,
        ready,
        later: Some(Box::new(move || {
            let mut late = auto_gpu_lanes(&opts, &late_lanes);
            if let Some((cpu, gpu)) = shares.filter(|_| !late.lanes.is_empty()) {
                late.cpu_speed = Some(LaneSpeed::Rate(cpu));
                let per_lane = gpu / late.lanes.len() as f64;
                late.lanes
                    .iter_mut()
                    .for_each(|l| l.speed = LaneSpeed::Rate(per_lane));
            }
            late
        })),
        auto_route: Some(route),
        retire_cpu: route == AutoRoute::GpuOnly,
    })
}

/// Whether a device named outright starts in the background (issue 23: start-up off the
/// critical path): for any non-live input, unless fault injection is on (`FFTD_FAULT_AFTER_BATCHES`
/// counts a device's batches from the first, which the CPU lane would otherwise take).
/// Only a choice an earlier run found to be GPU-type devices alone (`device_kinds`): an
/// OpenCL device on the CPU (PoCL) shares the cores the CPU engines would bridge with, and it
/// is opened first, as before.
fn starts_in_background(choice: &DeviceChoice, live: bool) -> bool {
    !live
        && choice.names_a_device()
        && FaultPlan::from_env() == FaultPlan::default()
        && device_kinds::names_gpus_alone(choice)
}

/// The CPU engines at once, the named devices' lanes (context, programs, engines) built on a
/// thread of their own; they join when ready and the CPU lane retires then. A device that cannot
/// be opened fails the run (`LateLanes::error`), as it does when opened first.
fn background_start<T: Sample>(
    opts: RouterOptions,
    lane_set: Arc<LaneSet>,
    workers: usize,
) -> EngineSet<T> {
    let late_lanes = lane_set.clone();
    let build = move || match build_lanes::<T>(&opts, &late_lanes) {
        Ok(lanes) => LateLanes {
            lanes,
            cpu_speed: None,
            error: None,
        },
        Err(e) => LateLanes {
            lanes: Vec::new(),
            cpu_speed: None,
            error: Some(e),
        },
    };
    EngineSet {
        lane_set,
        ready: vec![cpu_lane(workers)],
        later: Some(Box::new(build)),
        auto_route: None,
        retire_cpu: true,
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
        let found = auto_lanes(&specs, opts, lane_set);
        let mut cpu = cpu_lane(opts.workers);
        if let Some(cal) = found.calibration {
            cpu.speed = LaneSpeed::cpu(cal, opts.workers);
        }
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

/// What `auto` found among its devices (`auto_lanes`).
struct AutoFound<'s, T: Sample> {
    /// A lane per device whose calibration predicts it faster than the CPU engine for some
    /// measured size, its speed from that calibration.
    lanes: Vec<LaneEngines<T>>,
    /// The first of their calibrations, for the speed of a CPU lane beside them.
    calibration: Option<Arc<Calibration>>,
    /// The devices opened but not in `lanes` (no calibration, or never faster by it): file jobs
    /// whose records say the GPU helps take them (`auto_gpu_lanes`).
    others: Vec<(&'s LaneSpec, Vec<OpenClEngine<T>>)>,
}

/// `auto`'s lanes among `specs`, each device's calibration cached or measured when allowed.
fn auto_lanes<'s, T: Sample>(
    specs: &'s [LaneSpec],
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
) -> AutoFound<'s, T> {
    let mut found = AutoFound {
        lanes: Vec::new(),
        calibration: None,
        others: Vec::new(),
    };
    for (spec, opened) in specs.iter().zip(open_all::<T>(specs, opts, true)) {
        let Opened { gpus, calibration } = match opened {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(
                    "OpenCL device {} unusable ({e}); using the CPU engine",
                    spec.name()
                );
                continue;
            }
        };
        let cal = match calibration {
            Some(Ok(c)) => c,
            other => {
                tracing::debug!(
                    "no calibration for {} ({:?})",
                    spec.name(),
                    other.and_then(Result::err)
                );
                found.others.push((spec, gpus));
                continue;
            }
        };
        if !cal.points.iter().any(|p| p.gpu_s < p.cpu_s) {
            tracing::debug!(
                "{}: its calibration finds the CPU engine faster at every size",
                spec.name()
            );
            found.others.push((spec, gpus));
            continue;
        }
        found.calibration.get_or_insert_with(|| cal.clone());
        let mut lane = routed_lane(spec, gpus, lane_set);
        lane.speed = LaneSpeed::Measured(cal, SpeedSide::OpenCl);
        found.lanes.push(lane);
    }
    found
}

/// `auto`'s GPU lanes for file input (built while the CPU engines already run): GPU-type devices
/// only, with a cached calibration.
fn auto_gpu_lanes<T: Sample>(opts: &RouterOptions, lane_set: &Arc<LaneSet>) -> LateLanes<T> {
    // (what was found is remembered only when the devices could be listed)
    let listed = device_set::resolve(&DeviceChoice::Auto);
    let specs: Vec<LaneSpec> = (listed.iter().flatten())
        .filter(|s| matches!(s.device, LaneDevice::OpenCl(e) if e.info.is_gpu))
        .cloned()
        .collect();
    if listed.is_ok() {
        device_kinds::remember_auto(!specs.is_empty());
    }
    let AutoFound {
        mut lanes,
        calibration: cal,
        others,
    } = auto_lanes(&specs, opts, lane_set);
    if lanes.is_empty() {
        // a file job whose record says the GPU helps (`route_record`) takes the other GPUs too:
        // the lanes' queues share the work by how fast they drain
        lanes = others
            .into_iter()
            .map(|(spec, gpus)| routed_lane(spec, gpus, lane_set))
            .collect();
    }
    if lanes.is_empty() {
        tracing::debug!("auto: no GPU lane joins; the CPU engines do the work");
    }
    LateLanes {
        lanes,
        error: None,
        cpu_speed: cal.map(|c| LaneSpeed::cpu(c, opts.workers)),
    }
}
