//! Sinks: write each stream's spectra, in frame order, in a format other tools read directly.
//! A format is an `Encoder` (rows → bytes, no I/O; one file per format below); a `Destination`
//! is where bytes go (stdout, a file); `output::Outputs` joins them for every output of a run
//! (headers, row counts, a bounded number of open files).
//!
//! - `text`: one line per frame, values separated by single spaces, shortest round-trip decimals
//!   (`number`: NaN and infinities as `nan`, `inf`, `-inf`; in ndjson `null`).
//! - `csv`: header `stream,frame,time_s,<Hz of each bin>`, one row per frame (a retuned SigMF
//!   recording adds `center_hz` after `time_s`: `types::tuning`).
//! - `ndjson`: one JSON object per frame: `{"stream","frame","time_s","bins":[...]}`, and
//!   `"center_hz"` after `time_s` when the input's centre frequency is known.
//! - `f32`: raw little-endian float32, bins-per-frame values per frame, nothing else.
//! - `npy`: a 2-D (frames × bins) NumPy array file; needs a real file (the header is rewritten at
//!   the end with the frame count).
//! - any of text, csv, ndjson and f32 to `--output nats://HOST:PORT/SUBJECT` (`nats`): one
//!   JetStream message per row, with headers saying which row it is (docs/fleet.md).
//! - `rtl-power`: rtl_power's CSV rows (`rtl_power` says which fields).
//! - `png`: a spectrogram image per stream (`png`: level records → `spectrogram` reduction →
//!   `plot` drawing), written whole at the end of the run; needs a real file.
//!
//! With `--scale complex` every bin is two values, re then im (`np.fft.rfft(w*x)`):
//!
//! - `text`: `re0 im0 re1 im1 …`, 2·bins numbers per line.
//! - `csv`: two columns per bin, header `re_<Hz>,im_<Hz>` for each bin.
//! - `ndjson`: `"bins":[[re0,im0],[re1,im1],…]`.
//! - `f32`: re, im interleaved float32, 2·bins values per frame (`np.fromfile(p, '<c8')`).
//! - `npy`: dtype `<c8` (complex64; `<c16`, complex128, with `--precision f64`), shape
//!   (frames, bins).

pub(crate) mod analysis;
pub(crate) mod csv;
pub(crate) mod destination;
pub(crate) mod measured;
pub(crate) mod meta;
pub(crate) mod ndjson;
pub(crate) mod npy;
pub(crate) mod opening;
pub(crate) mod output;
pub(crate) mod overwrite_guard;
pub(crate) mod placed;
pub(crate) mod plot;
pub(crate) mod png;
pub(crate) mod raw;
pub(crate) mod rotate;
pub(crate) mod rotate_names;
pub(crate) mod rotate_outputs;
pub(crate) mod rtl_power;
pub(crate) mod sigmf_meta;
pub(crate) mod spec;
pub(crate) mod spectrogram;
pub mod stuck_write;
pub(crate) mod text;

use crate::fft::Scale;

use crate::types::{Sample, StreamMeta};
use serde::Deserialize;

/// Appends `values` to `out` as little-endian binary: f64 when `wide`, else f32 (f64 results
/// rounded). Writes into a sized buffer, which the compiler vectorises.
pub(crate) fn encode_le<T: Sample>(values: &[T], wide: bool, out: &mut Vec<u8>) {
    let width = if wide { 8 } else { 4 };
    let start = out.len();
    out.resize(start + values.len() * width, 0);
    write_le(values, wide, &mut out[start..]);
}

/// `encode_le` into a slice of exactly `values.len()` × 4 (or 8 when `wide`) bytes.
pub(crate) fn write_le<T: Sample>(values: &[T], wide: bool, out: &mut [u8]) {
    if wide {
        for (d, v) in out.chunks_exact_mut(8).zip(values) {
            d.copy_from_slice(&v.into_f64().to_le_bytes());
        }
    } else {
        for (d, v) in out.chunks_exact_mut(4).zip(values) {
            d.copy_from_slice(&v.into_f32().to_le_bytes());
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    /// One line per frame, space-separated values.
    Text,
    /// Header of bin frequencies, one row per frame.
    Csv,
    /// One JSON object per frame.
    Ndjson,
    /// Raw little-endian float32, nothing else.
    F32,
    /// NumPy .npy 2-D array (frames x bins); needs --output or --output-dir.
    Npy,
    /// Spectrogram image (time x frequency, dB colour map; --png-size); needs --output or
    /// --output-dir.
    Png,
    /// rtl_power's CSV: date, time, Hz low, Hz high, Hz step, samples, then dB per bin (implies
    /// --scale db and --fftshift).
    RtlPower,
}

impl OutputFormat {
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Text => "text",
            OutputFormat::Csv => "csv",
            OutputFormat::Ndjson => "ndjson",
            OutputFormat::F32 => "f32",
            OutputFormat::Npy => "npy",
            OutputFormat::Png => "png",
            OutputFormat::RtlPower => "rtl-power",
        }
    }

    /// File extension used with `--output-dir`.
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Text => "txt",
            OutputFormat::RtlPower => "csv",
            other => other.name(),
        }
    }

    /// Whether each row says which stream it belongs to (so streams can share one output).
    pub(crate) fn carries_stream_id(self) -> bool {
        matches!(self, OutputFormat::Csv | OutputFormat::Ndjson)
    }
}

/// One row of an encoded output part, for destinations that send each row as a message of its
/// own (`nats`): which row it is and where its bytes lie in the part.
#[derive(Clone, Debug)]
pub(crate) struct RowMark {
    pub stream: usize,
    pub frame: u64,
    pub time_s: f64,
    /// The row's bytes: a range of the part's bytes (`output::Rows::bytes`).
    pub bytes: std::ops::Range<usize>,
}

/// One frame's finished spectrum, handed to an encoder.
pub(crate) struct SpectrumRow<'a, T> {
    pub stream: &'a StreamMeta,
    pub frame: u64,
    pub time_s: f64,
    /// Frame size in samples.
    pub n: usize,
    /// Frames the row stands for: 1, or an averaged row's frame count.
    pub frames: u32,
    /// One value per bin, or (`--scale complex`) re, im of each bin, interleaved.
    pub values: &'a [T],
}

/// A format: turns rows into bytes, with no I/O, so it works over any destination and on any
/// thread (the encode stage runs several). What an output needs around its rows (the csv header,
/// the npy header and its final frame count) is asked for by the one writer of that output
/// (`output::Outputs`), which alone knows where an output starts and ends.
pub(crate) trait Encoder<T: Sample>: Send + Sync {
    /// Appends one row's bytes to `out`.
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>);

    /// Bytes an output starts with, before the first row (`first`: that row's stream, `n`: its
    /// frame size). Empty by default.
    fn preamble(&self, _first: &StreamMeta, _n: usize) -> Vec<u8> {
        Vec::new()
    }

    /// For formats whose output has one row width (csv, npy): the error when stream `stream`
    /// brings rows of `bins` bins to an output whose rows have `fixed`. None: any width goes.
    fn width_error(&self, _stream: usize, _bins: usize, _fixed: usize) -> Option<String> {
        None
    }

    /// Bytes that replace the start of a finished output, given its row count and width in bins
    /// (npy's header with the real frame count); such a format needs a file, not stdout.
    fn final_header(&self, _frames: u64, _bins: usize) -> Option<Vec<u8>> {
        None
    }

    /// For formats whose rows of `values` values always take the same bytes (f32, npy): that
    /// size, so rows can be written straight to their place in a file (`placed`).
    fn row_bytes(&self, _values: usize) -> Option<usize> {
        None
    }

    /// Whether a row's bytes are its values `as f32`, little-endian, back to back (`f32`, and
    /// npy in f32): then rows narrowed elsewhere (an f64 run's device, `fft::carry`) are
    /// written as they come.
    fn writes_f32(&self) -> bool {
        false
    }

    /// Writes one row into `out`, which is `row_bytes` long (formats with `row_bytes` write in
    /// place; the default encodes and copies).
    fn encode_into(&self, row: &SpectrumRow<'_, T>, out: &mut [u8]) {
        let mut bytes = Vec::with_capacity(out.len());
        self.encode(row, &mut bytes);
        let len = bytes.len().min(out.len());
        out[..len].copy_from_slice(&bytes[..len]);
    }
}

/// The encoder for `format`, for rows of `scale` values (`Scale::Complex`: re, im pairs).
pub(crate) fn make_encoder<T: Sample>(format: OutputFormat, scale: Scale) -> Box<dyn Encoder<T>> {
    let complex = scale == Scale::Complex;
    match format {
        OutputFormat::Text => Box::new(text::TextEncoder),
        OutputFormat::Csv => Box::new(csv::CsvEncoder { complex }),
        OutputFormat::Ndjson => Box::new(ndjson::NdjsonEncoder { complex }),
        OutputFormat::F32 => Box::new(raw::F32Encoder),
        OutputFormat::Npy => Box::new(npy::NpyEncoder {
            f64: T::NAME == "f64",
            complex,
        }),
        OutputFormat::Png => Box::new(png::LevelEncoder { scale }),
        OutputFormat::RtlPower => Box::new(rtl_power::RtlPowerEncoder::new()),
    }
}
