//! Calibration for `--device auto`: on this machine, time the CPU engine and the OpenCL engine
//! (copies included) per batch over a grid of frame sizes and batch lengths, and predict from it
//! which engine is faster for any (n, frames). Measured on first use per (device, driver, fftd
//! version, precision), cached as JSON under `$FFTD_CACHE_DIR` or `dirs::cache_dir()/fftd`, and
//! refreshed by `fftd bench --calibrate`. Non-GPU OpenCL devices (PoCL in CI) get a small grid so
//! the first run stays around a second.

use super::cpu::CpuEngine;
use super::opencl::device::DeviceInfo;
use super::opencl::OpenClEngine;
use super::{Engine, HostBuf, Scale, TransformSpec};
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// What a calibration is valid for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalibrationKey {
    pub device: String,
    pub platform: String,
    pub driver: String,
    pub fftd_version: String,
    pub precision: String,
}

impl CalibrationKey {
    pub fn new<T: Sample>(info: &DeviceInfo) -> Self {
        CalibrationKey {
            device: info.name.clone(),
            platform: info.platform_name.clone(),
            driver: info.driver.clone(),
            // a debug build's CPU engine is far slower: never share its calibration;
            // "cal3": calibration format/method version (older files are ignored); cal3 times
            // batches in the device's pinned memory, as the pipeline runs them
            fftd_version: format!(
                "{}-cal3{}",
                env!("CARGO_PKG_VERSION"),
                if cfg!(debug_assertions) { "-debug" } else { "" }
            ),
            precision: T::NAME.to_string(),
        }
    }

    /// The cache file for this key: `<cache dir>/calibration-<hash>.json`.
    pub fn path(&self) -> Option<PathBuf> {
        let text = format!(
            "{}|{}|{}|{}|{}",
            self.device, self.platform, self.driver, self.fftd_version, self.precision
        );
        let hash = crate::types::fingerprint(&text);
        Some(cache_dir()?.join(format!("calibration-{hash}.json")))
    }
}

/// fftd's cache folder: `$FFTD_CACHE_DIR`, else `dirs::cache_dir()/fftd`.
pub fn cache_dir() -> Option<PathBuf> {
    crate::knobs::cache_dir().or_else(|| dirs::cache_dir().map(|d| d.join("fftd")))
}

/// A cache file's JSON value, or the default when there is none, no cache folder, or it cannot
/// be read.
pub(crate) fn load_cached<T: serde::de::DeserializeOwned + Default>(path: Option<PathBuf>) -> T {
    path.and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Writes `value` to a cache file as JSON (`save_atomically`). Best effort: a cache that cannot
/// be written (none, read-only) only means no memory; the failure is logged at debug level.
pub(crate) fn save_cached<T: Serialize>(path: Option<PathBuf>, value: &T) {
    let (Some(path), Ok(text)) = (path, serde_json::to_string(value)) else {
        return;
    };
    if let Err(e) = save_atomically(&path, &text) {
        tracing::debug!("cannot save {e}");
    }
}

/// Writes a cache file whole or not at all (a temporary file renamed over it), making its
/// folder; the error names the file.
pub(crate) fn save_atomically(path: &std::path::Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: {e}", crate::types::shown_path(dir)))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", crate::types::shown_path(&tmp)))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", crate::types::shown_path(path)))
}

/// One measured grid point: seconds per batch of `frames` frames of size `n`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalPoint {
    pub n: usize,
    pub frames: usize,
    pub cpu_s: f64,
    /// OpenCL engine, host to host (write, kernels, read).
    pub gpu_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub key: CalibrationKey,
    pub points: Vec<CalPoint>,
}

/// Predicted seconds for a batch from points at one size: a fixed cost plus a cost per frame,
/// through the smallest and largest batch measured.
fn linear(points: &[&CalPoint], pick: fn(&CalPoint) -> f64, frames: usize) -> f64 {
    let (Some(a), Some(b)) = (
        points.iter().min_by_key(|p| p.frames),
        points.iter().max_by_key(|p| p.frames),
    ) else {
        return f64::INFINITY;
    };
    if a.frames == b.frames {
        return pick(a) / a.frames as f64 * frames as f64;
    }
    let per = ((pick(b) - pick(a)) / (b.frames - a.frames) as f64).max(0.0);
    let fixed = (pick(a) - per * a.frames as f64).max(0.0);
    fixed + per * frames as f64
}

#[cfg(test)]
impl Calibration {
    /// For tests: a calibration of the points (n, CPU seconds, device seconds), one frame each.
    pub(crate) fn of_points(points: &[(usize, f64, f64)]) -> std::sync::Arc<Calibration> {
        let key = CalibrationKey {
            device: "dev".into(),
            platform: "p".into(),
            driver: "d".into(),
            fftd_version: "v".into(),
            precision: "f32".into(),
        };
        let points = (points.iter())
            .map(|&(n, cpu_s, gpu_s)| CalPoint {
                n,
                frames: 1,
                cpu_s,
                gpu_s,
            })
            .collect();
        std::sync::Arc::new(Calibration { key, points })
    }
}

impl Calibration {
    /// Predicted (cpu, opencl) seconds for a batch of `frames` frames of size `n`, from the
    /// measured size nearest to n on a log scale.
    pub(crate) fn predict(&self, n: usize, frames: usize) -> (f64, f64) {
        let l = (n.max(1) as f64).log2();
        let Some(nearest) = self.points.iter().map(|p| p.n).min_by(|a, b| {
            let da = ((*a as f64).log2() - l).abs();
            let db = ((*b as f64).log2() - l).abs();
            da.total_cmp(&db)
        }) else {
            return (0.0, f64::INFINITY);
        };
        let at: Vec<&CalPoint> = self.points.iter().filter(|p| p.n == nearest).collect();
        // scale by the work ratio n log n when n is between grid points
        let work = |x: usize| (x as f64) * (x as f64).log2().max(1.0);
        let s = work(n) / work(nearest);
        (
            linear(&at, |p| p.cpu_s, frames) * s,
            linear(&at, |p| p.gpu_s, frames) * s,
        )
    }

    /// The cached calibration for `key`, if there is one for exactly that key.
    pub fn load(key: &CalibrationKey) -> Option<Calibration> {
        let text = std::fs::read_to_string(key.path()?).ok()?;
        let cal: Calibration = serde_json::from_str(&text).ok()?;
        (cal.key == *key && !cal.points.is_empty()).then_some(cal)
    }

    /// Writes the calibration to its cache file (best effort: a read-only cache dir only costs
    /// a new calibration next time).
    pub(crate) fn save(&self) -> Result<PathBuf, String> {
        let path = self
            .key
            .path()
            .ok_or_else(|| "no cache directory (set FFTD_CACHE_DIR)".to_string())?;
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        save_atomically(&path, &text)?;
        Ok(path)
    }
}

/// The grid: (sizes, largest batch in samples). Small for non-GPU devices.
fn grid(is_gpu: bool) -> (Vec<usize>, usize) {
    if is_gpu {
        ((2..=10).map(|k| 1usize << (2 * k)).collect(), 1 << 22)
    } else {
        (vec![1 << 6, 1 << 10, 1 << 14], 1 << 16)
    }
}

fn time_batch<T: Sample>(
    engine: &mut dyn Engine<T>,
    spec: &TransformSpec,
    input: &[T],
    frames: usize,
    out: &mut HostBuf<T>,
    reps: usize,
) -> Result<f64, String> {
    out.set_len_for_overwrite(frames * spec.values_out());
    let input = &input[..frames * spec.values_per_frame()];
    engine
        .transform(spec, input, frames, out)
        .map_err(|e| e.to_string())?;
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            engine
                .transform(spec, input, frames, out)
                .map(|_| s.elapsed().as_secs_f64())
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// Measures a new calibration for the device of `gpu` (real input, Hann, magnitude).
pub fn measure<T: Sample>(gpu: &mut OpenClEngine<T>) -> Result<Calibration, String> {
    let started = Instant::now();
    let info = gpu.device().clone();
    let (sizes, max_samples) = grid(info.is_gpu);
    let mut cpu = CpuEngine::<T>::new();
    // batches in the device's pinned memory, as the pipeline packs them (`pipeline::pool`)
    let pinned = gpu.pinned_memory();
    let mut points = Vec::new();
    for n in sizes {
        let spec = TransformSpec {
            n,
            kind: InputKind::Real,
            window: WindowKind::Hann,
            scale: Scale::Magnitude,
            rate: 48_000.0,
        };
        let big = (max_samples / n).clamp(1, 1024);
        let mut input = HostBuf::with_capacity(big * n, pinned.as_ref());
        let values: Vec<T> = (0..big * n)
            .map(|i| T::of_f64(((i * 7919) % 1000) as f64 / 500.0 - 1.0))
            .collect();
        input.extend_from_slice(&values);
        let mut out = HostBuf::with_capacity(big * spec.values_out(), pinned.as_ref());
        for frames in [1, big] {
            let reps = if frames == 1 { 5 } else { 3 };
            let cpu_s = time_batch(&mut cpu, &spec, &input, frames, &mut out, reps)?;
            let gpu_s = time_batch(gpu, &spec, &input, frames, &mut out, reps)?;
            points.push(CalPoint {
                n,
                frames,
                cpu_s,
                gpu_s,
            });
            if frames == big {
                break;
            }
        }
    }
    tracing::debug!(
        device = %info.name,
        precision = T::NAME,
        seconds = started.elapsed().as_secs_f64(),
        "calibrated CPU vs OpenCL"
    );
    Ok(Calibration {
        key: CalibrationKey::new::<T>(&info),
        points,
    })
}

/// The calibration for `gpu`'s device: from the cache, or measured now (and cached) when
/// `allow_measure` is true. `refresh` measures even when a cached one exists.
pub(crate) fn obtain<T: Sample>(
    gpu: &mut OpenClEngine<T>,
    allow_measure: bool,
    refresh: bool,
) -> Result<Calibration, String> {
    let key = CalibrationKey::new::<T>(gpu.device());
    if !refresh {
        if let Some(c) = Calibration::load(&key) {
            tracing::debug!(device = %key.device, "using cached calibration");
            return Ok(c);
        }
    }
    if !allow_measure {
        return Err("no cached calibration and measuring is not allowed".into());
    }
    let cal = measure(gpu)?;
    match cal.save() {
        Ok(p) => tracing::debug!(path = %crate::types::shown_path(&p), "saved calibration"),
        Err(e) => tracing::warn!("cannot cache the calibration: {e}"),
    }
    Ok(cal)
}
