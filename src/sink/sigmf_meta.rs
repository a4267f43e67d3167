//! `--meta PATH.sigmf-meta`: the sidecar as a SigMF metadata document, for radio users whose
//! tools file recordings by their SigMF metadata. It describes the first stream's input
//! recording and carries fftd's analysis as an extension:
//!
//! - `global`: `core:version` (1.2.0), `core:datatype` (the input's: its own for a SigMF input,
//!   the raw format's otherwise, e.g. cu8 → `cu8`, cs16 → `ci16_le`, rtl_tcp's `cu8`, SoapySDR's
//!   `cf32_le` (the samples fftd takes from it); an input with none, text,
//!   WAV, compressed audio or the microphone, is refused: `refusal`),
//!   `core:sample_rate`, `core:dataset` (the input file's name; a stream's, stdin or a receiver,
//!   has none: `core:metadata_only` instead), `core:recorder` (fftd and its
//!   version), `core:description`, `core:extensions` (`fftd`, optional) and `fftd:analysis`: the
//!   whole plain JSON sidecar (frame, hop, window, scale, bins, centres, outputs, ...).
//! - `captures`: the input's captures (`core:sample_start`, `core:frequency`, `core:datetime`),
//!   or one at sample 0 with `--center-freq`; `annotations`: empty.

use super::meta::StreamSummary;
use crate::source::{self, InputFormat};
use serde_json::{json, Map, Value};
use std::path::Path;

/// Whether `path` asks for the SigMF form.
pub(crate) fn wanted(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "sigmf-meta")
}

/// The SigMF datatype of the input `name` (a SigMF dataset or a raw file; read as `forced`; a
/// receiver's samples as fftd takes them: rtl_tcp's bytes, SoapySDR's complex floats).
fn datatype(name: &str, forced: Option<InputFormat>) -> Option<String> {
    if source::rtl_tcp::is_rtl_tcp(name) {
        return Some("cu8".into());
    }
    if source::soapy::is_soapy(name) {
        return Some("cf32_le".into());
    }
    let format = forced.unwrap_or_else(|| InputFormat::from_extension(name));
    let text = match format {
        InputFormat::Sigmf => {
            return source::sigmf::read_recording(name, None)
                .ok()
                .map(|r| r.datatype.sigmf_name())
        }
        InputFormat::F32 => "rf32_le",
        InputFormat::Cf32 => "cf32_le",
        InputFormat::S16 => "ri16_le",
        other => return source::raw::iq_type(other).map(|t| t.sigmf_name()),
    };
    Some(text.to_string())
}

/// Why `--meta PATH.sigmf-meta` cannot describe the input `first` (read as `forced`): a SigMF
/// document needs the samples' `core:datatype`, which only a raw file or a SigMF recording
/// has (text, WAV, compressed audio and the microphone have none). None: it can.
pub(crate) fn refusal(path: &Path, first: &str, forced: Option<InputFormat>) -> Option<String> {
    if !wanted(path) || datatype(first, forced).is_some() {
        return None;
    }
    // (a SigMF input that cannot be read is that input's error, said where it is opened)
    if forced.unwrap_or_else(|| InputFormat::from_extension(first)) == InputFormat::Sigmf {
        return None;
    }
    let shown = crate::types::shown_path(path);
    let plain = path.with_extension("json");
    Some(format!(
        "--meta {shown}: a SigMF document names its samples' core:datatype, and {first} is not a raw or SigMF recording: use --meta {} for the plain JSON sidecar",
        crate::types::shown_path(&plain)
    ))
}

/// The SigMF document around `analysis` (the plain sidecar).
pub(crate) fn document(
    analysis: Value,
    streams: &[StreamSummary<'_>],
    forced: Option<InputFormat>,
) -> Value {
    let mut global = Map::new();
    global.insert("core:version".into(), json!("1.2.0"));
    let first = streams.first().map(|s| s.meta);
    if let Some(t) = first.and_then(|m| datatype(&m.input, forced)) {
        global.insert("core:datatype".into(), json!(t));
    }
    if let Some(m) = first {
        global.insert("core:sample_rate".into(), json!(m.rate));
        // a stream (stdin, a FIFO, a receiver) leaves no dataset to name
        let regular = std::fs::metadata(&m.input).is_ok_and(|f| f.is_file());
        match Path::new(&m.input).file_name().filter(|_| regular) {
            Some(file) => global.insert("core:dataset".into(), json!(file.to_string_lossy())),
            None => global.insert("core:metadata_only".into(), json!(true)),
        };
    }
    global.insert(
        "core:recorder".into(),
        json!(format!("fftd {}", env!("CARGO_PKG_VERSION"))),
    );
    global.insert(
        "core:description".into(),
        json!("spectra computed by fftd from this recording (fftd:analysis says how)"),
    );
    global.insert(
        "core:extensions".into(),
        json!([{"name": "fftd", "version": env!("CARGO_PKG_VERSION"), "optional": true}]),
    );
    global.insert("fftd:analysis".into(), analysis);
    let captures: Vec<Value> = first
        .and_then(|m| m.tuning.as_ref())
        .map(|t| {
            t.captures
                .iter()
                .map(|c| {
                    let mut o = Map::new();
                    o.insert("core:sample_start".into(), json!(c.sample_start));
                    if let Some(f) = c.frequency {
                        o.insert("core:frequency".into(), json!(f));
                    }
                    if let Some(d) = &c.datetime {
                        o.insert("core:datetime".into(), json!(d));
                    }
                    Value::Object(o)
                })
                .collect()
        })
        .unwrap_or_else(|| vec![json!({"core:sample_start": 0})]);
    json!({"global": global, "captures": captures, "annotations": []})
}
