//! `--format npy`: a NumPy v1.0 .npy file holding a C-order 2-D array (frames × bins), dtype `<f4`
//! (f32 precision) or `<f8` (f64). The header is written first with room for any frame count and
//! rewritten with the real count when the stream ends, so the file must be seekable.

use super::destination::Destination;
use super::{Sample, SpectrumRow, SpectrumWriter};
use std::io::{self, Write};

/// Header length including magic and padding: a multiple of 64 with room for a 20-digit count.
const HEADER_LEN: usize = 128;

pub struct NpyWriter {
    dest: Destination,
    f64: bool,
    frames: u64,
    bins: Option<usize>,
    bytes: Vec<u8>,
}

impl NpyWriter {
    pub fn new(mut dest: Destination, f64: bool) -> io::Result<Self> {
        if matches!(dest, Destination::Stdout(_)) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "npy output needs a file, not stdout",
            ));
        }
        dest.write_all(&header(f64, 0, 0))?;
        Ok(NpyWriter {
            dest,
            f64,
            frames: 0,
            bins: None,
            bytes: Vec::new(),
        })
    }
}

/// The magic, version, header length and the padded dict describing the array.
fn header(f64: bool, frames: u64, bins: usize) -> Vec<u8> {
    let descr = if f64 { "<f8" } else { "<f4" };
    let dict =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({frames}, {bins}), }}");
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&((HEADER_LEN - 10) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(HEADER_LEN - 1, b' ');
    out.push(b'\n');
    out
}

impl<T: Sample> SpectrumWriter<T> for NpyWriter {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        match self.bins {
            None => self.bins = Some(row.values.len()),
            Some(b) if b != row.values.len() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "stream {} has {} bins per frame but this .npy array has {b} columns: use --output-dir",
                        row.stream.id,
                        row.values.len()
                    ),
                ))
            }
            Some(_) => {}
        }
        super::encode_le(row.values, self.f64, &mut self.bytes);
        self.frames += 1;
        self.dest.write_all(&self.bytes)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.dest.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.dest.flush()?;
        self.dest.seek_start()?;
        self.dest
            .write_all(&header(self.f64, self.frames, self.bins.unwrap_or(0)))?;
        self.dest.flush()
    }
}
