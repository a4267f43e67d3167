//! `--format npy`: a NumPy v1.0 .npy file holding a C-order 2-D array (frames × bins), dtype `<f4`
//! (f32 precision) or `<f8` (f64); with `--scale complex` `<c8` (complex64) or `<c16`
//! (complex128), each element re then im. The header is written first with room for any frame
//! count and rewritten with the real count when the output is finished, so the output must be a
//! file.

use super::{Encoder, Sample, SpectrumRow};

use crate::types::StreamMeta;

/// Header length including magic and padding: a multiple of 64 with room for a 20-digit count.
const HEADER_LEN: usize = 128;

pub(crate) struct NpyEncoder {
    /// `<f8` values (else `<f4`).
    pub f64: bool,
    /// Complex elements, re and im of each bin (`--scale complex`).
    pub complex: bool,
}

impl NpyEncoder {
    /// The array's dtype.
    fn descr(&self) -> &'static str {
        match (self.complex, self.f64) {
            (false, false) => "<f4",
            (false, true) => "<f8",
            (true, false) => "<c8",
            (true, true) => "<c16",
        }
    }
}

/// The magic, version, header length and the padded dict describing the array.
fn header(descr: &str, frames: u64, bins: usize) -> Vec<u8> {
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
        header(self.descr(), 0, 0)
    }

    fn width_error(&self, stream: usize, bins: usize, fixed: usize) -> Option<String> {
        Some(format!(
            "stream {stream} has {bins} bins per frame but this .npy array has {fixed} columns: use --output-dir"
        ))
    }

    fn final_header(&self, frames: u64, bins: usize) -> Option<Vec<u8>> {
        Some(header(self.descr(), frames, bins))
    }

    fn row_bytes(&self, values: usize) -> Option<usize> {
        Some(values * if self.f64 { 8 } else { 4 })
    }

    fn writes_f32(&self) -> bool {
        !self.f64
    }

    fn encode_into(&self, row: &SpectrumRow<'_, T>, out: &mut [u8]) {
        super::write_le(row.values, self.f64, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complex_arrays_are_complex64_or_complex128() {
        for (f64, complex, descr) in [
            (false, false, "<f4"),
            (true, false, "<f8"),
            (false, true, "<c8"),
            (true, true, "<c16"),
        ] {
            let encoder = NpyEncoder { f64, complex };
            let head = Encoder::<f32>::final_header(&encoder, 3, 5).expect("header");
            assert_eq!(head.len(), HEADER_LEN);
            let text = String::from_utf8_lossy(&head);
            assert!(text.contains(&format!("'descr': '{descr}'")), "{text}");
            assert!(text.contains("'shape': (3, 5)"), "{text}");
        }
    }
}
