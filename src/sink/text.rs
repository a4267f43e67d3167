//! `--format text`: one line per frame, values separated by single spaces, each the shortest
//! decimal that reads back to the same float (`numpy.loadtxt` reads it). With `--scale complex`
//! a line holds re, im of each bin in turn: `re0 im0 re1 im1 …`.

use super::{push_numbers, Encoder, Sample, SpectrumRow};

pub struct TextEncoder;

impl<T: Sample> Encoder<T> for TextEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        push_numbers(out, row.values, b' ');
        out.push(b'\n');
    }
}
