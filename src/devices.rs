//! `fftd devices`: what fftd can compute on and capture from.

use crate::error::Result;

pub fn print_devices() -> Result<()> {
    println!("OpenCL: (listing arrives with the OpenCL engine)");
    println!();
    print!("{}", crate::source::mic::describe_inputs());
    Ok(())
}
