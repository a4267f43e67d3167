//! OpenCL engine conformance on a real OpenCL device (PoCL in CI): every power of two 2..2^16
//! (2^17..2^20 for a few cases), batch lengths 1, 7 and 64, f32 and f64, real and complex input,
//! every window and every scale (`complex` included), against the CPU engine; a few sizes against
//! `naive_spectrum`; both the one-kernel (local memory) path and the multi-pass path; the phase
//! of `--scale complex` on a known cosine on every path. Other sizes: tests/opencl_sizes.rs.
//! Tolerance: 1e-4 (f32) / 1e-10 (f64) of each frame's largest bin, dB compared as magnitudes,
//! complex re and im against the frame's largest |X|.

use crate::opencl_common;
use opencl_common as common;

use fftd::fft::cpu::CpuEngine;
use fftd::fft::opencl::{OpenClEngine, OpenClOptions};
use fftd::fft::{naive_spectrum, Engine, HostBuf, Scale, TransformSpec};
use fftd::types::{InputKind, Sample};
use fftd::window::WindowKind;

use common::{spec, tol};

/// Runs `frames` frames through both engines and checks the tolerance; returns the error.
fn check<T: Sample>(
    gpu: &mut OpenClEngine<T>,
    cpu: &mut CpuEngine<T>,
    s: &TransformSpec,
    frames: usize,
) -> f64 {
    let input: Vec<T> = common::signal(frames * s.values_per_frame(), s.n as u64 + frames as u64);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    gpu.process(s, &input, frames, &mut a)
        .unwrap_or_else(|e| panic!("opencl failed on {s:?}: {e}"));
    cpu.process(s, &input, frames, &mut b).expect("cpu");
    assert_eq!(a.len(), frames * s.values_out());
    let a: Vec<f64> = a.into_iter().map(Sample::into_f64).collect();
    let b: Vec<f64> = b.into_iter().map(Sample::into_f64).collect();
    let e = common::spec_rel_error(&a, &b, s);
    assert!(
        e <= tol::<T>(),
        "{} n={} {:?} {} {} frames={frames}: max error {e:e} > {:e}",
        T::NAME,
        s.n,
        s.kind,
        s.window,
        s.scale,
        tol::<T>()
    );
    e
}

/// Every power of two up to 2^`max_log2`, real and complex.
fn all_up_to(max_log2: u32) -> Vec<u32> {
    (1..=max_log2).collect()
}

/// The f64 sweeps' sizes up to 2^`max_log2`: every local-path shape (2^1..2^8: each radix of the
/// leftover pass, one and two radix-16 passes, for real and complex frames), then a spread up to
/// the largest. The f64 kernels are the f32 ones with `USE_DOUBLE`, which f32's every-size sweep
/// covers at each size; each size here is a program build or more on PoCL (issue 39: the suite's
/// time is mostly PoCL compiling kernels).
fn f64_spread(max_log2: u32) -> Vec<u32> {
    let mut sizes: Vec<u32> = (1..=8).chain([11, max_log2]).collect();
    sizes.retain(|&l| l <= max_log2);
    sizes.dedup();
    sizes
}

fn sweep<T: Sample>(options: OpenClOptions, log2s: &[u32]) {
    let Some(mut gpu) = common::engine_with::<T>(options) else {
        return;
    };
    let mut cpu = CpuEngine::<T>::new();
    let mut i = 0usize;
    for &log2 in log2s {
        let n = 1usize << log2;
        for kind in [InputKind::Real, InputKind::Complex] {
            // rotate windows, scales and batch lengths across sizes so every one is covered (the
            // scale shifts by one every round of windows, so no scale stays with one window)
            let window = WindowKind::ALL[i % WindowKind::ALL.len()];
            let scale = Scale::ALL[(i + i / WindowKind::ALL.len()) % Scale::ALL.len()];
            let frames = [1, 7, 64][i % 3];
            let frames = if n >= 1 << 14 { frames.min(7) } else { frames };
            i += 1;
            check(&mut gpu, &mut cpu, &spec(n, kind, window, scale), frames);
        }
    }
}

#[test]
fn f32_all_sizes_local_path() {
    sweep::<f32>(OpenClOptions::default(), &all_up_to(16));
}

#[test]
fn f64_all_sizes_local_path() {
    sweep::<f64>(OpenClOptions::default(), &f64_spread(16));
}

#[test]
fn f32_all_sizes_multipass_path() {
    // a tiny local-memory limit forces the pack / Stockham passes / post path at every size
    sweep::<f32>(
        OpenClOptions {
            local_mem_limit: Some(64),
            ..Default::default()
        },
        &all_up_to(16),
    );
}

#[test]
fn split_exchange_path() {
    // 20 KiB: frames of 4096 (f32) / 2048 (f64) complex points no longer fit twice, but once
    let options = OpenClOptions {
        local_mem_limit: Some(20 << 10),
        ..Default::default()
    };
    sweep::<f32>(options.clone(), &all_up_to(13));
    sweep::<f64>(options, &f64_spread(12));
}

/// The split exchange at 8192 pairs: complex 8192 and real 16384 points
/// (8192 pairs) on a limit where they fit local memory once but not twice; every scale (real
/// 16384 f32 finishes from the last pass's registers, stockham_local.cl PAIRED).
fn split_8192<T: Sample>(limit: usize) {
    let options = OpenClOptions {
        local_mem_limit: Some(limit),
        ..Default::default()
    };
    let Some(mut gpu) = common::engine_with::<T>(options) else {
        return;
    };
    let mut cpu = CpuEngine::<T>::new();
    for (i, (n, kind)) in [(8192, InputKind::Complex), (16384, InputKind::Real)]
        .into_iter()
        .enumerate()
    {
        for (j, scale) in Scale::ALL.into_iter().enumerate() {
            let window = WindowKind::ALL[(i + j) % WindowKind::ALL.len()];
            check(
                &mut gpu,
                &mut cpu,
                &spec(n, kind, window, scale),
                [1, 3][j % 2],
            );
        }
    }
}

#[test]
fn split_exchange_8192_pairs() {
    // 40 KiB: 8192 f32 pairs fit once (33 KiB) but not twice; 80 KiB the same for f64
    split_8192::<f32>(40 << 10);
    split_8192::<f64>(80 << 10);
}

#[test]
fn f32_fourstep_path() {
    // a 16 KiB local-memory limit sends the larger sizes through the two-kernel four-step path
    // (from 2048 complex points; below, the one-kernel path with fewer frames per group, whose
    // every size the local sweeps check: from 2^5 here)
    sweep::<f32>(
        OpenClOptions {
            local_mem_limit: Some(16 << 10),
            ..Default::default()
        },
        &(5..=17).collect::<Vec<_>>(),
    );
}

#[test]
fn f64_fourstep_path() {
    // f64 leaves the one-kernel path from 1024 complex points at 16 KiB: every size from 2^10
    // (split exchange, four-step), a few below
    sweep::<f64>(
        OpenClOptions {
            local_mem_limit: Some(16 << 10),
            ..Default::default()
        },
        &[5, 8, 10, 11, 12, 13, 14, 15, 16],
    );
}

#[test]
fn f64_all_sizes_multipass_path() {
    sweep::<f64>(
        OpenClOptions {
            local_mem_limit: Some(64),
            ..Default::default()
        },
        &f64_spread(15),
    );
}

#[test]
fn every_window_and_scale_at_one_size() {
    let Some(dev) = common::test_device() else {
        return;
    };
    let mut gpu = OpenClEngine::<f32>::new(dev, OpenClOptions::default()).expect("engine");
    let mut cpu = CpuEngine::<f32>::new();
    for kind in [InputKind::Real, InputKind::Complex] {
        for window in WindowKind::ALL {
            for scale in Scale::ALL {
                for frames in [1, 7, 64] {
                    check(&mut gpu, &mut cpu, &spec(256, kind, window, scale), frames);
                }
            }
        }
    }
}

#[test]
fn large_sizes() {
    let Some(dev) = common::test_device() else {
        return;
    };
    let mut gpu = OpenClEngine::<f32>::new(dev, OpenClOptions::default()).expect("engine");
    let mut cpu = CpuEngine::<f32>::new();
    for (log2, kind) in [
        (17, InputKind::Real),
        (18, InputKind::Complex),
        (20, InputKind::Real),
    ] {
        check(
            &mut gpu,
            &mut cpu,
            &spec(1 << log2, kind, WindowKind::Hann, Scale::Magnitude),
            2,
        );
    }
}

#[test]
fn against_naive_dft() {
    let Some(dev) = common::test_device() else {
        return;
    };
    let mut gpu = OpenClEngine::<f64>::new(dev, OpenClOptions::default()).expect("engine");
    let mut gpu32 = OpenClEngine::<f32>::new(dev, OpenClOptions::default()).expect("engine");
    for n in [2usize, 8, 64, 512, 2048] {
        for (kind, scale) in [
            (InputKind::Real, Scale::Magnitude),
            (InputKind::Complex, Scale::Magnitude),
            (InputKind::Real, Scale::Complex),
            (InputKind::Complex, Scale::Complex),
        ] {
            let s = spec(n, kind, WindowKind::Blackman, scale);
            let frames = 3;
            let input: Vec<f64> = common::signal(frames * s.values_per_frame(), n as u64);
            let want: Vec<f64> = input
                .chunks(s.values_per_frame())
                .flat_map(|f| naive_spectrum(&s, f))
                .collect();
            if gpu.supports(&s).is_ok() {
                let mut got = Vec::new();
                gpu.process(&s, &input, frames, &mut got)
                    .expect("opencl f64");
                let e = common::spec_rel_error(&got, &want, &s);
                assert!(e < 1e-10, "f64 n={n} {kind:?} {scale}: {e:e}");
            }
            let in32: Vec<f32> = input.iter().map(|v| *v as f32).collect();
            let mut got = Vec::new();
            gpu32
                .process(&s, &in32, frames, &mut got)
                .expect("opencl f32");
            let got: Vec<f64> = got.into_iter().map(f64::from).collect();
            let e = common::spec_rel_error(&got, &want, &s);
            assert!(e < 1e-4, "f32 n={n} {kind:?} {scale}: {e:e}");
        }
    }
}

/// `cos(2π k j/n + φ)` at bin k = n/4 (real frames of n) or `e^{i(2π k j/n + φ)}` (complex):
/// with `--scale complex` bin k is (Σw/2)·e^{iφ} or Σw·e^{iφ}, for any window.
fn phase_probe(n: usize, kind: InputKind, phase: f64) -> (Vec<f32>, usize) {
    let k = n / 4;
    let angle = |j: usize| std::f64::consts::TAU * (k * j) as f64 / n as f64 + phase;
    let x = match kind {
        InputKind::Real => (0..n).map(|j| angle(j).cos() as f32).collect(),
        InputKind::Complex => (0..n)
            .flat_map(|j| [angle(j).cos() as f32, angle(j).sin() as f32])
            .collect(),
    };
    (x, k)
}

#[test]
fn complex_scale_keeps_the_phase_on_every_path() {
    let Some(dev) = common::test_device() else {
        return;
    };
    // default limits (local path), 16 KiB (four-step for the larger sizes), 64 bytes (global)
    for limit in [None, Some(16 << 10), Some(64)] {
        let options = OpenClOptions {
            local_mem_limit: limit,
            ..Default::default()
        };
        let mut gpu = OpenClEngine::<f32>::new(dev, options).expect("engine");
        for n in [64usize, 1024, 1 << 14] {
            for kind in [InputKind::Real, InputKind::Complex] {
                for (window, phase) in [(WindowKind::Rect, 0.9), (WindowKind::Hann, -2.5)] {
                    let s = spec(n, kind, window, Scale::Complex);
                    let (x, k) = phase_probe(n, kind, phase);
                    let mut row = Vec::new();
                    gpu.process(&s, &x, 1, &mut row).expect("opencl");
                    assert_eq!(row.len(), s.values_out());
                    let (re, im) = (row[2 * k] as f64, row[2 * k + 1] as f64);
                    let sum: f64 = window.coefficients(n).iter().sum();
                    let want = if kind == InputKind::Real {
                        sum / 2.0
                    } else {
                        sum
                    };
                    let context = format!("limit {limit:?} n={n} {kind:?} {window}");
                    assert!((re.hypot(im) - want).abs() < 1e-4 * want, "{context}: |X|");
                    let d = (im.atan2(re) - phase).rem_euclid(std::f64::consts::TAU);
                    assert!(d.min(std::f64::consts::TAU - d) < 1e-4, "{context}: arg X");
                }
            }
        }
    }
}

/// An engine with 4 KiB host-device chunks, so small batches still run through every pipeline
/// slot several times.
fn small_chunk_engine(dev: &'static fftd::fft::opencl::device::DeviceEntry) -> OpenClEngine<f32> {
    let options = OpenClOptions {
        chunk_bytes: Some(4096),
        ..Default::default()
    };
    OpenClEngine::<f32>::new(dev, options).expect("engine")
}

#[test]
fn pipelined_chunks_keep_every_frame_in_order() {
    let Some(dev) = common::test_device() else {
        return;
    };
    // 4 frames of 256 f32 per chunk: 17 chunks through the 3 pipeline slots
    let mut gpu = small_chunk_engine(dev);
    let mut cpu = CpuEngine::<f32>::new();
    for frames in [67, 1, 5] {
        check(
            &mut gpu,
            &mut cpu,
            &spec(256, InputKind::Real, WindowKind::Hann, Scale::Power),
            frames,
        );
    }
    check(
        &mut gpu,
        &mut cpu,
        &spec(4096, InputKind::Complex, WindowKind::Rect, Scale::Magnitude),
        3,
    );
    // a 16 MiB batch in the default 32 MiB chunk: the multi-threaded host copies in and out
    let mut gpu = OpenClEngine::<f32>::new(dev, OpenClOptions::default()).expect("engine");
    check(
        &mut gpu,
        &mut cpu,
        &spec(1024, InputKind::Real, WindowKind::Hamming, Scale::Db),
        4096,
    );
}

#[test]
fn pinned_batches_go_by_dma_and_equal_staged_ones() {
    let Some(dev) = common::test_device() else {
        return;
    };
    let mut gpu = small_chunk_engine(dev);
    let mut cpu = CpuEngine::<f32>::new();
    let pinned = gpu
        .pinned_memory()
        .expect("an OpenCL engine has pinned memory");
    for s in [
        spec(256, InputKind::Real, WindowKind::Hann, Scale::Power),
        spec(
            64,
            InputKind::Complex,
            WindowKind::Blackman,
            Scale::Magnitude,
        ),
    ] {
        let frames = 67;
        let input: Vec<f32> = common::signal(frames * s.values_per_frame(), 99);
        let (mut staged, mut want) = (Vec::new(), Vec::new());
        gpu.process(&s, &input, frames, &mut staged)
            .expect("staged");
        let p = gpu.last_profile().expect("profile");
        assert!(!p.direct_in && !p.direct_out, "ordinary memory is staged");
        cpu.process(&s, &input, frames, &mut want).expect("cpu");
        let e = common::max_rel_error(
            &staged.iter().map(|v| *v as f64).collect::<Vec<_>>(),
            &want.iter().map(|v| *v as f64).collect::<Vec<_>>(),
            s.bins(),
            false,
        );
        assert!(e <= 1e-4, "staged vs cpu: {e:e}");
        // the input one value into its pinned block: a slice inside a block counts as pinned
        let mut pin_in = HostBuf::with_capacity(input.len() + 1, Some(&pinned));
        assert!(pin_in.is_pinned());
        pin_in.extend_from_slice(&[0.0]);
        pin_in.extend_from_slice(&input);
        let mut pin_out = HostBuf::with_capacity(staged.len(), Some(&pinned));
        pin_out.set_len_for_overwrite(staged.len());
        let mut paged_out = vec![0.0f32; staged.len()];
        for (in_pinned, out_pinned) in [(true, true), (true, false), (false, true)] {
            let src: &[f32] = if in_pinned { &pin_in[1..] } else { &input };
            let dst: &mut [f32] = if out_pinned {
                &mut pin_out
            } else {
                &mut paged_out
            };
            dst.fill(f32::NAN);
            gpu.transform(&s, src, frames, dst).expect("transform");
            let p = gpu.last_profile().expect("profile");
            assert_eq!((p.direct_in, p.direct_out), (in_pinned, out_pinned));
            assert!(
                dst.iter()
                    .zip(&staged)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{:?} pinned in {in_pinned} out {out_pinned}: differs from the staged result",
                s.kind
            );
        }
    }
}

/// A pinned block is memory the process maps itself, marked to be left out of a forked child
/// (`VmFlags: dc` in /proc/self/smaps): the exit forks one (`left_behind`), and the kernel copies
/// pinned pages into a child at once, 0.1–0.4 s of a run's exit on an H200 (session 33). A block
/// of huge pages asks for them (`hg`); a small one maps ordinary pages, not 2 MiB more than it
/// needs.
#[test]
fn pinned_blocks_are_left_out_of_a_forked_child() {
    let Some(dev) = common::test_device() else {
        return;
    };
    let gpu = OpenClEngine::<f32>::new(dev, OpenClOptions::default()).expect("engine");
    let pinned = gpu
        .pinned_memory()
        .expect("an OpenCL engine has pinned memory");
    // a block of huge pages (4 MiB) and a small one (a warm-up's few KiB)
    let mut large = HostBuf::<f32>::with_capacity(1 << 20, Some(&pinned));
    let mut small = HostBuf::<f32>::with_capacity(1024, Some(&pinned));
    for (block, len) in [(&mut large, 1 << 20), (&mut small, 1024)] {
        assert!(block.is_pinned());
        block.set_len_for_overwrite(len);
    }
    let (large_bytes, large_flags) = mapping_of(large.as_ptr() as usize);
    let (small_bytes, small_flags) = mapping_of(small.as_ptr() as usize);
    for flags in [&large_flags, &small_flags] {
        assert!(
            flags.contains(&"dc".to_string()),
            "pinned block's mapping is copied into forked children: VmFlags {flags:?}"
        );
    }
    // (huge pages can be asked for only where the kernel has them)
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    assert!(large_bytes >= 4 << 20 && (!thp || large_flags.contains(&"hg".to_string())));
    assert!(
        small_bytes < 2 << 20 && !small_flags.contains(&"hg".to_string()),
        "a 4 KiB block maps {small_bytes} bytes with VmFlags {small_flags:?}"
    );
}

/// The size and `VmFlags` of this process's mapping that holds address `at` (/proc/self/smaps).
fn mapping_of(at: usize) -> (usize, Vec<String>) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut inside = None;
    for line in smaps.lines() {
        let range = line
            .split_whitespace()
            .next()
            .and_then(|r| r.split_once('-'));
        let bounds = range.and_then(|(a, b)| {
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        });
        match (bounds, line.strip_prefix("VmFlags:"), inside) {
            (Some((start, end)), _, _) => inside = (start <= at && at < end).then_some(end - start),
            (None, Some(flags), Some(bytes)) => {
                return (
                    bytes,
                    flags.split_whitespace().map(str::to_string).collect(),
                );
            }
            _ => {}
        }
    }
    panic!("no mapping of this process holds {at:#x}")
}

/// Overlapping frames held once (`FrameStep`, as the range readers write them for hop < frame):
/// the OpenCL engine forms the frames on the device; its spectra equal the CPU engine's on the
/// same frames packed back to back, on every kernel path (local, multi-pass, four-step), real
/// and complex, f32 and f64, hops of one sample, an odd hop and a quarter frame, and with
/// `--average` runs reduced on the device. The CPU engine's own strided path gives the same
/// values bit for bit as its packed one.
fn strided<T: Sample>(options: OpenClOptions, sizes: &[usize]) {
    use fftd::fft::{FrameStep, SegmentOp, Segments};
    let Some(mut gpu) = common::engine_with::<T>(options) else {
        return;
    };
    let mut cpu = CpuEngine::<T>::new();
    for (i, &n) in sizes.iter().enumerate() {
        for kind in [InputKind::Real, InputKind::Complex] {
            let s = spec(n, kind, WindowKind::Hann, Scale::ALL[i % Scale::ALL.len()]);
            for hop in [1, 3.min(n - 1), n / 4].into_iter().filter(|&h| h >= 1) {
                let frames = if n >= 1 << 14 { 5 } else { 33 };
                let step = hop * kind.width();
                let len = (frames - 1) * step + s.values_per_frame();
                let data: Vec<T> = common::signal(len, (n + hop) as u64);
                let strided = FrameStep {
                    data: &data,
                    count: frames,
                    step,
                };
                let packed = strided.packed(&s).expect("packs");
                let mut want = Vec::new();
                cpu.process(&s, &packed, frames, &mut want).expect("cpu");
                let mut cpu_strided = vec![T::zero(); want.len()];
                cpu.transform_strided(&s, strided, (None, None), &mut cpu_strided)
                    .expect("cpu strided");
                assert!(cpu_strided == want, "cpu strided differs n={n} hop={hop}");
                let mut got = vec![T::zero(); want.len()];
                gpu.transform_strided(&s, strided, (None, None), &mut got)
                    .unwrap_or_else(|e| panic!("opencl strided n={n} hop={hop}: {e}"));
                let f = |v: Vec<T>| v.into_iter().map(Sample::into_f64).collect::<Vec<f64>>();
                let e = common::spec_rel_error(&f(got), &f(want.clone()), &s);
                assert!(
                    e <= tol::<T>(),
                    "{} n={n} {kind:?} hop={hop}: {e:e}",
                    T::NAME
                );
                // power spectra in runs of 1, 2 and the rest, reduced to their means on the device
                let p = TransformSpec {
                    scale: Scale::Power,
                    ..s
                };
                let lengths = [1u32, 2, frames as u32 - 3];
                let runs = Segments {
                    lengths: &lengths,
                    op: SegmentOp::Mean,
                };
                let mut power = Vec::new();
                cpu.process(&p, &packed, frames, &mut power).expect("cpu");
                let mut want_runs = vec![T::zero(); 3 * p.values_out()];
                runs.reduce(&power, p.values_out(), &mut want_runs);
                let mut got_runs = vec![T::zero(); want_runs.len()];
                gpu.transform_strided(&p, strided, (None, Some(&runs)), &mut got_runs)
                    .unwrap_or_else(|e| panic!("opencl strided runs n={n}: {e}"));
                let e = common::spec_rel_error(&f(got_runs), &f(want_runs), &p);
                assert!(e <= 10.0 * tol::<T>(), "runs n={n} hop={hop}: {e:e}");
            }
        }
    }
}

#[test]
fn overlapping_frames_formed_on_the_device() {
    let sizes = [8, 64, 1024, 4096];
    strided::<f32>(OpenClOptions::default(), &sizes);
    strided::<f64>(OpenClOptions::default(), &sizes);
    let multipass = OpenClOptions {
        local_mem_limit: Some(64),
        ..Default::default()
    };
    strided::<f32>(multipass, &sizes);
    let fourstep = OpenClOptions {
        local_mem_limit: Some(16 << 10),
        ..Default::default()
    };
    strided::<f32>(fourstep, &[1 << 14, 1 << 15]);
}

/// A run of rows reduced on the device holds their mean, which f32 holds wherever the rows do:
/// power rows near 1e37 (noise of 5e17 at n = 64) in runs of 1, 7, 100 and 300 added past
/// f32's range and came back +inf. Now the device's means equal the host's f64 ones (within
/// f32's sums) and are finite; a run of rows that hold NaN stays NaN.
#[test]
fn device_runs_whose_sum_passes_f32_hold_their_mean() {
    use fftd::fft::{SegmentOp, Segments};
    let Some(mut gpu) = common::engine_with::<f32>(OpenClOptions::default()) else {
        return;
    };
    let mut cpu = CpuEngine::<f32>::new();
    let s = spec(64, InputKind::Real, WindowKind::Hann, Scale::Power);
    let lengths = [1u32, 7, 100, 300];
    let frames = lengths.iter().sum::<u32>() as usize;
    let mut input: Vec<f32> = common::signal(frames * 64, 41);
    input.iter_mut().for_each(|v| *v *= 5e17);
    input[64 * 200] = f32::NAN; // a NaN frame in the last run
    let mut power = Vec::new();
    cpu.process(&s, &input, frames, &mut power).expect("cpu");
    assert!(power.iter().any(|v| v.into_f64() * 100.0 > f32::MAX as f64));
    let runs = Segments {
        lengths: &lengths,
        op: SegmentOp::Mean,
    };
    let mut want = vec![0f32; lengths.len() * s.values_out()];
    runs.reduce(&power, s.values_out(), &mut want);
    let mut got = vec![0f32; want.len()];
    gpu.transform_segments(&s, &input, frames, None, &runs, &mut got)
        .expect("opencl runs");
    let (finite, last) = want.split_at(3 * s.values_out());
    assert!(got[finite.len()..]
        .iter()
        .zip(last)
        .all(|(g, w)| g.is_nan() == w.is_nan()));
    assert!(finite.iter().all(|v| v.is_finite()), "the host's means");
    assert!(
        got[..finite.len()].iter().all(|v| v.is_finite()),
        "the device's means"
    );
    let e = common::spec_rel_error(
        &common::f64s(got[..finite.len()].to_vec()),
        &common::f64s(finite.to_vec()),
        &s,
    );
    assert!(e <= 10.0 * tol::<f32>(), "{e:e}");
}
