//! The OpenCL engine's three-stage path (kernels/fourstep.cl: outer columns, then a four-step
//! over each row; src/fft/opencl/threestage.rs) on a real OpenCL device (PoCL in CI). PoCL reports
//! 1 MiB of local memory, so a 4 KiB limit (8 KiB f64) sends powers of two from 8192 points
//! through this path, checked against the naive f64 DFT; at an H100's 48 KiB it takes 2^19
//! points and up, checked against the CPU engine in f64. Real and complex input, f32 and f64,
//! every scale, windows rotated, several frames per batch; tolerance 1e-4 (f32) / 1e-10 (f64)
//! of each frame's largest bin, as tests/opencl_sizes.rs.

use crate::opencl_common;
use opencl_common as common;

use fftd::fft::opencl::OpenClEngine;
use fftd::fft::{Scale, TransformSpec};
use fftd::types::{InputKind, Sample};
use fftd::window::WindowKind;

use common::{cpu_frames as cpu, engine_with_limit as engine, naive_frames as naive, spec};

/// `frames` frames of `s` on the three-stage path against `want(input as f64)`.
fn check<T: Sample>(
    gpu: &mut OpenClEngine<T>,
    s: &TransformSpec,
    frames: usize,
    want: impl Fn(&[f64]) -> Vec<f64>,
) {
    let seed = s.n as u64 + 11;
    common::check_on_paths(gpu, s, (frames, seed), want, &["three-stage"]);
}

/// Under 4 KiB (f32; 8 KiB f64, the same shapes) complex 8192 and real 16384 (8192 points) are
/// past the four-step: every scale, windows rotated, 1 to 3 frames, against the naive f64 DFT.
#[test]
fn three_stages_against_the_f64_dft() {
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(4 << 10), engine::<f64>(8 << 10)) else {
        return;
    };
    for (i, (n, kind)) in [(8192, InputKind::Complex), (16384, InputKind::Real)]
        .into_iter()
        .enumerate()
    {
        for (j, scale) in Scale::ALL.into_iter().enumerate() {
            let window = WindowKind::ALL[(i + j) % WindowKind::ALL.len()];
            let s = spec(n, kind, window, scale);
            check(&mut g32, &s, 1 + (i + j) % 3, naive(&s));
            if j % 2 == i {
                check(&mut g64, &s, 1, naive(&s));
            }
        }
    }
}

/// At an H100's 48 KiB: complex 2^19 and 2^20, real 2^20 and 2^21, against the CPU engine in
/// f64 (f64 at two of them).
#[test]
fn three_stages_at_an_h100_limit() {
    let limit = 48 << 10;
    let (Some(mut g32), Some(mut g64)) = (engine::<f32>(limit), engine::<f64>(limit)) else {
        return;
    };
    let cases = [
        (
            1 << 19,
            InputKind::Complex,
            WindowKind::Hann,
            Scale::Magnitude,
        ),
        (1 << 20, InputKind::Real, WindowKind::Blackman, Scale::Db),
        (
            1 << 20,
            InputKind::Complex,
            WindowKind::Hamming,
            Scale::Complex,
        ),
        (1 << 21, InputKind::Real, WindowKind::Hann, Scale::Power),
    ];
    for (i, (n, kind, window, scale)) in cases.into_iter().enumerate() {
        let s = spec(n, kind, window, scale);
        check(&mut g32, &s, 2, cpu(&s, 2));
        if i % 2 == 1 {
            check(&mut g64, &s, 1, cpu(&s, 1));
        }
    }
}
