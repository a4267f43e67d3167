//! Chooses the engine for each batch. Until the OpenCL engine lands this routes everything to the
//! CPU engine; `build_engines` is the one place the pipeline asks for per-worker engines.

use super::cpu::CpuEngine;
use super::{Engine, Sample};
use crate::error::FftdError;

/// `--device auto|cpu|gpu|opencl:P:D`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Gpu,
    OpenCl { platform: usize, device: usize },
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "gpu" => Ok(DeviceChoice::Gpu),
            _ => {
                let parts: Vec<&str> = s.split(':').collect();
                match parts.as_slice() {
                    ["opencl", p, d] => match (p.parse(), d.parse()) {
                        (Ok(platform), Ok(device)) => Ok(DeviceChoice::OpenCl { platform, device }),
                        _ => Err(format!("invalid device '{s}': expected opencl:PLATFORM:DEVICE with two indices")),
                    },
                    _ => Err(format!(
                        "invalid device '{s}': expected auto, cpu, gpu or opencl:PLATFORM:DEVICE"
                    )),
                }
            }
        }
    }
}

/// One engine per FFT worker thread.
pub fn build_engines<T: Sample>(
    choice: &DeviceChoice,
    workers: usize,
) -> Result<Vec<Box<dyn Engine<T>>>, FftdError> {
    match choice {
        DeviceChoice::Auto | DeviceChoice::Cpu => Ok((0..workers)
            .map(|_| Box::new(CpuEngine::<T>::new()) as Box<dyn Engine<T>>)
            .collect()),
        DeviceChoice::Gpu | DeviceChoice::OpenCl { .. } => Err(FftdError::Runtime(
            "no usable OpenCL device: this build has no OpenCL engine yet".into(),
        )),
    }
}
