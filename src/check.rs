//! `fftd check`: runs the same frames through the CPU engine and the OpenCL engine and compares.

use crate::config::Settings;
use crate::error::{FftdError, Result};

pub fn run_check(_settings: &Settings, _tolerance: f64) -> Result<()> {
    Err(FftdError::Runtime(
        "fftd check needs the OpenCL engine".into(),
    ))
}
