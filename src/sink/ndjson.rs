//! `--format ndjson`: one JSON object per line and frame:
//! `{"stream":0,"frame":12,"time_s":0.25,"bins":[...]}`.

use super::{push_number, push_numbers, Encoder, Sample, SpectrumRow};
use std::io::Write;

pub struct NdjsonEncoder;

impl<T: Sample> Encoder<T> for NdjsonEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        // writing into a Vec cannot fail
        let _ = write!(
            out,
            "{{\"stream\":{},\"frame\":{},\"time_s\":",
            row.stream.id, row.frame
        );
        push_number(out, row.time_s);
        out.extend_from_slice(b",\"bins\":[");
        push_numbers(out, row.values, b',');
        out.extend_from_slice(b"]}\n");
    }
}
