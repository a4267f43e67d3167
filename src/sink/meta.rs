//! `--meta PATH`: a JSON sidecar that tells a reader of the output how to interpret it: among
//! the rest, `bins` per frame and `values_per_bin` (2 with `--scale complex`: re, im), and for
//! radio inputs `center_hz`, each input's `hz_range` and a retuned recording's `captures`. A path
//! ending in `.sigmf-meta` gets it wrapped as SigMF (`sigmf_meta`).

use super::analysis::Analysis;
use crate::error::{FftdError, Result};
use crate::source::InputFormat;
use crate::types::InputKind;
use crate::types::StreamMeta;
use serde_json::json;
use std::path::Path;

/// What the run learnt about one stream, for the sidecar.
pub(crate) struct StreamSummary<'a> {
    pub meta: &'a StreamMeta,
    /// Frame size actually used (differs per stream with `--frame whole`; 0: none, a stream
    /// of `--frame whole` that gave no frame).
    pub n: usize,
    pub hop: usize,
    pub frames: u64,
    pub output: String,
}

/// The stream's frame size, when known.
fn frame(s: &StreamSummary<'_>) -> Option<usize> {
    (s.n > 0).then_some(s.n)
}

/// Values-per-bin aside, the columns a stream's rows have: its bins, or its products' columns.
fn columns(s: &StreamSummary<'_>) -> Option<usize> {
    match &s.meta.columns {
        Some(columns) => Some(columns.len()),
        None => frame(s).map(|n| s.meta.bins(n)),
    }
}

/// Hz between bins, when the frame size is known.
fn hz_per_bin(s: &StreamSummary<'_>) -> Option<f64> {
    frame(s).map(|n| s.meta.rate / n as f64)
}

/// The lowest and highest column frequency of a stream's rows, Hz (absolute when one centre
/// labels them, offsets from the centre for a retuned recording).
fn hz_range(s: &StreamSummary<'_>) -> Option<[f64; 2]> {
    let (lo, hi) = s.meta.column_span(frame(s)?);
    Some([lo, hi])
}

/// A retuned recording's captures: where each begins and its centre.
fn captures(s: &StreamSummary<'_>) -> Option<Vec<serde_json::Value>> {
    let t = s.meta.tuning.as_ref().filter(|t| t.varies())?;
    Some(
        t.captures
            .iter()
            .map(|c| json!({"sample_start": c.sample_start, "center_hz": c.frequency}))
            .collect(),
    )
}

/// How the run ended, for the sidecar: its error, or whether a signal (Ctrl-C, SIGTERM) stopped
/// it before its inputs ended (its outputs then stop early, and say so).
pub(crate) struct RunEnd<'a> {
    pub error: Option<&'a str>,
    pub interrupted: bool,
}

pub(crate) fn write_meta(
    path: &Path,
    file: std::fs::File,
    analysis: &Analysis,
    input_format: Option<InputFormat>,
    streams: &[StreamSummary<'_>],
    end: RunEnd<'_>,
) -> Result<()> {
    let per_stream: Vec<_> = streams
        .iter()
        .map(|s| {
            let mut stream = json!({
                "stream": s.meta.id,
                "input": s.meta.input,
                "channel": s.meta.channel,
                "rate": s.meta.rate,
                "kind": match s.meta.kind { InputKind::Real => "real", InputKind::Complex => "complex" },
                "frame": frame(s),
                "hop": s.hop,
                "bins": columns(s),
                "columns_hz": s.meta.columns.as_deref(),
                "hz_per_bin": hz_per_bin(s),
                "center_hz": s.meta.tuning.as_ref().and_then(|t| t.single()),
                "hz_range": hz_range(s),
                "captures": captures(s),
                "frames": s.frames,
                "output": s.output,
            });
            // a sweep's captures repeat every this many samples
            if let (Some(period), Some(fields)) = (
                s.meta.tuning.as_ref().and_then(|t| t.period),
                stream.as_object_mut(),
            ) {
                fields.insert("captures_period".into(), json!(period));
            }
            stream
        })
        .collect();
    let first = streams.first();
    let doc = json!({
        "fftd_version": env!("CARGO_PKG_VERSION"),
        "rate": first.map(|s| s.meta.rate),
        "frame": first.and_then(frame),
        "hop": first.map(|s| s.hop),
        "bins": first.and_then(columns),
        "hz_per_bin": first.and_then(hz_per_bin),
        "center_hz": first.and_then(|s| s.meta.tuning.as_ref()).and_then(|t| t.single()),
        "inputs": per_stream,
        "error": end.error,
        "interrupted": end.interrupted,
    });
    let mut doc = doc;
    if let Some(fields) = doc.as_object_mut() {
        fields.extend(analysis.meta_fields());
    }
    let doc = match super::sigmf_meta::wanted(path) {
        true => super::sigmf_meta::document(doc, streams, input_format),
        false => doc,
    };
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| FftdError::Runtime(format!("cannot encode metadata: {e}")))?;
    let mut file = file;
    std::io::Write::write_all(&mut file, (text + "\n").as_bytes()).map_err(|e| {
        let path = crate::types::shown_path(path);
        FftdError::Runtime(format!("cannot write --meta {path}: {e}"))
    })
}
