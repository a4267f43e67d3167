//! `--format f32`: raw little-endian float32 values, exactly bins-per-frame per frame, no header
//! (`numpy.fromfile(path, '<f4').reshape(-1, bins)`). f64 results are rounded to f32 (`as f32`,
//! here or, in an f64 run on a device, there: `fft::carry`). With
//! `--scale complex`, re, im of each bin interleaved (`numpy.fromfile(path, '<c8')`).

use super::{Encoder, Sample, SpectrumRow};

pub(crate) struct F32Encoder;

impl<T: Sample> Encoder<T> for F32Encoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        super::encode_le(row.values, false, out);
    }

    fn row_bytes(&self, values: usize) -> Option<usize> {
        Some(values * 4)
    }

    fn writes_f32(&self) -> bool {
        true
    }

    fn encode_into(&self, row: &SpectrumRow<'_, T>, out: &mut [u8]) {
        super::write_le(row.values, false, out);
    }
}
