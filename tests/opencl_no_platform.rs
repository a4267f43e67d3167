//! With no OpenCL platform (`OCL_ICD_VENDORS` pointing at an empty folder, set before the first
//! enumeration of this process): `auto` starts fast on the CPU engine with identical output,
//! `--device gpu` is a clear runtime error, and `describe_devices` says there is no OpenCL.
//! This is its own test binary so the variable is set before anything enumerates platforms.

use fftd::fft::cpu::CpuEngine;
use fftd::fft::router::{build_engines, DeviceChoice};
use fftd::fft::{Engine, Scale, TransformSpec};
use fftd::types::InputKind;
use fftd::window::WindowKind;
use std::sync::Once;

static ENV: Once = Once::new();

fn no_opencl() {
    ENV.call_once(|| {
        let empty =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/empty-icd-vendors");
        std::fs::create_dir_all(&empty).expect("create empty vendors dir");
        std::env::set_var("OCL_ICD_VENDORS", &empty);
        std::env::set_var("FFTD_CACHE_DIR", empty.join("cache"));
    });
}

#[test]
fn auto_falls_back_to_cpu_fast_with_identical_output() {
    no_opencl();
    let started = std::time::Instant::now();
    let mut engines = build_engines::<f32>(&DeviceChoice::Auto, 2).expect("auto without OpenCL");
    let elapsed = started.elapsed();
    // Without a platform the lookup fails in well under a millisecond; a binding that retries
    // (ocl sleeps 5 x 2 s) would take 10 s. 3 s tells the two apart on a fully busy machine.
    assert!(
        elapsed.as_secs_f64() < 3.0,
        "start-up without OpenCL took {elapsed:?}"
    );
    assert_eq!(engines.len(), 2);
    let s = TransformSpec {
        n: 256,
        kind: InputKind::Real,
        window: WindowKind::Hann,
        scale: Scale::Db,
        rate: 1.0,
    };
    let input: Vec<f32> = (0..256 * 3)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    engines[0].process(&s, &input, 3, &mut a).expect("auto");
    CpuEngine::<f32>::new()
        .process(&s, &input, 3, &mut b)
        .expect("cpu");
    assert_eq!(a, b);
}

#[test]
fn device_gpu_without_opencl_is_a_clear_error() {
    no_opencl();
    let err = match build_engines::<f32>(&DeviceChoice::Gpu, 1) {
        Ok(_) => panic!("--device gpu must fail without OpenCL"),
        Err(e) => e,
    };
    assert_eq!(err.exit_code(), 1);
    let msg = err.to_string();
    assert!(msg.contains("no usable OpenCL device"), "{msg}");
    let err = build_engines::<f32>(
        &DeviceChoice::OpenCl {
            platform: 0,
            device: 0,
        },
        1,
    );
    assert!(err.is_err());
}

#[test]
fn devices_say_there_is_no_opencl() {
    no_opencl();
    let text = fftd::fft::opencl::device::describe_devices();
    assert!(text.starts_with("OpenCL: none"), "{text}");
}
