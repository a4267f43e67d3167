//! The CPU engine against a naive f64 DFT and against analytic signals, for every window, scale
//! (`complex` included: re, im of each bin), precision and input kind, over sizes 2..2^14
//! including non-powers of two; the phase of `--scale complex` on known sinusoids.

use crate::common;

use common::{max_relative_error, noise};
use fftd::fft::cpu::CpuEngine;
use fftd::fft::{naive_spectrum, Engine, Scale, TransformSpec};
use fftd::types::{InputKind, Sample};
use fftd::window::WindowKind;

fn sizes() -> Vec<usize> {
    let mut sizes: Vec<usize> = (1..=14).map(|p| 1usize << p).collect();
    sizes.extend([3, 5, 7, 12, 100, 1000, 4095, 4097]);
    sizes
}

/// Runs `frames` frames through the CPU engine in precision T, returns rows in f64.
fn engine_rows<T: Sample>(spec: &TransformSpec, input: &[f64], frames: usize) -> Vec<Vec<f64>> {
    let mut engine = CpuEngine::<T>::new();
    let data: Vec<T> = input.iter().map(|v| T::of_f64(*v)).collect();
    let mut out = Vec::new();
    engine
        .process(spec, &data, frames, &mut out)
        .expect("cpu engine");
    out.chunks(spec.values_out())
        .map(|row| row.iter().map(|v| v.into_f64()).collect())
        .collect()
}

/// dB is compared in the linear domain (10^(dB/20)), where the per-frame tolerance is meaningful;
/// complex rows value by value (re, im), relative to the frame's largest value.
fn comparable(scale: Scale, row: &[f64]) -> Vec<f64> {
    match scale {
        Scale::Db => row.iter().map(|d| 10f64.powf(d / 20.0)).collect(),
        _ => row.to_vec(),
    }
}

fn check_against_naive(n: usize, kind: InputKind, window: WindowKind, frames: usize) {
    let values = n * kind.width();
    let input = noise(values * frames, (n * 31 + frames) as u64);
    for scale in Scale::ALL {
        let spec = TransformSpec {
            n,
            kind,
            window,
            scale,
            rate: 48_000.0,
        };
        let want: Vec<Vec<f64>> = input
            .chunks(values)
            .map(|f| comparable(scale, &naive_spectrum(&spec, f)))
            .collect();
        for (precision, tolerance, rows) in [
            ("f32", 1e-4, engine_rows::<f32>(&spec, &input, frames)),
            ("f64", 1e-10, engine_rows::<f64>(&spec, &input, frames)),
        ] {
            assert_eq!(rows.len(), frames);
            for (got, want) in rows.iter().zip(&want) {
                let err = max_relative_error(&comparable(scale, got), want);
                assert!(
                    err <= tolerance,
                    "n={n} {kind:?} {window} {scale} {precision}: error {err:e} > {tolerance:e}"
                );
            }
        }
    }
}

#[test]
fn cpu_engine_matches_naive_dft_for_every_size_window_scale_and_kind() {
    for n in sizes() {
        // several frames per batch for small sizes, one for large
        let frames = if n <= 1024 { 3 } else { 1 };
        for window in WindowKind::ALL {
            for kind in [InputKind::Real, InputKind::Complex] {
                // the naive DFT is O(n²): at the largest sizes check one window per kind
                if n >= 8192 && window != WindowKind::Hann && window != WindowKind::Rect {
                    continue;
                }
                check_against_naive(n, kind, window, frames);
            }
        }
    }
}

#[test]
fn a_sine_lands_in_its_bin() {
    for n in [64usize, 100, 4096] {
        // away from DC and Nyquist, where the negative-frequency image leaks into the peak
        for bin in [8usize, 13, n / 4] {
            let x: Vec<f64> = (0..n)
                .map(|j| (2.0 * std::f64::consts::PI * bin as f64 * j as f64 / n as f64).sin())
                .collect();
            for window in WindowKind::ALL {
                let spec = TransformSpec {
                    n,
                    kind: InputKind::Real,
                    window,
                    scale: Scale::Magnitude,
                    rate: 1.0,
                };
                let row = &engine_rows::<f32>(&spec, &x, 1)[0];
                let peak =
                    row.iter().enumerate().fold(
                        (0, 0.0),
                        |best, (k, v)| if *v > best.1 { (k, *v) } else { best },
                    );
                assert_eq!(peak.0, bin, "n={n} bin={bin} {window}");
                // coherent gain: |X_bin| = (Σw)/2 for a unit sine
                let sum: f64 = window.coefficients(n).iter().sum();
                assert!(
                    (peak.1 - sum / 2.0).abs() <= 1e-4 * sum,
                    "n={n} bin={bin} {window}: peak {} want {}",
                    peak.1,
                    sum / 2.0
                );
            }
        }
    }
}

#[test]
fn parseval_holds_for_real_and_complex_input() {
    for n in [16usize, 100, 1024, 4095] {
        for kind in [InputKind::Real, InputKind::Complex] {
            let x = noise(n * kind.width(), n as u64);
            let spec = TransformSpec {
                n,
                kind,
                window: WindowKind::Rect,
                scale: Scale::Power,
                rate: 1.0,
            };
            let power = &engine_rows::<f64>(&spec, &x, 1)[0];
            let energy: f64 = x.iter().map(|v| v * v).sum();
            // one-sided: interior bins stand for two bins of the full spectrum
            let spectrum_energy: f64 = match kind {
                InputKind::Complex => power.iter().sum(),
                InputKind::Real => power
                    .iter()
                    .enumerate()
                    .map(|(k, p)| {
                        if k == 0 || (n % 2 == 0 && k == n / 2) {
                            *p
                        } else {
                            2.0 * p
                        }
                    })
                    .sum(),
            };
            let rel = (spectrum_energy / n as f64 - energy).abs() / energy;
            assert!(rel < 1e-12, "n={n} {kind:?}: Parseval off by {rel:e}");
        }
    }
}

#[test]
fn spectrum_and_density_follow_scipy_conventions() {
    // A unit-amplitude sine at an exact bin: scaling='spectrum' gives A²/2 = 0.5 at that bin
    // (one-sided), for any window.
    let n = 256;
    let x: Vec<f64> = (0..n)
        .map(|j| (2.0 * std::f64::consts::PI * 16.0 * j as f64 / n as f64).cos())
        .collect();
    for window in [WindowKind::Rect, WindowKind::Hann, WindowKind::Flattop] {
        let spec = TransformSpec {
            n,
            kind: InputKind::Real,
            window,
            scale: Scale::Spectrum,
            rate: 1000.0,
        };
        let row = &engine_rows::<f64>(&spec, &x, 1)[0];
        assert!((row[16] - 0.5).abs() < 1e-12, "{window}: {}", row[16]);
    }
    // White noise of variance σ² has one-sided density ≈ 2σ²/fs; check the mean over bins.
    let n = 4096;
    let fs = 100.0;
    let x = noise(n, 7);
    let var: f64 = x.iter().map(|v| v * v).sum::<f64>() / n as f64;
    let spec = TransformSpec {
        n,
        kind: InputKind::Real,
        window: WindowKind::Rect,
        scale: Scale::Density,
        rate: fs,
    };
    let row = &engine_rows::<f64>(&spec, &x, 1)[0];
    let interior: f64 = row[1..n / 2].iter().sum::<f64>() / (n / 2 - 1) as f64;
    assert!(
        (interior / (2.0 * var / fs) - 1.0).abs() < 0.1,
        "{interior} vs {}",
        2.0 * var / fs
    );
}

/// (|X_k|, arg X_k) of bin `k` of a `--scale complex` row.
fn polar(row: &[f64], k: usize) -> (f64, f64) {
    let (re, im) = (row[2 * k], row[2 * k + 1]);
    (re.hypot(im), im.atan2(re))
}

/// The smallest difference between two angles, in radians.
fn angle_error(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(std::f64::consts::TAU);
    d.min(std::f64::consts::TAU - d)
}

#[test]
fn complex_scale_keeps_the_phase_of_a_cosine() {
    // cos(2π k j/n + φ) at an exact bin: X_k = (Σw/2)·e^{iφ} for every window (all are cosine
    // sums of at most 9 taps, so the image at -k does not reach bin k when k is 5 bins or more
    // from DC and Nyquist)
    for n in [64usize, 100, 1024, 1000] {
        for (bin, phase) in [(8usize, 0.7f64), (n / 4, -2.1), (13, 3.0)] {
            let x: Vec<f64> = (0..n)
                .map(|j| (std::f64::consts::TAU * (bin * j) as f64 / n as f64 + phase).cos())
                .collect();
            for window in WindowKind::ALL {
                let spec = TransformSpec {
                    n,
                    kind: InputKind::Real,
                    window,
                    scale: Scale::Complex,
                    rate: 1.0,
                };
                let sum: f64 = window.coefficients(n).iter().sum();
                for (precision, row, tol) in [
                    ("f32", engine_rows::<f32>(&spec, &x, 1).remove(0), 1e-4),
                    ("f64", engine_rows::<f64>(&spec, &x, 1).remove(0), 1e-10),
                ] {
                    assert_eq!(row.len(), 2 * (n / 2 + 1));
                    let (magnitude, angle) = polar(&row, bin);
                    let context = format!("n={n} bin={bin} {window} {precision}");
                    assert!(
                        (magnitude - sum / 2.0).abs() <= tol * sum,
                        "{context}: |X| {magnitude}"
                    );
                    assert!(
                        angle_error(angle, phase) <= tol,
                        "{context}: arg X {angle} want {phase}"
                    );
                }
            }
        }
    }
}

#[test]
fn complex_scale_keeps_the_phase_of_a_complex_exponential() {
    // e^{i(2π k j/n + φ)}: X_k = Σw·e^{iφ} for any window, at every bin including negative ones
    for n in [16usize, 1000, 4096] {
        for (bin, phase) in [(0usize, 1.2f64), (3, -0.4), (n - 5, 2.9)] {
            let x: Vec<f64> = (0..n)
                .flat_map(|j| {
                    let a = std::f64::consts::TAU * (bin * j) as f64 / n as f64 + phase;
                    [a.cos(), a.sin()]
                })
                .collect();
            for window in [WindowKind::Rect, WindowKind::Hann, WindowKind::Flattop] {
                let spec = TransformSpec {
                    n,
                    kind: InputKind::Complex,
                    window,
                    scale: Scale::Complex,
                    rate: 1.0,
                };
                let sum: f64 = window.coefficients(n).iter().sum();
                let row = engine_rows::<f64>(&spec, &x, 1).remove(0);
                assert_eq!(row.len(), 2 * n);
                let (magnitude, angle) = polar(&row, bin);
                assert!(
                    (magnitude - sum).abs() <= 1e-10 * sum,
                    "n={n} bin={bin} {window}"
                );
                assert!(
                    angle_error(angle, phase) <= 1e-10,
                    "n={n} bin={bin} {window}: {angle}"
                );
            }
        }
    }
}

#[test]
fn complex_scale_agrees_with_magnitude_and_power() {
    // |re + i im| of the complex scale is the magnitude scale, its square the power scale
    for (n, kind) in [(1000usize, InputKind::Real), (512, InputKind::Complex)] {
        let x = noise(n * kind.width(), 5);
        let spec = |scale| TransformSpec {
            n,
            kind,
            window: WindowKind::Hamming,
            scale,
            rate: 1.0,
        };
        let complex = engine_rows::<f64>(&spec(Scale::Complex), &x, 1).remove(0);
        let magnitude = engine_rows::<f64>(&spec(Scale::Magnitude), &x, 1).remove(0);
        let power = engine_rows::<f64>(&spec(Scale::Power), &x, 1).remove(0);
        let from_pairs: Vec<f64> = complex.chunks_exact(2).map(|z| z[0].hypot(z[1])).collect();
        let squared: Vec<f64> = from_pairs.iter().map(|m| m * m).collect();
        assert!(
            max_relative_error(&from_pairs, &magnitude) < 1e-12,
            "{kind:?}"
        );
        assert!(max_relative_error(&squared, &power) < 1e-12, "{kind:?}");
    }
}
