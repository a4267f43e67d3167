//! Sinks: write each stream's spectra, in frame order, in a format other tools read directly.
//!
//! - `text`: one line per frame, values separated by single spaces, shortest round-trip decimals.
//! - `csv`: header `stream,frame,time_s,<Hz of each bin>`, one row per frame.
//! - `ndjson`: one JSON object per frame: `{"stream","frame","time_s","bins":[...]}`.
//! - `f32`: raw little-endian float32, bins-per-frame values per frame, nothing else.
//! - `npy`: a 2-D (frames × bins) NumPy array file; needs a real file (the header is rewritten at
//!   the end with the frame count).

pub mod csv;
pub mod destination;
pub mod meta;
pub mod ndjson;
pub mod npy;
pub mod overwrite_guard;
pub mod raw;
pub mod text;

use crate::fft::{InputKind, Sample};
use serde::Deserialize;
use std::io::{self, Write};

/// Replaces `out` with `values` as little-endian binary: f64 when `wide`, else f32 (f64 results
/// rounded). Writes into a sized buffer, which the compiler vectorises.
pub(crate) fn encode_le<T: Sample>(values: &[T], wide: bool, out: &mut Vec<u8>) {
    let width = if wide { 8 } else { 4 };
    out.clear();
    out.resize(values.len() * width, 0);
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
}

impl OutputFormat {
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Text => "text",
            OutputFormat::Csv => "csv",
            OutputFormat::Ndjson => "ndjson",
            OutputFormat::F32 => "f32",
            OutputFormat::Npy => "npy",
        }
    }

    /// File extension used with `--output-dir`.
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Text => "txt",
            other => other.name(),
        }
    }

    /// Whether each row says which stream it belongs to (so streams can share one output).
    pub fn carries_stream_id(self) -> bool {
        matches!(self, OutputFormat::Csv | OutputFormat::Ndjson)
    }
}

/// What a sink needs to know about a stream.
#[derive(Clone, Debug)]
pub struct StreamMeta {
    pub id: usize,
    /// Input path or device name.
    pub input: String,
    /// Channel carried, when one channel was picked out of several.
    pub channel: Option<usize>,
    pub rate: f64,
    pub kind: InputKind,
    pub fftshift: bool,
}

impl StreamMeta {
    /// Output values per frame for frames of `n` samples.
    pub fn bins(&self, n: usize) -> usize {
        match self.kind {
            InputKind::Real => n / 2 + 1,
            InputKind::Complex => n,
        }
    }

    /// Frequency in Hz of each output bin, in output order (numpy's rfftfreq / fftfreq, shifted
    /// with `--fftshift`).
    pub fn frequencies(&self, n: usize) -> Vec<f64> {
        let step = self.rate / n as f64;
        match self.kind {
            InputKind::Real => (0..=n / 2).map(|k| k as f64 * step).collect(),
            InputKind::Complex => {
                let signed = |k: usize| {
                    if k < n.div_ceil(2) {
                        k as f64
                    } else {
                        k as f64 - n as f64
                    }
                };
                let mut f: Vec<f64> = (0..n).map(|k| signed(k) * step).collect();
                if self.fftshift {
                    f.rotate_left(n.div_ceil(2));
                }
                f
            }
        }
    }
}

/// One frame's finished spectrum, handed to a writer.
pub struct SpectrumRow<'a, T> {
    pub stream: &'a StreamMeta,
    pub frame: u64,
    pub time_s: f64,
    /// Frame size in samples.
    pub n: usize,
    pub values: &'a [T],
}

/// A format writer. `write` is called in frame order per stream.
pub trait SpectrumWriter<T: Sample>: Send {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()>;
    /// Pushes buffered output to the destination (called when the pipeline is idle, for live use).
    fn flush(&mut self) -> io::Result<()>;
    /// Completes the output (npy rewrites its header) and flushes.
    fn finish(&mut self) -> io::Result<()>;
}

/// Creates the writer for `format` over an opened destination.
pub fn make_writer<T: Sample>(
    format: OutputFormat,
    dest: destination::Destination,
) -> io::Result<Box<dyn SpectrumWriter<T>>> {
    Ok(match format {
        OutputFormat::Text => Box::new(text::TextWriter::new(dest)),
        OutputFormat::Csv => Box::new(csv::CsvWriter::new(dest)),
        OutputFormat::Ndjson => Box::new(ndjson::NdjsonWriter::new(dest)),
        OutputFormat::F32 => Box::new(raw::F32Writer::new(dest)),
        OutputFormat::Npy => Box::new(npy::NpyWriter::new(dest, T::NAME == "f64")?),
    })
}

/// Builds one text line at a time (numbers in shortest round-trip form) and writes it whole.
/// Shared by the text, csv and ndjson writers.
pub(crate) struct LineWriter {
    dest: destination::Destination,
    line: Vec<u8>,
    numbers: ryu::Buffer,
}

impl LineWriter {
    pub fn new(dest: destination::Destination) -> Self {
        LineWriter {
            dest,
            line: Vec::new(),
            numbers: ryu::Buffer::new(),
        }
    }

    /// Appends raw text.
    pub fn text(&mut self, text: &str) -> &mut Self {
        self.line.extend_from_slice(text.as_bytes());
        self
    }

    /// Appends one number.
    pub fn number<T: Sample>(&mut self, v: T) -> &mut Self {
        self.line
            .extend_from_slice(v.format_shortest(&mut self.numbers).as_bytes());
        self
    }

    /// Appends numbers separated by `separator`.
    pub fn numbers<T: Sample>(&mut self, values: &[T], separator: u8) -> &mut Self {
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.line.push(separator);
            }
            self.number(*v);
        }
        self
    }

    /// Ends the line and writes it.
    pub fn end_line(&mut self) -> io::Result<()> {
        self.line.push(b'\n');
        let result = self.dest.write_all(&self.line);
        self.line.clear();
        result
    }

    pub fn flush(&mut self) -> io::Result<()> {
        use std::io::Write;
        self.dest.flush()
    }
}
