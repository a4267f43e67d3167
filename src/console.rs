//! Reports for people (`fftd devices`, `fftd check`) written to stdout. A reader that closes the pipe
//! early (`| head`) is not an error; any other write failure is.

use crate::error::{FftdError, Result};
use std::io::Write;

pub(crate) fn print_report(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(FftdError::Runtime(format!("cannot write to stdout: {e}"))),
    }
}
