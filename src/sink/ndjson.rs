//! `--format ndjson`: one JSON object per line and frame:
//! `{"stream":0,"frame":12,"time_s":0.25,"bins":[...]}`; with `--scale complex` each bin is a
//! `[re,im]` pair: `"bins":[[re0,im0],[re1,im1],...]`. JSON has no NaN or infinity: such a
//! value is `null` (`types::number`). When the input's centre frequency is known (`--center-freq`,
//! SigMF) each row carries it after `time_s`: `"center_hz":100000000.0` (its own capture's centre
//! for a retuned recording; `null` for a capture that gives none).

use super::{Encoder, Sample, SpectrumRow};
use crate::types::number::{push, push_all, Syntax};
use std::io::Write;

pub(crate) struct NdjsonEncoder {
    /// Rows hold re, im of each bin (`--scale complex`).
    pub complex: bool,
}

/// Appends `[re,im]` for each (re, im) pair of `values`, comma-separated.
fn push_pairs<T: Sample>(out: &mut Vec<u8>, values: &[T]) {
    for (i, pair) in values.chunks_exact(2).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        push_all(out, pair, b',', Syntax::Json);
        out.push(b']');
    }
}

impl<T: Sample> Encoder<T> for NdjsonEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        // writing into a Vec cannot fail
        let _ = write!(
            out,
            "{{\"stream\":{},\"frame\":{},\"time_s\":",
            row.stream.id, row.frame
        );
        push(out, row.time_s, Syntax::Json);
        if row.stream.tuning.as_ref().is_some_and(|t| t.has_centre()) {
            out.extend_from_slice(b",\"center_hz\":");
            match row.stream.row_center(row.time_s) {
                Some(hz) => push(out, hz, Syntax::Json),
                None => out.extend_from_slice(b"null"),
            }
        }
        out.extend_from_slice(b",\"bins\":[");
        if self.complex {
            push_pairs(out, row.values);
        } else {
            push_all(out, row.values, b',', Syntax::Json);
        }
        out.extend_from_slice(b"]}\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::InputKind;
    use crate::types::StreamMeta;

    #[test]
    fn complex_bins_are_re_im_pairs() {
        let stream = StreamMeta {
            id: 2,
            input: "x".into(),
            channel: None,
            rate: 1.0,
            kind: InputKind::Real,
            fftshift: false,
            columns: None,
            tuning: None,
        };
        let row = SpectrumRow {
            stream: &stream,
            frame: 5,
            time_s: 0.5,
            n: 2,
            frames: 1,
            values: &[1.5f32, 0.0, -2.0, 0.25],
        };
        let mut out = Vec::new();
        NdjsonEncoder { complex: true }.encode(&row, &mut out);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "{\"stream\":2,\"frame\":5,\"time_s\":0.5,\"bins\":[[1.5,0.0],[-2.0,0.25]]}\n"
        );
    }
}
