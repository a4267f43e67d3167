//! The OpenCL engine's two-level path (kernels/twolevel.cl: column then row FFTs, each in local
//! memory) and the four-step path's fused real post-processing, on a real OpenCL device (PoCL in
//! CI). PoCL reports 1 MiB of local memory, so small local-memory limits send sizes that fit one
//! kernel there through these paths: 4 KiB (f32; 8 KiB f64) for composite, odd and Bluestein sizes
//! against the naive f64 DFT; 48 KiB (an H100's default) for the large sizes the GPU runs
//! this way (44100, 48000, 65521) against the CPU engine in f64. Real and complex input,
//! f32 and f64, windows and scales rotated; tolerance 1e-4 (f32) / 1e-10 (f64) of each frame's
//! largest bin, as tests/opencl_sizes.rs.

use crate::opencl_common;
use opencl_common as common;

use fftd::fft::opencl::{twolevel_geometry, OpenClEngine};
use fftd::fft::{Engine, Scale, TransformSpec};
use fftd::types::{InputKind, Sample};
use fftd::window::WindowKind;

use common::{
    cpu_frames as cpu, engine_with_limit as engine, f64s, naive_frames as naive, spec, tol,
};

/// `frames` frames of `s` on the two-level path (or the others these sizes take) against
/// `want(input as f64)`; returns the error.
fn check<T: Sample>(
    gpu: &mut OpenClEngine<T>,
    s: &TransformSpec,
    frames: usize,
    want: impl Fn(&[f64]) -> Vec<f64>,
) -> f64 {
    let paths = [
        "two-level",
        "two-level-bluestein",
        "two-level-bluestein-two-frames",
        "four-step",
        "local-bluestein",
        "split",
    ];
    common::check_on_paths(gpu, s, (frames, s.n as u64 + 3), want, &paths)
}

/// Sizes through the two-level path under a 4 KiB limit: even real with even and odd N1 (960,
/// 1000, 2250, 3000), odd real (945, 3375: complex frames), Bluestein (1009, 2018; 11 and 97
/// fit one kernel: Bluestein in local memory).
const SMALL: [usize; 10] = [960, 1000, 2250, 3000, 945, 3375, 11, 97, 1009, 2018];

fn sweep<T: Sample>(limit: usize, sizes: &[usize]) {
    let Some(mut gpu) = engine::<T>(limit) else {
        return;
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
            let s = spec(n, kind, window, scale);
            worst = worst.max(check(&mut gpu, &s, 3, naive(&s)));
        }
    }
    eprintln!("{}: largest error vs the f64 DFT {worst:e}", T::NAME);
}

#[test]
fn f32_two_level_sizes_against_the_f64_dft() {
    sweep::<f32>(4 << 10, &SMALL);
}

#[test]
fn f64_two_level_sizes_against_the_f64_dft() {
    // 8 KiB: f64 transforms twice the bytes
    sweep::<f64>(8 << 10, &[960, 2250, 945, 97, 2018]);
}

#[test]
fn every_scale_on_the_two_level_path() {
    let Some(mut gpu) = engine::<f32>(4 << 10) else {
        return;
    };
    // even two-level, odd (complex frames) and Bluestein; 97 (Bluestein in one kernel) has
    // every scale in opencl_sizes
    for n in [1000, 945, 2018] {
        for kind in [InputKind::Real, InputKind::Complex] {
            for scale in Scale::ALL {
                let s = spec(n, kind, WindowKind::Hann, scale);
                check(&mut gpu, &s, 2, naive(&s));
            }
        }
    }
}

/// The sizes an H100 (48 KiB of local memory) runs on the two-level path, against the CPU
/// engine in f64.
#[test]
fn large_sizes_at_an_h100_limit() {
    let limit = 48 << 10;
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(limit), engine::<f64>(limit)) else {
        return;
    };
    let cases = [
        (44100, InputKind::Real, WindowKind::Hann, Scale::Magnitude),
        (44100, InputKind::Complex, WindowKind::Blackman, Scale::Db),
        (48000, InputKind::Real, WindowKind::Hamming, Scale::Power),
        (48000, InputKind::Complex, WindowKind::Hann, Scale::Complex),
        (65521, InputKind::Real, WindowKind::Hann, Scale::Magnitude),
        (2018 * 16, InputKind::Real, WindowKind::Hann, Scale::Db),
    ];
    for (i, (n, kind, window, scale)) in cases.into_iter().enumerate() {
        let s = spec(n, kind, window, scale);
        check(&mut g32, &s, 2, cpu(&s, 2));
        // f64 at every other case (each one more program build on PoCL): the same kernels
        // with USE_DOUBLE, under the same limit
        if i % 2 == 0 {
            check(&mut g64, &s, 1, cpu(&s, 1));
        }
    }
}

#[test]
fn geometry_splits_near_the_square_root_under_the_limit() {
    let h100 = 48 << 10;
    let (a, b) = twolevel_geometry(22050, 4, h100, 1024).expect("44100 real");
    assert_eq!(a.len * b.len, 22050);
    assert!(a.len <= b.len && a.len >= 100, "{a:?} {b:?}");
    let (a, b) = twolevel_geometry(1 << 17, 4, h100, 1024).expect("Bluestein 65521");
    assert_eq!((a.len, b.len), (256, 512));
    assert!(a.fpb >= 2 && b.fpb >= 2);
    assert!(twolevel_geometry(1009, 4, h100, 1024).is_none(), "a prime");
    assert!(
        twolevel_geometry(1 << 23, 4, h100, 1024).is_none(),
        "too long"
    );
}

/// The four-step path (powers of two) with real input's post-processing fused into the rows
/// kernel, at an H100's limit, against the CPU engine in f64.
#[test]
fn fourstep_real_fused_post_at_an_h100_limit() {
    let limit = 48 << 10;
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(limit), engine::<f64>(limit)) else {
        return;
    };
    for (i, log2) in [15, 16, 17].into_iter().enumerate() {
        for kind in [InputKind::Real, InputKind::Complex] {
            let scale = Scale::ALL[i % Scale::ALL.len()];
            let s = spec(1 << log2, kind, WindowKind::Hann, scale);
            assert_eq!(g32.path_name(&s).expect("plan"), "four-step", "{s:?}");
            check(&mut g32, &s, 3, cpu(&s, 3));
            check(&mut g64, &s, 1, cpu(&s, 1));
        }
    }
}

/// The largest frames against the CPU engine in f64: 2^24 real samples under PoCL's 1 MiB of
/// local memory and 2^25 complex samples under an H100's 48 KiB, both on the three-stage path
/// (frames past the four-step's reach, up to the CPU's 2^26; docs/perf.md has those on the GPU).
#[test]
fn the_largest_frames_2_pow_24_and_25() {
    for (limit, log2, kind) in [
        (1 << 20, 24, InputKind::Real),
        (48 << 10, 25, InputKind::Complex),
    ] {
        let Some(mut gpu) = engine::<f32>(limit) else {
            return;
        };
        let s = spec(1 << log2, kind, WindowKind::Hann, Scale::Magnitude);
        let t = std::time::Instant::now();
        let input: Vec<f32> = common::signal(s.values_per_frame(), 24);
        let want = cpu(&s, 1)(&f64s(input.clone()));
        let mut got = Vec::new();
        gpu.process(&s, &input, 1, &mut got).expect("opencl");
        let e = common::spec_rel_error(&f64s(got), &want, &s);
        let path = gpu.path_name(&s).expect("plan");
        eprintln!("2^{log2} {kind:?} {path}: {e:e} in {:?}", t.elapsed());
        assert_eq!(path, "three-stage");
        assert!(e <= 1e-4, "2^{log2} {kind:?} {path}: {e:e}");
    }
}

/// Complex frames whose split exchange goes in rounds (local memory holds a half or a quarter of
/// one component): 1024 (halves in f32, quarters in f64) and 2048 (quarters, f32) points under
/// 4 KiB, against the CPU engine in f64; 16384 under an H100's 48 KiB takes the four-step path
/// instead (the one kernel was 3.8x slower on an H200).
#[test]
fn split_exchange_in_rounds_for_complex_frames() {
    for (i, (limit, n, f64_too)) in [
        (4 << 10, 1024, true),
        (4 << 10, 2048, false),
        (48 << 10, 16384, true),
    ]
    .into_iter()
    .enumerate()
    {
        let (Some(mut g32), Some(mut g64)) = (engine::<f32>(limit), engine::<f64>(limit)) else {
            return;
        };
        let window = WindowKind::ALL[i % WindowKind::ALL.len()];
        let scale = Scale::ALL[i % Scale::ALL.len()];
        let s = spec(n, InputKind::Complex, window, scale);
        let rounds = n < 1 << 14;
        let path = g32.path_name(&s).expect("plan");
        assert_eq!(path == "split", rounds, "f32 {s:?}: {path}");
        check(&mut g32, &s, 3, cpu(&s, 3));
        if f64_too {
            let path = g64.path_name(&s).expect("plan");
            assert_eq!(path == "split", rounds, "f64 {s:?}: {path}");
            check(&mut g64, &s, 2, cpu(&s, 2));
        }
    }
}

/// Odd real frames two to a transform on the two-level Bluestein path (the real and imaginary
/// parts of one complex frame, split after the transform): 1009 and 2001 under 4 KiB (8 KiB f64)
/// against the naive f64 DFT with 1, 2, 3 and 5 frames (the last pair's second frame missing
/// when odd), every scale and window; 65521 at an H100's 48 KiB against the CPU engine in f64.
#[test]
fn odd_real_frames_in_pairs_on_the_bluestein_path() {
    let want = "two-level-bluestein-two-frames";
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(4 << 10), engine::<f64>(8 << 10)) else {
        return;
    };
    for (i, n) in [1009, 2001].into_iter().enumerate() {
        for (j, frames) in [1, 2, 3, 5].into_iter().enumerate() {
            let r = 4 * i + j;
            let window = WindowKind::ALL[r % WindowKind::ALL.len()];
            for scale in Scale::ALL {
                let s = spec(n, InputKind::Real, window, scale);
                assert_eq!(g32.path_name(&s).expect("plan"), want, "f32 {s:?}");
                check(&mut g32, &s, frames, naive(&s));
                if scale == Scale::ALL[r % Scale::ALL.len()] {
                    assert_eq!(g64.path_name(&s).expect("plan"), want, "f64 {s:?}");
                    check(&mut g64, &s, frames, naive(&s));
                }
            }
        }
    }
    let limit = 48 << 10;
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(limit), engine::<f64>(limit)) else {
        return;
    };
    for (frames, scale) in [(3, Scale::Magnitude), (2, Scale::Complex)] {
        let s = spec(65521, InputKind::Real, WindowKind::Hann, scale);
        assert_eq!(g32.path_name(&s).expect("plan"), want, "{s:?}");
        check(&mut g32, &s, frames, cpu(&s, frames));
        check(&mut g64, &s, 1, cpu(&s, 1));
    }
}

/// Powers of two that fit one kernel at an H100's 48 KiB (4096, 8192 and 16384 points, real
/// and complex), against the CPU engine in f64, on the plan's path: the one-kernel path (local,
/// or the split exchange; real 16384 f32 finishing from the last pass's registers), except
/// complex 16384, which takes four-step.
#[test]
fn one_kernel_sizes_and_complex_16384_four_step() {
    let limit = 48 << 10;
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(limit), engine::<f64>(limit)) else {
        return;
    };
    for (i, log2) in [12, 13, 14].into_iter().enumerate() {
        for kind in [InputKind::Real, InputKind::Complex] {
            let s = spec(1 << log2, kind, WindowKind::Blackman, Scale::ALL[i]);
            let path = g32.path_name(&s).expect("plan");
            let four = kind == InputKind::Complex && log2 == 14;
            assert_eq!(path == "four-step", four, "{s:?}: {path}");
            let frames = 3;
            let input: Vec<f32> = common::signal(frames * s.values_per_frame(), 7);
            let want = cpu(&s, frames)(&f64s(input.clone()));
            let mut got = Vec::new();
            g32.process(&s, &input, frames, &mut got).expect("opencl");
            let e = common::spec_rel_error(&f64s(got), &want, &s);
            assert!(e <= tol::<f32>(), "f32 {s:?} on {path}: {e:e}");
            let input: Vec<f64> = common::signal(s.values_per_frame(), 8);
            let want = cpu(&s, 1)(&input);
            let mut got = Vec::new();
            g64.process(&s, &input, 1, &mut got).expect("opencl");
            let e = common::spec_rel_error(&got, &want, &s);
            assert!(e <= tol::<f64>(), "f64 {s:?}: {e:e}");
        }
    }
}
