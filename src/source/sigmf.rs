//! SigMF recordings (sigmf.org, spec 1.x): `--file rec.sigmf-meta`, or `rec.sigmf-data` with its
//! `.sigmf-meta` beside it. From the metadata (JSON, parsed with serde_json):
//! - `global.core:datatype`: every real and complex float and integer type of the spec
//!   (`iq::SampleType`, scaled as `iq` says), both byte orders;
//! - `global.core:sample_rate` (else `--rate`, as for raw files), `global.core:num_channels`
//!   (interleaved channels, default 1), `global.core:dataset` (a non-conforming dataset's file
//!   name, beside the metadata);
//! - each capture's `core:sample_start` and `core:frequency` (the stream's `tuning`) and
//!   `core:datetime` (RFC 3339: `Z` or an offset from UTC; anything else is refused);
//! - `global.core:offset`: the sample index of the dataset's first sample (a recording split
//!   over files); capture starts are absolute, so a capture starts `sample_start − offset`
//!   samples into this dataset.
//!
//! Refused with a one-line error naming the metadata file: anything that is not such a document
//! (an object that gives a key twice among them),
//! an unknown datatype, `core:metadata_only`, captures out of order or before the offset, a
//! datetime that is not one, `core:header_bytes` (bytes between captures, which no sample reader
//! here skips) and `core:trailing_bytes` (likewise, after the samples). `.sigmf` archives (tar) are not
//! read: unpack them first (`tar xf rec.sigmf`). A capture that starts past the dataset's end is
//! warned of once (a dataset cut short), and the samples there are analysed.

use super::input::InputReader;
use super::iq::SampleType;
use super::raw::RawSource;
use super::{open_reader, FileOptions, SampleSource};
use crate::error::{FftdError, Result};
use crate::limits;
use crate::types::escaped;
use crate::types::tuning::{Capture, Tuning};
use serde_json::{Map, Value};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Metadata files larger than this are refused (annotations aside, one is a few kB).
const MAX_META_BYTES: u64 = 64 << 20;

/// What a recording's metadata says.
#[derive(Clone, Debug)]
pub struct Recording {
    pub meta_path: String,
    pub data_path: String,
    pub datatype: SampleType,
    pub rate: Option<f64>,
    pub channels: usize,
    /// None when no capture gives a frequency.
    pub tuning: Option<Arc<Tuning>>,
    /// The last capture's index and first sample, in the dataset.
    pub last_capture: Option<(usize, u64)>,
}

/// The metadata and data paths of `path` (either of the two); the data path is provisional
/// until the metadata is read (`core:dataset` may name another file).
/// The one named is kept as given; suffixes in upper case give the other's in upper case
/// (`REC.SIGMF-META` and `REC.SIGMF-DATA`), as a FAT volume's or a Windows tool's names may be.
pub fn paths(path: &str) -> (String, String) {
    let at = path.len().saturating_sub(".sigmf-meta".len());
    let suffix = path.get(at..).unwrap_or("");
    let stem = path.get(..at).unwrap_or(path);
    let (meta, data) = match suffix == suffix.to_ascii_uppercase() {
        true => (".SIGMF-META", ".SIGMF-DATA"),
        false => (".sigmf-meta", ".sigmf-data"),
    };
    if suffix.eq_ignore_ascii_case(meta) {
        (path.to_string(), format!("{stem}{data}"))
    } else if suffix.eq_ignore_ascii_case(data) {
        (format!("{stem}{meta}"), path.to_string())
    } else {
        (format!("{path}.sigmf-meta"), format!("{path}.sigmf-data"))
    }
}

/// Whether `path` names the dataset rather than the metadata.
fn is_data(path: &str) -> bool {
    path.to_ascii_lowercase().ends_with(".sigmf-data")
}

/// Reads the metadata of the recording `path` names (from `meta`, its bytes, when given).
pub fn read_recording(path: &str, meta: Option<&mut dyn Read>) -> Result<Recording> {
    let (meta_path, data_path) = paths(path);
    let mut text = Vec::new();
    let read = match meta {
        Some(reader) => reader.take(MAX_META_BYTES + 1).read_to_end(&mut text),
        None => std::fs::File::open(&meta_path)
            .and_then(|f| f.take(MAX_META_BYTES + 1).read_to_end(&mut text)),
    };
    read.map_err(|e| FftdError::io(&meta_path, e))?;
    if text.len() as u64 > MAX_META_BYTES {
        return Err(bad(&meta_path, "is over 64 MiB: not SigMF metadata"));
    }
    let doc = json_without_twins(&text)
        .map_err(|e| bad(&meta_path, format!("is not SigMF metadata (JSON: {e})")))?;
    parse(&meta_path, data_path, &doc)
}

/// `text` parsed as JSON, refusing an object that gives a key twice (serde_json's `Value` keeps
/// the last, silently: two `core:sample_rate`s would pick one).
fn json_without_twins(text: &[u8]) -> serde_json::Result<Value> {
    use serde::de::DeserializeSeed;
    let mut reader = serde_json::Deserializer::from_slice(text);
    let doc = NoTwins.deserialize(&mut reader)?;
    reader.end()?;
    Ok(doc)
}

/// Builds a `Value` as serde_json does, but fails on a key given twice in one object.
struct NoTwins;

impl<'de> serde::de::DeserializeSeed<'de> for NoTwins {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for NoTwins {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Value, A::Error> {
        let mut list = Vec::new();
        while let Some(v) = seq.next_element_seed(NoTwins)? {
            list.push(v);
        }
        Ok(Value::Array(list))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(NoTwins)?;
            if object.contains_key(&key) {
                let twice = format!("the key \"{}\" is given twice in one object", escaped(&key));
                return Err(serde::de::Error::custom(twice));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

fn bad(meta_path: &str, what: impl Into<String>) -> FftdError {
    FftdError::input(meta_path, what)
}

/// A recording that holds no samples (`core:metadata_only`), or bytes after them that the
/// sample reader would take for samples (`core:trailing_bytes`).
fn refuse_what_is_not_read(meta_path: &str, global: &Map<String, Value>) -> Result<()> {
    if global.get("core:metadata_only") == Some(&Value::Bool(true)) {
        return Err(bad(meta_path, "is core:metadata_only: it holds no samples"));
    }
    match global.get("core:trailing_bytes").map(|v| (v, v.as_f64())) {
        None => {}
        Some((_, Some(0.0))) => {}
        Some((v, _)) => {
            let what = match v.as_u64() {
                Some(n) => format!("are not read: cut them from the dataset (truncate -s -{n})"),
                None => "is not a whole number of bytes".to_string(),
            };
            return Err(bad(
                meta_path,
                format!("core:trailing_bytes {v} (bytes after the samples) {what}"),
            ));
        }
    }
    Ok(())
}

/// The recording a parsed metadata document describes.
fn parse(meta_path: &str, data_path: String, doc: &Value) -> Result<Recording> {
    let global = doc
        .get("global")
        .and_then(Value::as_object)
        .ok_or_else(|| bad(meta_path, "is not SigMF metadata: no \"global\" object"))?;
    let datatype = match global.get("core:datatype") {
        Some(Value::String(s)) => SampleType::from_sigmf(s).ok_or_else(|| {
            bad(
                meta_path,
                format!(
                    "core:datatype \"{}\" is not a SigMF datatype: expected r or c, then f32, f64, i8, i16, i32, u8, u16 or u32, then _le or _be unless 8-bit (e.g. cf32_le, ci16_le, cu8)",
                    escaped(s)
                ),
            )
        })?,
        _ => return Err(bad(meta_path, "has no core:datatype string in \"global\"")),
    };
    refuse_what_is_not_read(meta_path, global)?;
    let rate = match global.get("core:sample_rate") {
        None => None,
        Some(v) => match v.as_f64() {
            Some(r) if limits::rate_in_range(r) => Some(r),
            _ => {
                let (low, high) = limits::RATE_HZ;
                return Err(bad(
                    meta_path,
                    format!("core:sample_rate {v} is not a number of Hz from {low:e} to {high:e}"),
                ));
            }
        },
    };
    let channels = match global.get("core:num_channels") {
        None => 1,
        Some(v) => match v.as_u64() {
            Some(c) if c >= 1 && c <= limits::MAX_CHANNELS as u64 => c as usize,
            _ => {
                return Err(bad(
                    meta_path,
                    format!(
                        "core:num_channels {v} must be a whole number from 1 to {}",
                        limits::MAX_CHANNELS
                    ),
                ))
            }
        },
    };
    let data_path = dataset_path(meta_path, global, data_path)?;
    let offset = dataset_offset(meta_path, global)?;
    let captures = captures(meta_path, doc.get("captures"), offset)?;
    let last_capture = captures
        .last()
        .map(|c| (captures.len() - 1, c.sample_start));
    // (captures that give only datetimes still time the rows: rtl-power's date and time)
    let tuning = (captures.iter())
        .any(|c| c.frequency.is_some() || c.datetime.is_some())
        .then(|| {
            Arc::new(Tuning {
                captures,
                period: None,
                band: None,
            })
        });
    Ok(Recording {
        meta_path: meta_path.to_string(),
        data_path,
        datatype,
        rate,
        channels,
        tuning,
        last_capture,
    })
}

/// Warns when the recording's last capture starts at or past the end of its dataset (a regular
/// file): a dataset cut short, or the metadata of another recording. Its samples are analysed
/// as they are, as a WAV file's data that ends early is. Once per recording and run.
pub(crate) fn warn_of_captures_past_the_data(r: &Recording) {
    let Some((i, start)) = r.last_capture else {
        return;
    };
    let frame_bytes = (r.datatype.sample_bytes() * r.channels) as u64;
    let Ok(meta) = std::fs::metadata(&r.data_path) else {
        return;
    };
    let samples = meta.len() / frame_bytes.max(1);
    // (a dataset without a whole sample is refused as it opens: that error alone says it)
    if !meta.is_file() || start < samples || samples == 0 {
        return;
    }
    // (the planner and the reader may each read a recording's metadata: one warning)
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let first = WARNED.lock().is_ok_and(|mut warned| {
        let new = !warned.contains(&r.meta_path);
        if new {
            warned.push(r.meta_path.clone());
        }
        new
    });
    if first {
        tracing::warn!(
            "{}: capture {i} starts at sample {start}, past the end of {} ({samples} samples): a dataset cut short?",
            r.meta_path,
            r.data_path
        );
    }
}

/// The dataset's path: `core:dataset`'s file beside the metadata, else `data_path`.
fn dataset_path(meta_path: &str, global: &Map<String, Value>, data_path: String) -> Result<String> {
    match global.get("core:dataset") {
        None => Ok(data_path),
        Some(Value::String(name)) if !name.is_empty() && !name.contains('/') => {
            let dir = Path::new(meta_path).parent().unwrap_or(Path::new(""));
            Ok(dir.join(name).to_string_lossy().into_owned())
        }
        Some(v) => Err(bad(
            meta_path,
            format!("core:dataset {v} must be a file name beside the metadata"),
        )),
    }
}

/// `core:offset`: the sample index of the dataset's first sample (0 when not given).
fn dataset_offset(meta_path: &str, global: &Map<String, Value>) -> Result<u64> {
    match global.get("core:offset") {
        None => Ok(0),
        Some(v) => (v.as_u64())
            .ok_or_else(|| bad(meta_path, format!("core:offset {v} is not a whole number"))),
    }
}

/// The `captures` array: each capture's start in this dataset (its absolute `core:sample_start`
/// less the dataset's `offset`), frequency and datetime, in order.
fn captures(meta_path: &str, value: Option<&Value>, offset: u64) -> Result<Vec<Capture>> {
    let list = match value {
        None => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad(meta_path, "\"captures\" is not an array")),
    };
    let mut out: Vec<Capture> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let empty = Map::new();
        let c = item.as_object().unwrap_or(&empty);
        if !item.is_object() {
            return Err(bad(meta_path, format!("capture {i} is not an object")));
        }
        let field = |key: &str| c.get(key);
        let sample_start = match field("core:sample_start") {
            None => offset,
            Some(v) => v.as_u64().ok_or_else(|| {
                bad(
                    meta_path,
                    format!("capture {i}: core:sample_start {v} is not a whole number"),
                )
            })?,
        };
        let sample_start = sample_start.checked_sub(offset).ok_or_else(|| {
            bad(
                meta_path,
                format!("capture {i}: core:sample_start {sample_start} is before the dataset's first sample (core:offset {offset})"),
            )
        })?;
        if out.last().is_some_and(|p| p.sample_start > sample_start) {
            return Err(bad(
                meta_path,
                format!("capture {i}: core:sample_start {sample_start} comes before the previous capture's"),
            ));
        }
        let frequency = match field("core:frequency") {
            None => None,
            Some(v) => match v.as_f64() {
                Some(f) if f.is_finite() && f.abs() <= crate::limits::CENTER_HZ_MAX => Some(f),
                _ => {
                    return Err(bad(
                        meta_path,
                        format!(
                            "capture {i}: core:frequency {v} is not a number of Hz within ±{:e}",
                            crate::limits::CENTER_HZ_MAX
                        ),
                    ))
                }
            },
        };
        if field("core:header_bytes").is_some_and(|v| v.as_u64() != Some(0)) {
            return Err(bad(
                meta_path,
                format!("capture {i}: core:header_bytes (bytes between captures) are not read: strip them from the dataset"),
            ));
        }
        let datetime = match field("core:datetime") {
            None => None,
            Some(Value::String(t)) if crate::types::utc_time::parse(t).is_some() => Some(t.clone()),
            Some(v) => {
                return Err(bad(
                    meta_path,
                    format!("capture {i}: core:datetime {v} is not an ISO 8601 time (YYYY-MM-DDTHH:MM:SS[.fff] then Z or an offset such as +02:00)"),
                ))
            }
        };
        out.push(Capture {
            sample_start,
            frequency,
            datetime,
        });
    }
    Ok(out)
}

/// The sample source of the recording `path` names; `reader` reads `path` (the metadata, or the
/// dataset when `path` is the `.sigmf-data`).
pub fn open(path: &str, reader: InputReader, opts: &FileOptions) -> Result<Box<dyn SampleSource>> {
    if path == "-" {
        return Err(FftdError::Usage(
            "--input-format sigmf: give the recording's .sigmf-meta (or .sigmf-data) path; stdin cannot carry both of its files".into(),
        ));
    }
    let (recording, data) = if is_data(path) {
        (read_recording(path, None)?, reader)
    } else {
        let mut reader = reader;
        let recording = read_recording(path, Some(&mut reader))?;
        let data = open_reader(&recording.data_path, &opts.stop)?;
        (recording, data)
    };
    warn_of_captures_past_the_data(&recording);
    let name = recording.data_path.clone();
    let source = RawSource::typed(
        &name,
        data,
        recording.datatype,
        opts.precision,
        (recording.rate.unwrap_or(opts.rate), recording.channels),
        recording.tuning,
    )?;
    Ok(Box::new(source))
}

#[cfg(test)]
mod tests {
    /// Either file names the pair, kept as given; suffixes in upper case give the other in
    /// upper case.
    #[test]
    fn paths_pair_the_metadata_and_the_dataset() {
        let pair = |m: &str, d: &str| (m.to_string(), d.to_string());
        let want = pair("a/r.sigmf-meta", "a/r.sigmf-data");
        assert_eq!(super::paths("a/r.sigmf-meta"), want);
        assert_eq!(super::paths("a/r.sigmf-data"), want);
        let upper = pair("R.SIGMF-META", "R.SIGMF-DATA");
        assert_eq!(super::paths("R.SIGMF-META"), upper);
        assert_eq!(super::paths("R.SIGMF-DATA"), upper);
        assert_eq!(
            super::paths("r.Sigmf-Meta"),
            pair("r.Sigmf-Meta", "r.sigmf-data")
        );
        assert_eq!(super::paths("r"), pair("r.sigmf-meta", "r.sigmf-data"));
        assert_eq!(super::paths("é"), pair("é.sigmf-meta", "é.sigmf-data"));
    }
}
