//! `--format csv`: a header `stream,frame,time_s,` followed by each bin's frequency in Hz (from
//! the output's first row), then one row per frame. Streams sharing one file must have the same
//! bins (same frame size and kind).

use super::{push_number, push_numbers, Encoder, Sample, SpectrumRow, StreamMeta};
use std::io::Write;

pub struct CsvEncoder;

impl<T: Sample> Encoder<T> for CsvEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        // writing into a Vec cannot fail
        let _ = write!(out, "{},{},", row.stream.id, row.frame);
        push_number(out, row.time_s);
        out.push(b',');
        push_numbers(out, row.values, b',');
        out.push(b'\n');
    }

    fn preamble(&self, first: &StreamMeta, n: usize) -> Vec<u8> {
        let mut out = b"stream,frame,time_s,".to_vec();
        push_numbers(&mut out, &first.frequencies(n), b',');
        out.push(b'\n');
        out
    }

    fn width_error(&self, stream: usize, bins: usize, fixed: usize) -> Option<String> {
        Some(format!(
            "stream {stream} has {bins} bins per frame but the CSV header has {fixed}: write streams of different frame sizes with --output-dir"
        ))
    }
}
