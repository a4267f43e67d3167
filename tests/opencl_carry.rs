//! f32 across the bus in an f64 run (issue 41, `fft::carry`) on a real OpenCL device (PoCL in
//! CI): samples held as f32 widen on the device to exactly the spectra of the same samples held
//! as f64, bit for bit; rows asked for as f32 come back as each f64 value `as f32`, bit for bit;
//! in ordinary and in pinned memory, packed and overlapping frames, through several pipeline
//! chunks, with every scale. The CPU engine and a routed engine whose device fails widen on the
//! host and answer rows in f64.

use crate::opencl_common;
use opencl_common as common;

use fftd::fft::carry::{f32s, f32s_mut};
use fftd::fft::cpu::CpuEngine;
use fftd::fft::fault::Fault;
use fftd::fft::opencl::{OpenClEngine, OpenClOptions};
use fftd::fft::router::{build_engines_with, DeviceChoice, RouterOptions};
use fftd::fft::{Carry, Engine, FrameStep, HostBuf, Samples, Scale, TransformSpec};
use fftd::types::InputKind;
use fftd::window::WindowKind;

/// Frames of `s` `hop` samples apart: their f32 samples, and the same values as f64.
fn samples(s: &TransformSpec, frames: usize, hop: usize) -> (usize, Vec<f32>, Vec<f64>) {
    let step = hop * s.kind.width();
    let len = (frames - 1) * step + s.values_per_frame();
    let narrow: Vec<f32> = common::signal(len, (s.n + hop) as u64);
    let wide = narrow.iter().map(|&v| f64::from(v)).collect();
    (step, narrow, wide)
}

/// Whether two slices hold the same bits.
fn same_bits<V: Copy + Into<f64>>(a: &[V], b: &[V]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (*x).into().to_bits() == (*y).into().to_bits())
}

#[test]
fn f32_samples_and_rows_cross_as_f32_and_equal_the_f64_route_bit_for_bit() {
    let Some(dev) = common::test_device() else {
        return;
    };
    // 4 KiB chunks: every batch goes through the pipeline slots several times
    let options = OpenClOptions {
        chunk_bytes: Some(4096),
        ..Default::default()
    };
    let mut gpu = OpenClEngine::<f64>::new(dev, options).expect("engine");
    if gpu
        .supports(&common::spec(
            8,
            InputKind::Real,
            WindowKind::Hann,
            Scale::Magnitude,
        ))
        .is_err()
    {
        eprintln!("no f64 on {}: skipped", dev.info.name);
        return;
    }
    let pinned = gpu
        .pinned_memory()
        .expect("an OpenCL engine has pinned memory");
    let cases = [
        (256, InputKind::Real, 256),
        (256, InputKind::Real, 64),
        (100, InputKind::Complex, 30),
    ];
    for (i, &(n, kind, hop)) in cases.iter().enumerate() {
        let s = common::spec(n, kind, WindowKind::Hann, Scale::ALL[i % Scale::ALL.len()]);
        let frames = 37;
        let (step, narrow, wide) = samples(&s, frames, hop);
        let f64_frames = FrameStep {
            data: &wide,
            count: frames,
            step,
        };
        let mut want = vec![0.0f64; frames * s.values_out()];
        gpu.transform_strided(&s, f64_frames, (None, None), &mut want)
            .expect("f64 route");
        let want_f32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
        // the samples in pinned memory too (f32 in the first half of an f64 block's bytes)
        let mut pin_in = HostBuf::with_capacity(narrow.len(), Some(&pinned));
        pin_in.set_len_for_overwrite(narrow.len());
        f32s_mut(&mut pin_in)[..narrow.len()].copy_from_slice(&narrow);
        let mut pin_out = HostBuf::with_capacity(want.len(), Some(&pinned));
        pin_out.set_len_for_overwrite(want.len());
        let mut paged_out = vec![0.0f64; want.len()];
        for in_pinned in [false, true] {
            let data = if in_pinned {
                &f32s(&pin_in)[..narrow.len()]
            } else {
                &narrow[..]
            };
            let held = Samples::F32(FrameStep {
                data,
                count: frames,
                step,
            });
            for (rows, out_pinned) in [(Carry::Run, false), (Carry::F32, false), (Carry::F32, true)]
            {
                let out: &mut [f64] = if out_pinned {
                    &mut pin_out
                } else {
                    &mut paged_out
                };
                out.fill(f64::NAN);
                let came = gpu
                    .transform_carried(&s, held, rows, (None, None), out)
                    .unwrap_or_else(|e| panic!("n={n} hop={hop}: {e}"));
                assert_eq!(came, rows, "the device answers rows as asked");
                let p = gpu.last_profile().expect("profile");
                assert_eq!(
                    (p.direct_in, p.direct_out),
                    (in_pinned, out_pinned),
                    "n={n}"
                );
                let what =
                    format!("n={n} {kind:?} hop={hop} pinned in {in_pinned} out {out_pinned}");
                match came {
                    Carry::Run => assert!(same_bits(out, &want), "{what}: f64 rows differ"),
                    Carry::F32 => assert!(
                        same_bits(&f32s(out)[..want.len()], &want_f32),
                        "{what}: f32 rows are not the f64 rows as f32"
                    ),
                }
            }
        }
    }
}

#[test]
fn engines_without_a_device_path_widen_on_the_host() {
    let Some(dev) = common::test_device() else {
        return;
    };
    let s = common::spec(128, InputKind::Real, WindowKind::Hann, Scale::Magnitude);
    let frames = 20;
    let (step, narrow, wide) = samples(&s, frames, 128);
    let held = Samples::F32(FrameStep {
        data: &narrow,
        count: frames,
        step,
    });
    let mut cpu = CpuEngine::<f64>::new();
    let mut want = vec![0.0f64; frames * s.values_out()];
    let f64_frames = FrameStep {
        data: &wide,
        count: frames,
        step,
    };
    cpu.transform_strided(&s, f64_frames, (None, None), &mut want)
        .expect("cpu");
    let mut got = vec![f64::NAN; want.len()];
    let came = cpu
        .transform_carried(&s, held, Carry::F32, (None, None), &mut got)
        .expect("cpu");
    assert_eq!(
        came,
        Carry::Run,
        "the CPU engine answers rows in the run's type"
    );
    assert!(same_bits(&got, &want));
    // a routed engine whose device fails after one batch: the rest on its CPU engine, which
    // widens on the host (no other lane to hand the batch to)
    let mut opts = RouterOptions::new(DeviceChoice::Gpu, 1);
    opts.opencl = OpenClOptions {
        fault: Some(Fault::error_after(1)),
        ..Default::default()
    };
    let mut engines = build_engines_with::<f64>(&opts).expect("gpu engines");
    let routed = &mut engines[0];
    if OpenClEngine::<f64>::new(dev, OpenClOptions::default())
        .is_ok_and(|g| g.supports(&s).is_err())
    {
        return; // no f64 on this device
    }
    let first = routed
        .transform_carried(&s, held, Carry::F32, (None, None), &mut got)
        .expect("device");
    assert_eq!(first, Carry::F32, "the device's batch");
    let on_device: Vec<f32> = f32s(&got)[..want.len()].to_vec();
    let second = routed
        .transform_carried(&s, held, Carry::F32, (None, None), &mut got)
        .expect("cpu");
    assert_eq!(
        second,
        Carry::Run,
        "after the fault: the CPU engine, rows in f64"
    );
    assert!(
        same_bits(&got, &want),
        "the CPU engine's result after the fault"
    );
    let e = common::max_rel_error(
        &on_device.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        &want,
        s.values_out(),
        false,
    );
    assert!(e < 1e-6, "device rows against the CPU engine's: {e:e}");
}
