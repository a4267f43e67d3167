//! `fftd devices`: what fftd can compute on (OpenCL platforms and devices, with each device's
//! measured rate and share of the work under `--device gpu:all` when a calibration is cached)
//! and capture from (audio inputs, SoapySDR receivers).

use crate::error::Result;
use crate::fft::calibrate::{Calibration, CalibrationKey};
use crate::fft::opencl::device::{self, DeviceEntry};
use std::fmt::Write as _;

/// The frame size and batch length the rates are given for (the pipeline's default batch).
const RATE_N: usize = 4096;
const RATE_FRAMES: usize = (1 << 18) / RATE_N;

pub fn print_devices() -> Result<()> {
    crate::console::print_report(&format!(
        "{}{}\n{}\n{}",
        device::describe_devices(),
        describe_rates(),
        crate::source::mic_device::describe_inputs(),
        crate::source::soapy::describe_devices()
    ))
}

/// The devices `--device gpu:all` spreads batches over: every GPU-type device, else the best.
fn gpu_all_devices() -> Vec<&'static DeviceEntry> {
    let all = device::all_devices();
    let gpus: Vec<_> = all.iter().copied().filter(|d| d.info.is_gpu).collect();
    match gpus.is_empty() {
        true => device::best_device().into_iter().collect(),
        false => gpus,
    }
}

/// (OpenCL, CPU engine) frames per second at `RATE_N` from `entry`'s cached f32 calibration.
fn measured_rates(entry: &DeviceEntry) -> Option<(f64, f64)> {
    let cal = Calibration::load(&CalibrationKey::new::<f32>(&entry.info))?;
    let (cpu_s, gpu_s) = cal.predict(RATE_N, RATE_FRAMES);
    let rate = |s: f64| RATE_FRAMES as f64 / s.max(f64::MIN_POSITIVE);
    Some((rate(gpu_s), rate(cpu_s)))
}

/// Each device's measured rate (from its cached calibration) and its share under `gpu:all`.
fn describe_rates() -> String {
    let devices = device::all_devices();
    if devices.is_empty() {
        return String::new();
    }
    let gpu_all = gpu_all_devices();
    let spread: Vec<Option<f64>> = gpu_all
        .iter()
        .map(|d| measured_rates(d).map(|r| r.0))
        .collect();
    let total: Option<f64> = spread.iter().copied().sum();
    let mut s = format!(
        "Measured rates (cached calibrations, f32, {RATE_N}-point frames in batches of {RATE_FRAMES}, host to host):\n"
    );
    let mut any = false;
    for d in &devices {
        let Some((opencl, cpu)) = measured_rates(d) else {
            continue;
        };
        any = true;
        let share = match (gpu_all.iter().any(|g| std::ptr::eq(*g, *d)), total) {
            (false, _) => "not used by gpu:all".to_string(),
            (true, Some(t)) => format!("{:.0}% of the work under gpu:all", 100.0 * opencl / t),
            (true, None) => "an equal share under gpu:all (not every device is calibrated)".into(),
        };
        let _ = writeln!(
            s,
            "  {}  {:.3} M frames/s (CPU engine: {:.3} M frames/s per worker); {share}",
            d.info.address(),
            opencl * 1e-6,
            cpu * 1e-6
        );
    }
    if !any {
        s.push_str("  none cached: `fftd bench --calibrate --device gpu:all` measures each device (live auto measures the device it opens on first use)\n");
    }
    s
}
