//! `--format text`: one line per frame, values separated by single spaces, each the shortest
//! decimal that reads back to the same float (`numpy.loadtxt` reads it); NaN and infinities as
//! `nan`, `inf`, `-inf` (`types::number`). With `--scale complex`
//! a line holds re, im of each bin in turn: `re0 im0 re1 im1 …`.

use super::{Encoder, Sample, SpectrumRow};
use crate::types::number::{push_all, Syntax};

pub(crate) struct TextEncoder;

impl<T: Sample> Encoder<T> for TextEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        push_all(out, row.values, b' ', Syntax::Text);
        out.push(b'\n');
    }
}
