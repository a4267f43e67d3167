//! Chooses the engine for each batch. `build_engines` (or `build_engines_with`) is the one place
//! the pipeline asks for per-worker engines:
//!
//! - `cpu`: the CPU engine.
//! - `gpu`: the OpenCL engine on the best device (a GPU-type device if any, else any OpenCL
//!   device); no usable device is an error.
//! - `opencl:P:D`: the OpenCL engine on that device; a missing device is an error.
//! - `auto`: per batch, the engine a calibration (see `calibrate`) predicts faster for that frame
//!   size and batch length; the CPU engine alone when there is no OpenCL. For file input
//!   (`build_engine_set`), CPU engines start at once and a GPU's engines join when ready.
//!
//! Every OpenCL-backed engine keeps a CPU engine inside: a batch the device does not support
//! (size not a power of two, f64 without fp64) goes to the CPU with one info line; a device
//! failure (build error, out of memory, fault mid-stream) sends that batch and every later one of
//! every worker to the CPU with one warning. The failed batch is recomputed whole on the CPU, so
//! no frame is lost, duplicated or reordered.
//!
//! Workers share one context and program cache per device (`opencl::device::SharedDevice`); each
//! worker has its own queue, kernels and buffers.

use super::calibrate::{self, Calibration};
use super::cpu::CpuEngine;
use super::opencl::device::{self, DeviceEntry};
use super::opencl::{OpenClEngine, OpenClOptions};
use super::route_record::{AutoRoute, RouteRecord};
use super::{Engine, EngineError, Sample, TransformSpec};
use crate::error::FftdError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// `--device auto|cpu|gpu|opencl:P:D`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Gpu,
    OpenCl { platform: usize, device: usize },
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "gpu" => Ok(DeviceChoice::Gpu),
            _ => {
                let parts: Vec<&str> = s.split(':').collect();
                match parts.as_slice() {
                    ["opencl", p, d] => match (p.parse(), d.parse()) {
                        (Ok(platform), Ok(device)) => Ok(DeviceChoice::OpenCl { platform, device }),
                        _ => Err(format!("invalid device '{s}': expected opencl:PLATFORM:DEVICE with two indices")),
                    },
                    _ => Err(format!(
                        "invalid device '{s}': expected auto, cpu, gpu or opencl:PLATFORM:DEVICE"
                    )),
                }
            }
        }
    }
}

/// Everything `build_engines_with` needs.
#[derive(Clone, Debug)]
pub struct RouterOptions {
    pub choice: DeviceChoice,
    /// FFT worker threads: one engine each.
    pub workers: usize,
    /// `auto` may measure a calibration when none is cached (a few seconds on first use).
    /// When false and none is cached, `auto` uses the CPU engine.
    pub calibrate_allowed: bool,
    /// `auto` measures a new calibration even when one is cached (`fftd bench --calibrate`).
    pub recalibrate: bool,
    pub opencl: OpenClOptions,
}

impl RouterOptions {
    /// Defaults: calibration allowed, OpenCL options from the environment.
    pub fn new(choice: DeviceChoice, workers: usize) -> Self {
        RouterOptions {
            choice,
            workers,
            calibrate_allowed: true,
            recalibrate: false,
            opencl: OpenClOptions::from_env(),
        }
    }
}

/// One engine per FFT worker thread, with default `RouterOptions`.
pub fn build_engines<T: Sample>(
    choice: &DeviceChoice,
    workers: usize,
) -> Result<Vec<Box<dyn Engine<T>>>, FftdError> {
    build_engines_with(&RouterOptions::new(choice.clone(), workers))
}

fn cpu_engines<T: Sample>(workers: usize) -> Vec<Box<dyn Engine<T>>> {
    (0..workers.max(1))
        .map(|_| Box::new(CpuEngine::<T>::new()) as Box<dyn Engine<T>>)
        .collect()
}

/// One engine per FFT worker.
pub type Engines<T> = Vec<Box<dyn Engine<T>>>;

/// OpenCL engines built on a thread of their own, to join the FFT workers when ready.
pub type DeferredEngines<T> = Box<dyn FnOnce() -> Engines<T> + Send>;

/// The pipeline's engines: those ready now, and OpenCL engines still to be built.
pub struct EngineSet<T: Sample> {
    pub ready: Vec<Box<dyn Engine<T>>>,
    pub later: Option<DeferredEngines<T>>,
    /// The way `auto` runs this file job (its rate is recorded at the end, `route_record`).
    pub auto_route: Option<AutoRoute>,
}

/// The engines for a run. `auto` on file input takes the CPU engines at once and builds the
/// OpenCL engines (device start-up, calibration) in the background; they join the same work
/// queue when ready, so a short job never waits for the device and a long one gets both, each
/// worker taking the next batch when free (the end-to-end rate, not only the kernel rate,
/// decides how much each does). Whether the GPU joins at all follows the end-to-end rates of
/// earlier runs (`route_record`). Only a GPU-type device joins: an OpenCL device on the CPU would
/// share the CPU engines' cores. Live input keeps the start-up before capture (`build_engines`).
pub fn build_engine_set<T: Sample>(
    choice: &DeviceChoice,
    workers: usize,
    live: bool,
) -> Result<EngineSet<T>, FftdError> {
    if *choice != DeviceChoice::Auto || live {
        return Ok(EngineSet {
            ready: build_engines(choice, workers)?,
            later: None,
            auto_route: None,
        });
    }
    let route = RouteRecord::load().choose();
    if route == AutoRoute::CpuOnly {
        return Ok(EngineSet {
            ready: cpu_engines(workers),
            later: None,
            auto_route: Some(route),
        });
    }
    let mut opts = RouterOptions::new(DeviceChoice::Auto, workers);
    // no first-use calibration here: measured while the CPU engines load every core it would be
    // skewed (and cached); without one the GPU does not join (`fftd bench --calibrate` makes one)
    opts.calibrate_allowed = false;
    Ok(EngineSet {
        auto_route: Some(route),
        ready: cpu_engines(workers),
        later: Some(Box::new(move || {
            // an OpenCL device on the CPU (PoCL) would only share the cores of the CPU engines
            if !device::best_device().is_ok_and(|d| d.info.is_gpu) {
                return Vec::new();
            }
            match opencl_engines::<T>(&opts) {
                Ok(Some(engines)) => engines,
                Ok(None) => Vec::new(),
                Err(e) => {
                    tracing::debug!("auto: no OpenCL engines ({e}); the CPU engines do the work");
                    Vec::new()
                }
            }
        })),
    })
}

/// One engine per FFT worker thread for `opts.choice`.
pub fn build_engines_with<T: Sample>(
    opts: &RouterOptions,
) -> Result<Vec<Box<dyn Engine<T>>>, FftdError> {
    Ok(match opencl_engines(opts)? {
        Some(engines) => engines,
        None => cpu_engines(opts.workers.max(1)),
    })
}

/// The OpenCL-backed engines for `opts.choice`; None where the CPU engine is to be used instead
/// (`cpu`, and `auto` without a usable device or calibration).
fn opencl_engines<T: Sample>(opts: &RouterOptions) -> Result<Option<Engines<T>>, FftdError> {
    let workers = opts.workers.max(1);
    let entry: &DeviceEntry = match &opts.choice {
        DeviceChoice::Cpu => return Ok(None),
        DeviceChoice::Auto => match device::best_device() {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!("no OpenCL device ({e}); using the CPU engine");
                return Ok(None);
            }
        },
        DeviceChoice::Gpu => device::best_device().map_err(|e| {
            FftdError::Runtime(format!("--device gpu: no usable OpenCL device: {e}"))
        })?,
        DeviceChoice::OpenCl { platform, device } => device::device_at(*platform, *device)
            .map_err(|e| FftdError::Runtime(format!("--device opencl:{platform}:{device}: {e}")))?,
    };
    let auto = opts.choice == DeviceChoice::Auto;
    let mut gpus = Vec::with_capacity(workers);
    for _ in 0..workers {
        match OpenClEngine::<T>::new(entry, opts.opencl.clone()) {
            Ok(g) => gpus.push(g),
            Err(e) if auto => {
                tracing::warn!(
                    "OpenCL device {} unusable ({e}); using the CPU engine",
                    entry.info.name
                );
                return Ok(None);
            }
            Err(e) => return Err(FftdError::Runtime(format!("{}: {e}", entry.info.address()))),
        }
    }
    let policy = if auto {
        let Some(first) = gpus.first_mut() else {
            return Ok(None);
        };
        match calibrate::obtain(first, opts.calibrate_allowed, opts.recalibrate) {
            Ok(c) => Policy::Calibrated(Arc::new(c)),
            Err(e) => {
                tracing::debug!(
                    "no calibration for {} ({e}); auto uses the CPU engine",
                    entry.info.name
                );
                return Ok(None);
            }
        }
    } else {
        Policy::Always
    };
    tracing::debug!(
        device = %entry.info.name,
        address = %entry.info.address(),
        precision = T::NAME,
        workers,
        auto,
        "OpenCL engine ready"
    );
    let failed = Arc::new(AtomicBool::new(false));
    Ok(Some(
        gpus.into_iter()
            .map(|g| {
                Box::new(RoutedEngine {
                    cpu: CpuEngine::new(),
                    gpu: Some(g),
                    policy: policy.clone(),
                    failed: failed.clone(),
                    decided: HashSet::new(),
                }) as Box<dyn Engine<T>>
            })
            .collect(),
    ))
}

/// How a routed engine picks between its OpenCL and CPU engines.
#[derive(Clone)]
enum Policy {
    /// Every supported batch on OpenCL (`gpu`, `opencl:P:D`).
    Always,
    /// The engine the calibration predicts faster (`auto`).
    Calibrated(Arc<Calibration>),
}

/// An OpenCL engine with the CPU engine as fallback, for one worker.
pub struct RoutedEngine<T: Sample> {
    cpu: CpuEngine<T>,
    gpu: Option<OpenClEngine<T>>,
    policy: Policy,
    /// Shared by the workers of one `build_engines` call: set by the first device failure.
    failed: Arc<AtomicBool>,
    /// (n, log2 frames) pairs whose routing decision has been logged.
    decided: HashSet<(usize, u32)>,
}

/// Logs `msg` at info level once per process per key (e.g. one line per unsupported size).
pub(crate) fn info_once(key: String, msg: &str) {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(HashSet::new()));
    if let Ok(mut s) = seen.lock() {
        if s.insert(key) {
            tracing::info!("{msg}");
        }
    }
}

impl<T: Sample> RoutedEngine<T> {
    fn use_gpu(&mut self, spec: &TransformSpec, frames: usize) -> bool {
        if self.failed.load(Ordering::Relaxed) {
            self.gpu = None;
        }
        let Some(gpu) = &self.gpu else {
            return false;
        };
        if let Err(e) = gpu.supports(spec) {
            info_once(
                format!("unsupported {} {} {:?}", spec.n, T::NAME, spec.kind),
                &format!("{e}; these frames go to the CPU engine"),
            );
            return false;
        }
        match &self.policy {
            Policy::Always => true,
            Policy::Calibrated(cal) => {
                let (c, g) = cal.predict(spec.n, frames);
                let bucket = usize::BITS - frames.leading_zeros();
                if self.decided.insert((spec.n, bucket)) {
                    tracing::debug!(
                        n = spec.n,
                        frames,
                        cpu_ms = c * 1e3,
                        opencl_ms = g * 1e3,
                        "auto routes to {}",
                        if g < c { "opencl" } else { "cpu" }
                    );
                }
                g < c
            }
        }
    }
}

impl<T: Sample> RoutedEngine<T> {
    /// Runs `call` on the OpenCL engine when the policy says so, else (or when it cannot take
    /// the batch) on the CPU engine; a device fault sends this batch and every later one to the
    /// CPU, with one warning.
    fn route(
        &mut self,
        spec: &TransformSpec,
        frames: usize,
        call: &mut dyn FnMut(&mut dyn Engine<T>) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        if self.use_gpu(spec, frames) {
            if let Some(gpu) = self.gpu.as_mut() {
                match call(gpu) {
                    Ok(()) => return Ok(()),
                    Err(EngineError::Unsupported { what, .. }) => info_once(
                        format!("unsupported {what}"),
                        &format!(
                            "OpenCL engine: unsupported {what}; these frames go to the CPU engine"
                        ),
                    ),
                    Err(e) => {
                        if !self.failed.swap(true, Ordering::Relaxed) {
                            tracing::warn!(
                                "{e}; this batch and all later ones run on the CPU engine"
                            );
                        }
                        self.gpu = None;
                    }
                }
            }
        }
        call(&mut self.cpu)
    }
}

impl<T: Sample> Engine<T> for RoutedEngine<T> {
    fn name(&self) -> String {
        match &self.gpu {
            Some(g) => format!("{}+cpu", g.name()),
            None => "cpu".into(),
        }
    }

    fn transform(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.route(spec, frames, &mut |e| e.transform(spec, input, frames, out))
    }

    fn transform_bands(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: &super::BandWeights,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.route(spec, frames, &mut |e| {
            e.transform_bands(spec, input, frames, bands, out)
        })
    }

    fn transform_segments(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: Option<&super::BandWeights>,
        segments: &super::Segments<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.route(spec, frames, &mut |e| {
            e.transform_segments(spec, input, frames, bands, segments, out)
        })
    }

    fn pinned_memory(&self) -> Option<super::PinnedMemory<T>> {
        self.gpu.as_ref().and_then(|g| g.pinned_memory())
    }
}
