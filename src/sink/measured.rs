//! Rows with measurements (`products::measure`): a row's values are its columns followed by the
//! measurements in `MeasureLayout::names` order. text, f32 and npy write them as they are (the
//! last values of a row); this wraps csv and ndjson so they name them:
//! - csv: the header's cells after the bins' frequencies are the names (`leq`, `lfmax`, …,
//!   `peak1_hz`, `peak1_db`, …, `thd_db`, …), then `unit`, whose cells hold the levels' unit
//!   (`dB SPL (A-weighted)`);
//! - ndjson: after `bins`, the fields `leq` … (numbers), `peaks: [{"hz":…,"db":…}, …]` (strongest
//!   first), `thd_db` …, with `--levels --bands` `bands` (each band's Leq in dB), and `unit`.

use super::{Encoder, OutputFormat, Sample, SpectrumRow};

use crate::products::measure::{MeasureLayout, DISTORTION_NAMES, LEVEL_NAMES};
use crate::types::number::{push, push_all, Syntax};
use crate::types::StreamMeta;
use std::sync::Arc;

/// csv or ndjson with the measurements named.
pub(crate) struct MeasuredEncoder<T: Sample> {
    inner: Box<dyn Encoder<T>>,
    layout: Arc<MeasureLayout>,
    json: bool,
}

/// `encoder` for `format`, wrapped when the run measures and the format names its values.
pub(crate) fn wrap<T: Sample>(
    encoder: Box<dyn Encoder<T>>,
    format: OutputFormat,
    layout: Option<&Arc<MeasureLayout>>,
) -> Box<dyn Encoder<T>> {
    match (format, layout) {
        (OutputFormat::Csv | OutputFormat::Ndjson, Some(layout)) => Box::new(MeasuredEncoder {
            inner: encoder,
            layout: layout.clone(),
            json: format == OutputFormat::Ndjson,
        }),
        _ => encoder,
    }
}

impl<T: Sample> MeasuredEncoder<T> {
    fn json_fields(&self, columns: &[T], extras: &[T], out: &mut Vec<u8>) {
        let mut at = 0;
        let field = |out: &mut Vec<u8>, name: &str, v: f64| {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            push(out, v, Syntax::Json);
        };
        let value = |i: usize| extras.get(i).map_or(f64::NAN, |v| v.into_f64());
        if self.layout.levels {
            for name in LEVEL_NAMES {
                field(out, name, value(at));
                at += 1;
            }
            if self.layout.bands {
                out.extend_from_slice(b",\"bands\":[");
                let levels: Vec<f64> = columns
                    .iter()
                    .map(|v| self.layout.column_db(v.into_f64()))
                    .collect();
                push_all(out, &levels, b',', Syntax::Json);
                out.push(b']');
            }
        }
        if self.layout.peaks > 0 {
            out.extend_from_slice(b",\"peaks\":[");
            for i in 0..self.layout.peaks {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"hz\":");
                push(out, value(at), Syntax::Json);
                out.extend_from_slice(b",\"db\":");
                push(out, value(at + 1), Syntax::Json);
                out.push(b'}');
                at += 2;
            }
            out.push(b']');
        }
        if self.layout.distortion {
            for name in DISTORTION_NAMES {
                field(out, name, value(at));
                at += 1;
            }
        }
        out.extend_from_slice(b",\"unit\":\"");
        out.extend_from_slice(self.layout.unit.as_bytes());
        out.push(b'"');
    }
}

/// `--cross` rows: csd (re, im per bin), coherence, h1_db, h1_deg.
fn push_cross_json<T: Sample>(values: &[T], bins: usize, out: &mut Vec<u8>) {
    let part = |i: usize| values.get(i * bins..(i + 1) * bins).unwrap_or(&[]);
    out.extend_from_slice(b",\"csd\":[");
    for (k, pair) in values
        .get(..2 * bins)
        .unwrap_or(&[])
        .chunks_exact(2)
        .enumerate()
    {
        if k > 0 {
            out.push(b',');
        }
        out.push(b'[');
        push_all(out, pair, b',', Syntax::Json);
        out.push(b']');
    }
    for (name, i) in [("coherence", 2), ("h1_db", 3), ("h1_deg", 4)] {
        out.extend_from_slice(b"],\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":[");
        push_all(out, part(i), b',', Syntax::Json);
    }
    out.extend_from_slice(b"]}\n");
}

/// The csv header of `--cross` rows.
fn cross_header(frequencies: &[f64]) -> Vec<u8> {
    let mut out = b"stream,frame,time_s".to_vec();
    let cells = |out: &mut Vec<u8>, prefix: &str| {
        for hz in frequencies {
            out.push(b',');
            out.extend_from_slice(prefix.as_bytes());
            push(out, *hz, Syntax::Text);
        }
    };
    for hz in frequencies {
        for part in ["csd_re_", "csd_im_"] {
            out.push(b',');
            out.extend_from_slice(part.as_bytes());
            push(&mut out, *hz, Syntax::Text);
        }
    }
    for prefix in ["coherence_", "h1_db_", "h1_deg_"] {
        cells(&mut out, prefix);
    }
    out.push(b'\n');
    out
}

impl<T: Sample> MeasuredEncoder<T> {
    fn encode_cross(&self, row: &SpectrumRow<'_, T>, bins: usize, out: &mut Vec<u8>) {
        let (id, frame) = (row.stream.id, row.frame);
        if self.json {
            out.extend_from_slice(
                format!("{{\"stream\":{id},\"frame\":{frame},\"time_s\":").as_bytes(),
            );
            push(out, row.time_s, Syntax::Json);
            push_cross_json(row.values, bins, out);
        } else {
            out.extend_from_slice(format!("{id},{frame},").as_bytes());
            push(out, row.time_s, Syntax::Text);
            out.push(b',');
            push_all(out, row.values, b',', Syntax::Text);
            out.push(b'\n');
        }
    }
}

impl<T: Sample> Encoder<T> for MeasuredEncoder<T> {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        if let Some(bins) = self.layout.cross_bins {
            return self.encode_cross(row, bins, out);
        }
        let split = row.values.len().saturating_sub(self.layout.extras());
        let (columns, extras) = row.values.split_at(split);
        let inner_row = SpectrumRow {
            values: columns,
            ..*row
        };
        let start = out.len();
        self.inner.encode(&inner_row, out);
        // drop the line's end ("}\n" or "\n") and append the measurements
        let end = if self.json { 2 } else { 1 };
        out.truncate(out.len().saturating_sub(end).max(start));
        if self.json {
            self.json_fields(columns, extras, out);
            out.extend_from_slice(b"}\n");
        } else {
            if !extras.is_empty() {
                out.push(b',');
                push_all(out, extras, b',', Syntax::Text);
            }
            out.push(b',');
            out.extend_from_slice(self.layout.unit.as_bytes());
            out.push(b'\n');
        }
    }

    fn preamble(&self, first: &StreamMeta, n: usize) -> Vec<u8> {
        if self.layout.cross_bins.is_some() {
            return match self.json {
                true => Vec::new(),
                false => cross_header(&first.column_frequencies(n)),
            };
        }
        let mut out = self.inner.preamble(first, n);
        if self.json || out.last() != Some(&b'\n') {
            return out;
        }
        out.pop();
        for name in self.layout.names() {
            out.push(b',');
            out.extend_from_slice(name.as_bytes());
        }
        out.extend_from_slice(b",unit\n");
        out
    }

    fn width_error(&self, stream: usize, bins: usize, fixed: usize) -> Option<String> {
        self.inner.width_error(stream, bins, fixed)
    }
}
