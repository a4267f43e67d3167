//! `fftd devices`: what fftd can compute on (OpenCL platforms and devices) and capture from
//! (audio inputs).

use crate::error::Result;

pub fn print_devices() -> Result<()> {
    crate::console::print_report(&format!(
        "{}\n{}",
        crate::fft::opencl::device::describe_devices(),
        crate::source::mic::describe_inputs()
    ))
}
