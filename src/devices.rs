//! `fftd devices`: what fftd can compute on (OpenCL platforms and devices) and capture from
//! (audio inputs).

use crate::error::Result;

pub fn print_devices() -> Result<()> {
    print!("{}", crate::fft::opencl::device::describe_devices());
    println!();
    print!("{}", crate::source::mic::describe_inputs());
    Ok(())
}
