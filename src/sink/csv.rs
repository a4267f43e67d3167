//! `--format csv`: a header `stream,frame,time_s,` followed by each bin's frequency in Hz (from
//! the output's first row; absolute with `--center-freq` or a SigMF centre), then one row per
//! frame. A retuned SigMF recording (captures at different centres) has a `center_hz` column
//! after `time_s` (empty for a capture without one) and its bins headed by their offsets from it. Streams sharing one file must have the same
//! bins (same frame size and kind). With `--scale complex` each bin has two columns, re and im,
//! headed `re_<Hz>,im_<Hz>`. NaN and infinities are `nan`, `inf`, `-inf` (`types::number`), as
//! `pandas.read_csv` and `numpy.loadtxt` read them.

use super::{Encoder, Sample, SpectrumRow};

use crate::types::number::{push, push_all, Syntax};
use crate::types::StreamMeta;
use std::io::Write;

pub(crate) struct CsvEncoder {
    /// Rows hold re, im of each bin (`--scale complex`).
    pub complex: bool,
}

/// Appends the header cells of the bins at `frequencies`, comma-separated: the frequency, or
/// `re_<Hz>,im_<Hz>` for complex rows.
fn push_bin_headers(out: &mut Vec<u8>, frequencies: &[f64], complex: bool) {
    if !complex {
        push_all(out, frequencies, b',', Syntax::Text);
        return;
    }
    for (i, hz) in frequencies.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        for (j, part) in ["re_", "im_"].iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.extend_from_slice(part.as_bytes());
            push(out, *hz, Syntax::Text);
        }
    }
}

/// One csv output's header labels every stream's rows: the `streams` written to it (frames of
/// `n` samples; `--frame whole`, below 2, is checked row by row, `width_error`) must have the
/// same columns and kind, and a retuned recording's `center_hz` column or none alike.
pub(crate) fn check_one_header(streams: &[&StreamMeta], n: usize) -> Result<(), String> {
    let Some((first, rest)) = streams.split_first() else {
        return Ok(());
    };
    if rest.iter().any(|s| s.retuned() != first.retuned()) {
        return Err("a retuned SigMF recording's csv rows carry a center_hz column the other inputs' lack: write them with --output-dir DIR".into());
    }
    let columns = (n >= 2).then(|| first.column_frequencies(n));
    let differs = |s: &StreamMeta| {
        s.kind != first.kind
            || columns
                .as_ref()
                .is_some_and(|c| *c != s.column_frequencies(n))
    };
    match rest.iter().find(|s| differs(s)) {
        Some(other) => Err(format!(
            "--format csv: one header cannot label the bins of both {} and {} (another rate, centre, kind or --frame): write them with --output-dir DIR",
            first.input, other.input
        )),
        None => Ok(()),
    }
}

impl<T: Sample> Encoder<T> for CsvEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        // writing into a Vec cannot fail
        let _ = write!(out, "{},{},", row.stream.id, row.frame);
        push(out, row.time_s, Syntax::Text);
        out.push(b',');
        if row.stream.retuned() {
            if let Some(hz) = row.stream.row_center(row.time_s) {
                push(out, hz, Syntax::Text);
            }
            out.push(b',');
        }
        push_all(out, row.values, b',', Syntax::Text);
        out.push(b'\n');
    }

    fn preamble(&self, first: &StreamMeta, n: usize) -> Vec<u8> {
        let mut out = b"stream,frame,time_s,".to_vec();
        if first.retuned() {
            out.extend_from_slice(b"center_hz,");
        }
        push_bin_headers(&mut out, &first.column_frequencies(n), self.complex);
        out.push(b'\n');
        out
    }

    fn width_error(&self, stream: usize, bins: usize, fixed: usize) -> Option<String> {
        Some(format!(
            "stream {stream} has {bins} bins per frame but the CSV header has {fixed}: write streams of different frame sizes with --output-dir"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::InputKind;

    #[test]
    fn complex_rows_get_re_and_im_columns_per_bin() {
        let stream = StreamMeta {
            id: 0,
            input: "x".into(),
            channel: None,
            rate: 4.0,
            kind: InputKind::Real,
            fftshift: false,
            columns: None,
            tuning: None,
        };
        let header = |complex| {
            let encoder = CsvEncoder { complex };
            String::from_utf8(Encoder::<f32>::preamble(&encoder, &stream, 4)).expect("utf8")
        };
        assert_eq!(header(false), "stream,frame,time_s,0.0,1.0,2.0\n");
        assert_eq!(
            header(true),
            "stream,frame,time_s,re_0.0,im_0.0,re_1.0,im_1.0,re_2.0,im_2.0\n"
        );
    }
}
