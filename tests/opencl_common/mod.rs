//! Shared helpers of the OpenCL test binaries: PoCL cache and fftd cache under `target/`, the
//! "fail, don't skip, unless FFTD_SKIP_OPENCL_TESTS=1" rule, deterministic test signals and the
//! comparison against the CPU engine.
#![allow(dead_code)]

use fftd::fft::opencl::device::{self, DeviceEntry};
use fftd::fft::{Scale, TransformSpec};
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
