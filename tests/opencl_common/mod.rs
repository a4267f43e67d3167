//! Shared helpers of the OpenCL test binaries: PoCL cache and fftd cache under `target/`, the
//! "fail, don't skip, unless FFTD_SKIP_OPENCL_TESTS=1" rule, deterministic test signals and the
//! comparison against the CPU engine.
#![allow(dead_code)]

use fftd::fft::cpu::CpuEngine;
use fftd::fft::opencl::device::{self, DeviceEntry};
use fftd::fft::opencl::{OpenClEngine, OpenClOptions};
use fftd::fft::{naive_spectrum, Engine, Scale, TransformSpec};
use fftd::types::{InputKind, Sample};
use fftd::window::WindowKind;
use std::sync::Once;

static ENV: Once = Once::new();

/// Sets POCL_CACHE_DIR and FFTD_CACHE_DIR under target/ before the first OpenCL call.
pub fn setup_env() {
    ENV.call_once(|| {
        let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::env::set_var("POCL_CACHE_DIR", target.join("pocl-cache"));
        std::env::set_var("FFTD_CACHE_DIR", target.join("fftd-test-cache"));
    });
}

/// The device the tests run on (`--device gpu`'s choice), or None when the tests may skip.
/// Panics when there is no OpenCL device and FFTD_SKIP_OPENCL_TESTS is not 1.
pub fn test_device() -> Option<&'static DeviceEntry> {
    setup_env();
    match device::best_device() {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("FFTD_SKIP_OPENCL_TESTS").as_deref() == Ok("1") {
                eprintln!("skipping OpenCL test: {e} (FFTD_SKIP_OPENCL_TESTS=1)");
                None
            } else {
                panic!(
                    "no OpenCL device ({e}); install PoCL (pocl-opencl-icd) or set FFTD_SKIP_OPENCL_TESTS=1"
                );
            }
        }
    }
}

/// A reproducible test signal: xorshift noise plus two tones, `values` values long.
pub fn signal<T: Sample>(values: usize, seed: u64) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..values)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let noise = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let t = i as f64;
            T::of_f64(0.5 * noise + (t * 0.37).sin() + 0.25 * (t * 2.1 + 0.3).cos())
        })
        .collect()
}

/// Largest error of `got` against `want` for output rows of `s` (`s.values_out()` values per
/// frame), relative to that frame's largest bin magnitude: dB rows compared as magnitudes,
/// complex rows (re, im pairs) value by value against the frame's largest |X|.
pub fn spec_rel_error(got: &[f64], want: &[f64], s: &TransformSpec) -> f64 {
    if s.scale != Scale::Complex {
        return max_rel_error(got, want, s.values_out(), s.scale == Scale::Db);
    }
    assert_eq!(got.len(), want.len(), "output lengths differ");
    let mut worst = 0.0f64;
    for (g, w) in got.chunks(s.values_out()).zip(want.chunks(s.values_out())) {
        let peak = w
            .chunks_exact(2)
            .map(|z| z[0].hypot(z[1]))
            .fold(0.0, f64::max)
            .max(1e-300);
        for (a, b) in g.iter().zip(w) {
            let e = (a - b).abs() / peak;
            assert!(e.is_finite(), "non-finite output");
            worst = worst.max(e);
        }
    }
    worst
}

/// Largest error of `got` against `want`, per frame of `bins` values, relative to that frame's
/// largest |value| (in the linear domain; dB rows are converted back to magnitudes first).
pub fn max_rel_error(got: &[f64], want: &[f64], bins: usize, db: bool) -> f64 {
    assert_eq!(got.len(), want.len(), "output lengths differ");
    let lin = |v: f64| if db { 10f64.powf(v / 20.0) } else { v };
    let mut worst = 0.0f64;
    for (g, w) in got.chunks(bins).zip(want.chunks(bins)) {
        let peak = w
            .iter()
            .map(|v| lin(*v).abs())
            .fold(0.0, f64::max)
            .max(1e-300);
        for (a, b) in g.iter().zip(w) {
            let e = (lin(*a) - lin(*b)).abs() / peak;
            assert!(e.is_finite(), "non-finite output");
            worst = worst.max(e);
        }
    }
    worst
}

/// A transform spec of `n` points at 48 kHz.
pub fn spec(n: usize, kind: InputKind, window: WindowKind, scale: Scale) -> TransformSpec {
    TransformSpec {
        n,
        kind,
        window,
        scale,
        rate: 48_000.0,
    }
}

/// The error the OpenCL engine may have against the reference, relative to a frame's largest
/// bin: 1e-10 in f64, 1e-4 in f32.
pub fn tol<T: Sample>() -> f64 {
    if T::NAME == "f64" {
        1e-10
    } else {
        1e-4
    }
}

/// An engine on the test device with `options`; None without a device or when it does not
/// compute in `T` (f64 without cl_khr_fp64; said on stderr).
pub fn engine_with<T: Sample>(options: OpenClOptions) -> Option<OpenClEngine<T>> {
    let dev = test_device()?;
    let gpu = OpenClEngine::<T>::new(dev, options).expect("engine");
    let probe = spec(8, InputKind::Real, WindowKind::Hann, Scale::Magnitude);
    if gpu.supports(&probe).is_err() {
        eprintln!("{} unsupported on {}: skipped", T::NAME, dev.info.name);
        return None;
    }
    Some(gpu)
}

/// An engine whose local memory is taken as `limit` bytes (to send sizes through the paths a
/// GPU's smaller local memory gives them), as `engine_with`.
pub fn engine_with_limit<T: Sample>(limit: usize) -> Option<OpenClEngine<T>> {
    engine_with(OpenClOptions {
        local_mem_limit: Some(limit),
        ..Default::default()
    })
}

/// Samples as f64.
pub fn f64s<T: Sample>(v: Vec<T>) -> Vec<f64> {
    v.into_iter().map(Sample::into_f64).collect()
}

/// The naive f64 DFT's spectra of the frames of `s` in an input.
pub fn naive_frames(s: &TransformSpec) -> impl Fn(&[f64]) -> Vec<f64> + '_ {
    move |x: &[f64]| {
        x.chunks(s.values_per_frame())
            .flat_map(|f| naive_spectrum(s, f))
            .collect()
    }
}

/// The CPU engine's f64 spectra of `frames` frames of `s` in an input.
pub fn cpu_frames(s: &TransformSpec, frames: usize) -> impl Fn(&[f64]) -> Vec<f64> + '_ {
    move |x: &[f64]| {
        let mut w = Vec::new();
        CpuEngine::<f64>::new()
            .process(s, x, frames, &mut w)
            .expect("cpu");
        w
    }
}

/// `frames` frames of `s` (input: `signal` seeded by `seed`) on one of `paths` against
/// `want(input as f64)`, within `tol`; returns the error.
pub fn check_on_paths<T: Sample>(
    gpu: &mut OpenClEngine<T>,
    s: &TransformSpec,
    (frames, seed): (usize, u64),
    want: impl Fn(&[f64]) -> Vec<f64>,
    paths: &[&str],
) -> f64 {
    let path = gpu.path_name(s).expect("plan");
    assert!(paths.contains(&path), "{} {s:?}: path {path}", T::NAME);
    let input: Vec<T> = signal(frames * s.values_per_frame(), seed);
    let want = want(&f64s(input.clone()));
    let mut got = Vec::new();
    gpu.process(s, &input, frames, &mut got)
        .unwrap_or_else(|e| panic!("opencl failed on {s:?}: {e}"));
    assert_eq!(got.len(), frames * s.values_out(), "{s:?}");
    let e = spec_rel_error(&f64s(got), &want, s);
    let tol = tol::<T>();
    assert!(
        e <= tol,
        "{} {s:?} x{frames} on {path}: max error {e:e} > {tol:e}",
        T::NAME
    );
    e
}
