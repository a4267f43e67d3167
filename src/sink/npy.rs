//! `--format npy`: a NumPy v1.0 .npy file holding a C-order 2-D array (frames × bins), dtype `<f4`
//! (f32 precision) or `<f8` (f64). The header is written first with room for any frame count and
//! rewritten with the real count when the output is finished, so the output must be a file.

use super::{Encoder, Sample, SpectrumRow, StreamMeta};

/// Header length including magic and padding: a multiple of 64 with room for a 20-digit count.
const HEADER_LEN: usize = 128;

pub struct NpyEncoder {
    /// `<f8` values (else `<f4`).
    pub f64: bool,
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

impl<T: Sample> Encoder<T> for NpyEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        super::encode_le(row.values, self.f64, out);
    }

    fn preamble(&self, _first: &StreamMeta, _n: usize) -> Vec<u8> {
        header(self.f64, 0, 0)
    }

    fn width_error(&self, stream: usize, bins: usize, fixed: usize) -> Option<String> {
        Some(format!(
            "stream {stream} has {bins} bins per frame but this .npy array has {fixed} columns: use --output-dir"
        ))
    }

    fn final_header(&self, frames: u64, bins: usize) -> Option<Vec<u8>> {
        Some(header(self.f64, frames, bins))
    }

    fn row_bytes(&self, values: usize) -> Option<usize> {
        Some(values * if self.f64 { 8 } else { 4 })
    }

    fn encode_into(&self, row: &SpectrumRow<'_, T>, out: &mut [u8]) {
        super::write_le(row.values, self.f64, out);
    }
}
