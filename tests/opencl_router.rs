//! The router on a real OpenCL device (PoCL in CI): `gpu` and `auto` give the CPU engine's
//! results at every frame size (powers of two or not), an injected fault mid-stream loses,
//! duplicates and reorders nothing, the calibration is cached, and `compare_engines` agrees.

use crate::opencl_common;
use opencl_common as common;

use fftd::fft::compare::{compare_engines, default_tolerance};
use fftd::fft::cpu::CpuEngine;
use fftd::fft::fault::Fault;
use fftd::fft::opencl::device::describe_devices;
use fftd::fft::router::{build_engines_with, DeviceChoice, RouterOptions};
use fftd::fft::{Carry, Engine, FrameStep, Samples, Scale, TransformSpec};
use fftd::types::InputKind;
use fftd::window::WindowKind;

fn spec(n: usize) -> TransformSpec {
    TransformSpec {
        n,
        kind: InputKind::Real,
        window: WindowKind::Hann,
        scale: Scale::Magnitude,
        rate: 8000.0,
    }
}

fn max_err(a: &[f32], b: &[f32], bins: usize) -> f64 {
    let a: Vec<f64> = a.iter().map(|v| *v as f64).collect();
    let b: Vec<f64> = b.iter().map(|v| *v as f64).collect();
    common::max_rel_error(&a, &b, bins, false)
}

#[test]
fn gpu_choice_matches_cpu_at_every_size() {
    if common::test_device().is_none() {
        return;
    }
    let mut opts = RouterOptions::new(DeviceChoice::Gpu, 2);
    opts.opencl = Default::default();
    let mut engines = build_engines_with::<f32>(&opts).expect("gpu engines");
    assert_eq!(engines.len(), 2);
    assert!(
        engines[0].name().starts_with("opencl:"),
        "{}",
        engines[0].name()
    );
    let mut cpu = CpuEngine::<f32>::new();
    for n in [1024usize, 1000, 6] {
        let s = spec(n);
        let input: Vec<f32> = common::signal(5 * n, 3);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        engines[1].process(&s, &input, 5, &mut a).expect("routed");
        cpu.process(&s, &input, 5, &mut b).expect("cpu");
        assert!(max_err(&a, &b, s.bins()) < 1e-4, "n={n}");
        if n == 1000 {
            // not a power of two: the OpenCL engine's mixed-radix passes, not the CPU engine
            assert_ne!(a, b, "n=1000 must run on the OpenCL engine");
        }
    }
}

#[test]
fn injected_fault_mid_stream_loses_nothing() {
    if common::test_device().is_none() {
        return;
    }
    let mut opts = RouterOptions::new(DeviceChoice::Gpu, 1);
    opts.opencl.fault = Some(Fault::error_after(3));
    let mut engines = build_engines_with::<f32>(&opts).expect("gpu engines");
    let mut cpu = CpuEngine::<f32>::new();
    let s = spec(512);
    for batch in 0..8u64 {
        let frames = 1 + (batch as usize * 5) % 9;
        let input: Vec<f32> = common::signal(frames * s.n, 100 + batch);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        engines[0]
            .process(&s, &input, frames, &mut a)
            .expect("routed");
        cpu.process(&s, &input, frames, &mut b).expect("cpu");
        assert_eq!(
            a.len(),
            frames * s.bins(),
            "batch {batch}: frames lost or duplicated"
        );
        assert!(max_err(&a, &b, s.bins()) < 1e-4, "batch {batch} differs");
        if batch >= 3 {
            assert_eq!(a, b, "batch {batch} must come from the CPU after the fault");
        }
    }
    assert_eq!(engines[0].name(), "cpu");
}

/// A device engine runs once before its lane takes batches (`worker::warm_up`: PoCL compiles
/// its kernels there, not inside the first batch the stall watch times); that run is no batch:
/// an injected fault neither strikes it nor counts it.
#[test]
fn a_warm_up_is_no_batch() {
    if common::test_device().is_none() {
        return;
    }
    let mut opts = RouterOptions::new(DeviceChoice::Gpu, 1);
    opts.opencl.fault = Some(Fault::error_after(1));
    let mut engines = build_engines_with::<f32>(&opts).expect("gpu engines");
    let s = spec(512);
    let zeros = vec![0f32; s.n];
    let mut out = vec![f32::NAN; s.values_out()];
    for _ in 0..2 {
        let frame = Samples::Run(FrameStep {
            data: &zeros,
            count: 1,
            step: s.n,
        });
        let warmed = engines[0].warm_up(&s, frame, Carry::Run, (None, None), &mut out);
        warmed.expect("warm-up");
    }
    assert!(out.iter().all(|v| *v == 0.0), "zeros in, zeros out");
    let input: Vec<f32> = common::signal(3 * s.n, 7);
    let mut rows = Vec::new();
    engines[0].process(&s, &input, 3, &mut rows).expect("first");
    assert!(
        engines[0].name().starts_with("opencl:"),
        "the first batch on the device, after two warm-ups: {}",
        engines[0].name()
    );
    engines[0]
        .process(&s, &input, 3, &mut rows)
        .expect("second");
    assert_eq!(engines[0].name(), "cpu", "the fault after one batch");
}

#[test]
fn auto_calibrates_once_and_matches_cpu() {
    if common::test_device().is_none() {
        return;
    }
    let mut engines =
        build_engines_with::<f32>(&RouterOptions::new(DeviceChoice::Auto, 1)).expect("auto");
    let dir = fftd::fft::calibrate::cache_dir().expect("cache dir");
    let cached = calibration_files(&dir);
    assert!(
        !cached.is_empty(),
        "no calibration cached in {}",
        dir.display()
    );
    // A second start takes the cached calibration: no calibration file is written again (not a
    // timing: how long calibrating takes depends on how busy the machine is).
    let _again =
        build_engines_with::<f32>(&RouterOptions::new(DeviceChoice::Auto, 1)).expect("auto");
    assert_eq!(
        calibration_files(&dir),
        cached,
        "cached calibration not used"
    );
    // auto's lanes: the CPU engines, and the device's when its calibration finds it faster
    // somewhere; every engine gives the CPU engine's results
    assert!(engines[0].name() == "cpu", "{}", engines[0].name());
    let mut cpu = CpuEngine::<f32>::new();
    for engine in engines.iter_mut() {
        for n in [64usize, 4096] {
            let s = spec(n);
            let input: Vec<f32> = common::signal(16 * n, 9);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            engine.process(&s, &input, 16, &mut a).expect("auto");
            cpu.process(&s, &input, 16, &mut b).expect("cpu");
            assert!(max_err(&a, &b, s.bins()) < 1e-4, "{} n={n}", engine.name());
        }
    }
}

#[test]
fn compare_engines_reports_agreement() {
    if common::test_device().is_none() {
        return;
    }
    for scale in [Scale::Magnitude, Scale::Db, Scale::Density] {
        let s = TransformSpec {
            scale,
            kind: InputKind::Complex,
            ..spec(2048)
        };
        let input: Vec<f32> = common::signal(4 * s.values_per_frame(), 5);
        let r = compare_engines(
            &DeviceChoice::Gpu,
            &s,
            &input,
            4,
            default_tolerance::<f32>(),
        )
        .expect("compare");
        assert_eq!(r.values, 4 * 2048);
        assert!(r.passed(), "{r:?}");
    }
}

#[test]
fn devices_are_described() {
    let Some(dev) = common::test_device() else {
        return;
    };
    let text = describe_devices();
    assert!(text.contains(&dev.info.name), "{text}");
    assert!(text.contains("opencl:0:0"), "{text}");
    assert!(text.contains("fp64"), "{text}");
}

/// The calibration files in `dir` with their modification times (a file written again, by a
/// rename over it, has a new one).
fn calibration_files(dir: &std::path::Path) -> Vec<(std::ffi::OsString, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("calibration-"))
                .filter_map(|e| Some((e.file_name(), e.metadata().ok()?.modified().ok()?)))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}
