//! `--format f32`: raw little-endian float32 values, exactly bins-per-frame per frame, no header
//! (`numpy.fromfile(path, '<f4').reshape(-1, bins)`). f64 results are rounded to f32.

use super::destination::Destination;
use super::{Sample, SpectrumRow, SpectrumWriter};
use std::io::{self, Write};

pub struct F32Writer {
    dest: Destination,
    bytes: Vec<u8>,
}

impl F32Writer {
    pub fn new(dest: Destination) -> Self {
        F32Writer {
            dest,
            bytes: Vec::new(),
        }
    }
}

impl<T: Sample> SpectrumWriter<T> for F32Writer {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        super::encode_le(row.values, false, &mut self.bytes);
        self.dest.write_all(&self.bytes)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.dest.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.dest.flush()
    }
}
