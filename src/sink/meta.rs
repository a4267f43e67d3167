//! `--meta PATH`: a JSON sidecar that tells a reader of the output how to interpret it: among
//! the rest, `bins` per frame and `values_per_bin` (2 with `--scale complex`: re, im).

use super::StreamMeta;
use crate::config::Settings;
use crate::error::{FftdError, Result};
use crate::fft::InputKind;
use serde_json::json;
use std::path::Path;

/// What the run learnt about one stream, for the sidecar.
pub struct StreamSummary<'a> {
    pub meta: &'a StreamMeta,
    /// Frame size actually used (differs per stream with `--frame whole`).
    pub n: usize,
    pub hop: usize,
    pub frames: u64,
    pub output: String,
}

/// Values-per-bin aside, the columns a stream's rows have: its bins, or its products' columns.
fn columns(s: &StreamSummary<'_>) -> usize {
    s.meta
        .columns
        .as_ref()
        .map_or(s.meta.bins(s.n), |c| c.len())
}

/// With measurements (`products::measure`): their unit, weighting, calibration and the names of
/// the values each row carries after its columns.
fn measurements(settings: &Settings) -> Option<serde_json::Map<String, serde_json::Value>> {
    let products = &settings.products;
    let measure = &products.measure;
    if !measure.is_active() {
        return None;
    }
    let layout = measure.layout(products.bands.is_some(), settings.scale);
    let doc = json!({
        "unit": measure.unit(),
        "weighting": measure.weighting.map(|w| w.letter()),
        "calibration_db": measure.calibration_db,
        "calibration_file": measure.calibration_file.as_ref().map(|c| c.path.clone()),
        "sens_factor_db": measure.calibration_file.as_ref().map(|c| c.sens_factor_db),
        "values_scale": "calibrated power: a full-scale sine's bin reads the calibration (0 dBFS without)",
        "row_measurements": layout.names(),
    });
    match doc {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}

pub fn write_meta(
    path: &Path,
    file: std::fs::File,
    settings: &Settings,
    streams: &[StreamSummary<'_>],
    error: Option<&str>,
) -> Result<()> {
    let per_stream: Vec<_> = streams
        .iter()
        .map(|s| {
            json!({
                "stream": s.meta.id,
                "input": s.meta.input,
                "channel": s.meta.channel,
                "rate": s.meta.rate,
                "kind": match s.meta.kind { InputKind::Real => "real", InputKind::Complex => "complex" },
                "frame": s.n,
                "hop": s.hop,
                "bins": columns(s),
                "columns_hz": s.meta.columns.as_deref(),
                "hz_per_bin": s.meta.rate / s.n as f64,
                "frames": s.frames,
                "output": s.output,
            })
        })
        .collect();
    let first = streams.first();
    let doc = json!({
        "fftd_version": env!("CARGO_PKG_VERSION"),
        "rate": first.map(|s| s.meta.rate),
        "frame": first.map(|s| s.n),
        "hop": first.map(|s| s.hop),
        "bins": first.map(columns),
        "average": settings.products.average.map(|a| a.to_string()),
        "average_mode": settings.products.average.map(|_| settings.products.mode.to_string()),
        "row_time": settings.products.average.map(|_| "start of the row's interval"),
        "bands": settings.products.bands.as_ref().map(|b| b.to_string()),
        "fmin": settings.products.fmin,
        "fmax": settings.products.fmax,
        "hz_per_bin": first.map(|s| s.meta.rate / s.n as f64),
        "window": settings.window.name(),
        "window_form": "periodic (scipy.signal.get_window default)",
        "scale": settings.scale.name(),
        "values_per_bin": settings.scale.values_per_bin(),
        "format": settings.format.name(),
        "precision": match settings.precision { crate::config::Precision::F32 => "f32", crate::config::Precision::F64 => "f64" },
        "tail": match settings.tail { crate::frame::Tail::Pad => "pad", crate::frame::Tail::Drop => "drop" },
        "fftshift": settings.fftshift,
        "bin_order": if settings.fftshift { "fftshift (DC centred)" } else { "fft (numpy rfftfreq/fftfreq order)" },
        "inputs": per_stream,
        "error": error,
    });
    let mut doc = doc;
    if let (Some(fields), Some(extra)) = (doc.as_object_mut(), measurements(settings)) {
        fields.extend(extra);
    }
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| FftdError::Runtime(format!("cannot encode metadata: {e}")))?;
    let mut file = file;
    std::io::Write::write_all(&mut file, (text + "\n").as_bytes())
        .map_err(|e| FftdError::io(path, e))
}
