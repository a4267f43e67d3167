//! OpenCL engine conformance at frame sizes that are not powers of two, on a real OpenCL device
//! (PoCL in CI): mixed-radix Stockham passes (factors 2, 3, 5, 7) in one local-memory kernel (the
//! default where a frame fits, which on PoCL is every such size here) and in global memory (forced
//! with a tiny local-memory limit), and Bluestein (a prime factor above 7), real input of even and odd length and complex input, f32 and f64, every window and
//! every scale, against the naive f64 DFT (`naive_spectrum`) or, for the largest sizes, the CPU
//! engine in f64 (rustfft); overlapping frames and fused `--average` runs formed on the device.
//! Tolerance, as for powers of two (tests/opencl_conformance.rs): 1e-4 (f32) / 1e-10 (f64) of
//! each frame's largest bin, dB compared as magnitudes, complex re and im against the frame's
//! largest |X|.

use crate::opencl_common;
use opencl_common as common;

use fftd::fft::cpu::CpuEngine;
use fftd::fft::opencl::{OpenClEngine, OpenClOptions};
use fftd::fft::{naive_spectrum, Engine, FrameStep, Scale, SegmentOp, Segments, TransformSpec};
use fftd::types::{InputKind, Sample};
use fftd::window::WindowKind;

/// 2·3·5·7-smooth sizes (mixed-radix passes), odd and even: each radix alone and with the
/// others, radix 16 with a leftover, small and past 2048 (each size one more program build).
const COMPOSITE: [usize; 11] = [3, 5, 6, 7, 15, 30, 96, 105, 210, 1000, 3000];
/// Sizes with a prime factor above 7 (Bluestein).
const PRIME: [usize; 5] = [11, 17, 97, 1009, 2018];

use common::{spec, tol};

fn engine<T: Sample>() -> Option<OpenClEngine<T>> {
    common::engine_with(OpenClOptions::default())
}

/// Global-memory passes at every size (no frame fits a 64-byte local-memory limit).
fn global_passes() -> OpenClOptions {
    OpenClOptions {
        local_mem_limit: Some(64),
        ..Default::default()
    }
}

fn f64s<T: Sample>(v: Vec<T>) -> Vec<f64> {
    v.into_iter().map(Sample::into_f64).collect()
}

/// `frames` frames of `s` through the engine against the naive f64 DFT of the same input (the
/// input rounded to T first); returns the error.
fn against_naive<T: Sample>(gpu: &mut OpenClEngine<T>, s: &TransformSpec, frames: usize) -> f64 {
    let input: Vec<T> = common::signal(frames * s.values_per_frame(), s.n as u64 + 7);
    let exact = f64s(input.clone());
    let want: Vec<f64> = exact
        .chunks(s.values_per_frame())
        .flat_map(|f| naive_spectrum(s, f))
        .collect();
    let mut got = Vec::new();
    gpu.process(s, &input, frames, &mut got)
        .unwrap_or_else(|e| panic!("opencl failed on {s:?}: {e}"));
    assert_eq!(got.len(), frames * s.values_out(), "{s:?}");
    let e = common::spec_rel_error(&f64s(got), &want, s);
    assert!(
        e <= tol::<T>(),
        "{} n={} {:?} {} {}: max error {e:e} > {:e}",
        T::NAME,
        s.n,
        s.kind,
        s.window,
        s.scale,
        tol::<T>()
    );
    e
}

/// Mixed-radix sizes for the global-memory passes (fewer: each size is one more program build).
const GLOBAL: [usize; 6] = [6, 15, 105, 210, 1000, 3000];

/// Every size of `sizes`, real and complex, windows and scales rotated across sizes so each
/// appears; returns the largest error seen.
fn sweep<T: Sample>(options: OpenClOptions, sizes: &[usize]) -> f64 {
    let Some(mut gpu) = common::engine_with::<T>(options) else {
        return 0.0;
    };
    let mut worst = 0.0f64;
    for (i, &n) in sizes.iter().enumerate() {
        for (j, kind) in [InputKind::Real, InputKind::Complex]
            .into_iter()
            .enumerate()
        {
            let r = 2 * i + j;
            let window = WindowKind::ALL[r % WindowKind::ALL.len()];
            let scale = Scale::ALL[(r + r / WindowKind::ALL.len()) % Scale::ALL.len()];
            let frames = if n >= 1000 { 2 } else { 3 };
            worst = worst.max(against_naive(
                &mut gpu,
                &spec(n, kind, window, scale),
                frames,
            ));
        }
    }
    eprintln!("{}: largest error vs the f64 DFT {worst:e}", T::NAME);
    worst
}

#[test]
fn f32_composite_and_prime_sizes_against_the_f64_dft() {
    let all: Vec<usize> = COMPOSITE.iter().chain(&PRIME).copied().collect();
    sweep::<f32>(OpenClOptions::default(), &all);
    sweep::<f32>(global_passes(), &GLOBAL);
}

#[test]
fn f64_composite_and_prime_sizes_against_the_f64_dft() {
    // a spread of the sizes (each one more program build): odd, even, mixed and Bluestein
    let some = [3, 7, 12, 30, 105, 960, 3000, 17, 1009, 2018];
    sweep::<f64>(OpenClOptions::default(), &some);
    sweep::<f64>(global_passes(), &GLOBAL[3..]);
}

#[test]
fn every_window_and_scale_on_each_kind_of_size() {
    // 30 (even real: n/2 = 15 by mixed radix), 105 (odd real: complex frames), 97 (Bluestein)
    let Some(mut gpu) = engine::<f32>() else {
        return;
    };
    for n in [30, 105, 97] {
        for kind in [InputKind::Real, InputKind::Complex] {
            for window in WindowKind::ALL {
                for scale in Scale::ALL {
                    against_naive(&mut gpu, &spec(n, kind, window, scale), 2);
                }
            }
        }
    }
    let Some(mut gpu) = engine::<f64>() else {
        return;
    };
    for kind in [InputKind::Real, InputKind::Complex] {
        for scale in Scale::ALL {
            against_naive(&mut gpu, &spec(97, kind, WindowKind::Hann, scale), 2);
        }
    }
}

/// Large sizes against the CPU engine in f64 (rustfft: errors near 1e-15, far below the
/// tolerance) and one frame of 44100 against the naive DFT.
#[test]
fn large_sizes() {
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(), engine::<f64>()) else {
        return;
    };
    against_naive(
        &mut g32,
        &spec(44100, InputKind::Real, WindowKind::Hann, Scale::Magnitude),
        1,
    );
    let mut cpu = CpuEngine::<f64>::new();
    for (n, kind) in [
        (48000, InputKind::Complex),
        (65521, InputKind::Real),
        (2 * 65521, InputKind::Complex),
    ] {
        let s = spec(n, kind, WindowKind::Blackman, Scale::Magnitude);
        let input: Vec<f64> = common::signal(2 * s.values_per_frame(), n as u64);
        let mut want = Vec::new();
        cpu.process(&s, &input, 2, &mut want).expect("cpu");
        let mut got = Vec::new();
        g64.process(&s, &input, 2, &mut got).expect("opencl f64");
        let e = common::spec_rel_error(&got, &want, &s);
        assert!(e <= 1e-10, "f64 n={n} {kind:?}: {e:e}");
        let in32: Vec<f32> = input.iter().map(|v| *v as f32).collect();
        let want32: Vec<f64> = {
            let exact: Vec<f64> = in32.iter().map(|v| *v as f64).collect();
            let mut w = Vec::new();
            cpu.process(&s, &exact, 2, &mut w).expect("cpu");
            w
        };
        let mut got = Vec::new();
        g32.process(&s, &in32, 2, &mut got).expect("opencl f32");
        let e = common::spec_rel_error(&f64s(got), &want32, &s);
        assert!(e <= 1e-4, "f32 n={n} {kind:?}: {e:e}");
    }
}

/// Overlapping frames (hop < frame, formed on the device) and `--average` runs reduced on the
/// device, at a mixed-radix, an odd and a Bluestein size, against the CPU engine.
fn strided<T: Sample>(options: OpenClOptions, sizes: &[usize]) {
    let Some(mut gpu) = common::engine_with::<T>(options) else {
        return;
    };
    let mut cpu = CpuEngine::<T>::new();
    for &n in sizes {
        for kind in [InputKind::Real, InputKind::Complex] {
            let s = spec(n, kind, WindowKind::Hann, Scale::Power);
            let (frames, hop) = (9, n / 3);
            let step = hop * kind.width();
            let len = (frames - 1) * step + s.values_per_frame();
            let data: Vec<T> = common::signal(len, (n + hop) as u64);
            let strided = FrameStep {
                data: &data,
                count: frames,
                step,
            };
            let packed = strided.packed(&s).expect("packs");
            let mut power = Vec::new();
            cpu.process(&s, &packed, frames, &mut power).expect("cpu");
            let mut got = vec![T::zero(); power.len()];
            gpu.transform_strided(&s, strided, (None, None), &mut got)
                .unwrap_or_else(|e| panic!("opencl strided n={n}: {e}"));
            let e = common::spec_rel_error(&f64s(got), &f64s(power.clone()), &s);
            assert!(e <= tol::<T>(), "{} n={n} {kind:?}: {e:e}", T::NAME);
            let lengths = [1u32, 2, frames as u32 - 3];
            let runs = Segments {
                lengths: &lengths,
                op: SegmentOp::Mean,
            };
            let mut want_runs = vec![T::zero(); 3 * s.values_out()];
            runs.reduce(&power, s.values_out(), &mut want_runs);
            let mut got_runs = vec![T::zero(); want_runs.len()];
            gpu.transform_strided(&s, strided, (None, Some(&runs)), &mut got_runs)
                .unwrap_or_else(|e| panic!("opencl strided runs n={n}: {e}"));
            let e = common::spec_rel_error(&f64s(got_runs), &f64s(want_runs), &s);
            assert!(e <= 10.0 * tol::<T>(), "runs n={n} {kind:?}: {e:e}");
        }
    }
}

#[test]
fn overlapping_frames_and_device_runs() {
    strided::<f32>(OpenClOptions::default(), &[1000, 105, 97]);
    strided::<f64>(OpenClOptions::default(), &[1000]);
    strided::<f32>(global_passes(), &[1000, 105]);
}

#[test]
fn only_frames_past_2_pow_26_are_unsupported() {
    let Some(gpu) = engine::<f32>() else {
        return;
    };
    for n in [1000, 44100, 65521, (1 << 24) + 1, 1 << 26] {
        let s = spec(n, InputKind::Real, WindowKind::Hann, Scale::Magnitude);
        assert!(gpu.supports(&s).is_ok(), "n={n}");
    }
    let s = spec(
        (1 << 26) + 1,
        InputKind::Real,
        WindowKind::Hann,
        Scale::Magnitude,
    );
    assert!(matches!(
        gpu.supports(&s),
        Err(fftd::fft::EngineError::Unsupported { .. })
    ));
}
