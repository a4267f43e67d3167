//! Signal sources. Each source yields interleaved sample frames (one value per channel, complex
//! samples as re,im pairs) as f64 blocks; `channels` then turns them into the streams fftd analyses.
//!
//! - `text`: one sample per line (`re` or `re im`), `#` comments and blank lines skipped.
//! - `wav`: RIFF/WAVE (also RF64/BW64 and WAVE_FORMAT_EXTENSIBLE) through fftd's own parser:
//!   8-bit unsigned, 16/24/32-bit integer PCM, 32/64-bit float, A-law and mu-law, any channel
//!   count; from pipes too (unknown sizes read to the end), data that ends early analysed with a
//!   warning.
//! - `raw`: headerless little-endian `f32`, `s16` or complex `cf32` (interleaved I/Q), and the
//!   SDR I/Q formats `cu8`, `cs8`, `cs16` (`iq` says how each is scaled).
//! - `sigmf`: SigMF recordings (`.sigmf-meta` and its `.sigmf-data`), every datatype of the spec;
//!   the captures' centre frequencies become the stream's `tuning`.
//! - `audio`: compressed and Apple audio (FLAC, MP3, Ogg Vorbis, AIFF, CAF, M4A/AAC) through
//!   symphonia.
//! - `rtl_tcp`: an `rtl_tcp://HOST:PORT` receiver, tuned and then read as live complex I/Q.
//! - `soapy`: a `soapy://ARGS` SoapySDR receiver (libSoapySDR loaded at run time), live I/Q.
//! - `sweep`: `--sweep`, a tunable receiver (rtl_tcp, SoapySDR) retuned hop after hop across a band.
//! - `sniff`: the format of an input with no `--input-format` and no known extension, from its
//!   first bytes (audio containers and WAV; anything else is text).
//! - `mic`: live capture through cpal.
//! - `retry`: `--retry`, a live input reopened when it fails (`retry_policy`, `outages`).
//!
//! A path of `-` reads standard input.
//!
//! Every source checks its samples against the working precision (`--precision`): a value that
//! is NaN or infinite, or one that f32 cannot hold (it would become infinity), is an error naming
//! the input and where in it the value lies (`overflows`).

pub mod audio;
mod audio_cut;
mod audio_probe;
pub(crate) mod channels;
pub(crate) mod dc;
pub mod input;
pub mod iq;
pub(crate) mod mic;
pub(crate) mod mic_device;
pub(crate) mod outages;
pub mod raw;
pub(crate) mod retry;
pub(crate) mod retry_policy;
pub(crate) mod rtl_tcp;
pub(crate) mod seekable;
pub mod sigmf;
pub(crate) mod sniff;
pub(crate) mod soapy;
pub mod spec;
pub(crate) mod sweep;
pub mod text;
pub mod wav;

use crate::error::{FftdError, Result};
use crate::types::InputKind;
use crate::types::Precision;
use input::InputReader;
use serde::Deserialize;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How a file's bytes are to be read (`--input-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    /// One sample per line ("re" or "re im").
    Text,
    /// RIFF/WAVE file.
    Wav,
    /// Raw little-endian float32 samples.
    F32,
    /// Raw little-endian signed 16-bit samples, scaled to [-1, 1).
    S16,
    /// Raw interleaved complex float32 (I, Q), the usual SDR format.
    Cf32,
    /// FLAC (native or in Ogg), decoded by symphonia.
    Flac,
    /// MPEG audio layer III.
    Mp3,
    /// Ogg Vorbis.
    Ogg,
    /// AIFF or AIFF-C.
    Aiff,
    /// Apple Core Audio Format (PCM or ALAC).
    Caf,
    /// MP4 audio (AAC or ALAC), also raw ADTS AAC.
    M4a,
    /// Raw interleaved unsigned 8-bit I/Q (RTL-SDR), (x - 127.5) / 127.5.
    Cu8,
    /// Raw interleaved signed 8-bit I/Q (HackRF), x / 128.
    Cs8,
    /// Raw interleaved little-endian signed 16-bit I/Q (USRP, LimeSDR, Airspy), x / 32768.
    Cs16,
    /// SigMF recording: the .sigmf-meta file (or the .sigmf-data beside it).
    Sigmf,
}

impl InputFormat {
    /// The format implied by a file name's extension; text when there is none we know.
    pub(crate) fn from_extension(path: &str) -> InputFormat {
        Self::by_extension(path).unwrap_or(InputFormat::Text)
    }

    /// The format a file name's extension names, if it is one fftd knows.
    pub(crate) fn by_extension(path: &str) -> Option<InputFormat> {
        let ext = Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        Some(match ext.as_deref()? {
            "wav" | "wave" => InputFormat::Wav,
            "f32" => InputFormat::F32,
            "s16" => InputFormat::S16,
            "cf32" => InputFormat::Cf32,
            "cu8" => InputFormat::Cu8,
            "cs8" => InputFormat::Cs8,
            "cs16" => InputFormat::Cs16,
            "sigmf-meta" | "sigmf-data" => InputFormat::Sigmf,
            "txt" => InputFormat::Text,
            other => audio::format_of_extension(other)?,
        })
    }

    /// Decoded through symphonia (`audio`).
    pub(crate) fn is_compressed_audio(self) -> bool {
        matches!(
            self,
            InputFormat::Flac
                | InputFormat::Mp3
                | InputFormat::Ogg
                | InputFormat::Aiff
                | InputFormat::Caf
                | InputFormat::M4a
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            InputFormat::Text => "text",
            InputFormat::Wav => "wav",
            InputFormat::F32 => "f32",
            InputFormat::S16 => "s16",
            InputFormat::Cf32 => "cf32",
            InputFormat::Flac => "flac",
            InputFormat::Mp3 => "mp3",
            InputFormat::Ogg => "ogg",
            InputFormat::Aiff => "aiff",
            InputFormat::Caf => "caf",
            InputFormat::M4a => "m4a",
            InputFormat::Cu8 => "cu8",
            InputFormat::Cs8 => "cs8",
            InputFormat::Cs16 => "cs16",
            InputFormat::Sigmf => "sigmf",
        }
    }
}

/// What a source knows about its signal once opened.
#[derive(Clone, Debug)]
pub struct SourceInfo {
    /// The path or device name, as given by the user (used in messages and file names).
    pub name: String,
    /// Samples per second per channel.
    pub rate: f64,
    /// Interleaved channels per sample frame.
    pub channels: usize,
    /// Real or complex samples.
    pub kind: InputKind,
    /// Live capture: frames are dropped (and counted) rather than stall the source.
    pub live: bool,
}

/// A stream of interleaved samples.
pub trait SampleSource: Send {
    fn info(&self) -> &SourceInfo;

    /// Appends up to `max_frames` sample frames (every channel, complex as re,im) to `out`.
    /// Returns how many sample frames were appended; `Ok(0)` means the end of the input.
    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize>;

    /// Sample frames lost inside the source since the last call (live capture overruns).
    /// The reader restarts framing after a gap so no frame straddles it.
    fn take_gap(&mut self) -> u64 {
        0
    }

    /// Sample frames of stream time an outage took since the last call (`--retry`: the input
    /// failed and was reopened, `retry`). Not lost frames: the reader restarts framing after it
    /// and row times run on by it.
    fn take_outage(&mut self) -> u64 {
        0
    }

    /// Nanoseconds of the reads since the last call spent decoding bytes into samples
    /// (`--stats`' decode share; 0 for sources that do not tell it apart from reading).
    fn take_decode_ns(&mut self) -> u64 {
        0
    }

    /// How long the input had sent nothing when a read failed (a receiver given up for silence):
    /// the outage `--retry` reports began that long before the error.
    fn silent_for(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// The centre frequencies the input was recorded at, when it says (SigMF captures).
    fn tuning(&self) -> Option<std::sync::Arc<crate::types::tuning::Tuning>> {
        None
    }

    /// Asks a receiver for centre frequency `hz` (`--sweep`); samples read after it may still
    /// predate it. Inputs that cannot be retuned say so.
    fn retune(&mut self, _hz: f64) -> Result<()> {
        Err(FftdError::input(
            &self.info().name,
            "cannot be retuned (--sweep needs an rtl_tcp:// or soapy:// receiver)",
        ))
    }
}

/// Options a file source needs beyond its path.
#[derive(Clone, Debug)]
pub struct FileOptions {
    /// Forced format; `None` picks by extension (text for stdin).
    pub format: Option<InputFormat>,
    /// Rate for formats without a header (text, raw). WAV takes its own.
    pub rate: f64,
    /// Interleaved channels in raw files.
    pub channels: usize,
    /// Set to end reading early (stdin reads check it every 50 ms).
    pub stop: Arc<AtomicBool>,
    /// The precision samples are analysed in: values beyond its range are errors.
    pub precision: Precision,
}

/// Whether the finite value `v` is beyond what `precision` holds (it would become infinity).
pub fn overflows(v: f64, precision: Precision) -> bool {
    precision == Precision::F32 && (v as f32).is_infinite()
}

/// What a message says of a value that `overflows` f32.
pub(crate) const BEYOND_F32: &str =
    "beyond the f32 range (magnitudes up to 3.4028235e38): analyse it with --precision f64";

/// Opens `path` (or stdin for `-`) as a sample source.
pub(crate) fn open_file(path: &str, opts: &FileOptions) -> Result<Box<dyn SampleSource>> {
    let reader = open_reader(path, &opts.stop)?;
    open_with_reader(path, reader, opts)
}

/// The sample source of `path` read through `reader` (from `open_reader`). A stream stopped
/// (SIGINT/SIGTERM) before its header or first sample arrived is an empty input, not an error:
/// the run ends with what it has, which is nothing from this input.
pub(crate) fn open_with_reader(
    path: &str,
    mut reader: InputReader,
    opts: &FileOptions,
) -> Result<Box<dyn SampleSource>> {
    let format = match opts.format.or_else(|| named_format(path)) {
        Some(format) => format,
        None => sniff::sniff(&mut reader).map_err(|e| FftdError::io(path, e))?,
    };
    let stopped = opts.stop.clone();
    let opened: Result<Box<dyn SampleSource>> = match format {
        InputFormat::Text => {
            let source = text::TextSource::new(path, reader, opts.rate);
            text::PrimedTextSource::open(source.in_precision(opts.precision))
                .map(|s| Box::new(s) as _)
        }
        InputFormat::Wav => {
            wav::WavSource::new(path, reader).map(|s| Box::new(s.in_precision(opts.precision)) as _)
        }
        InputFormat::Sigmf => sigmf::open(path, reader, opts),
        InputFormat::F32
        | InputFormat::S16
        | InputFormat::Cf32
        | InputFormat::Cu8
        | InputFormat::Cs8
        | InputFormat::Cs16 => raw::RawSource::new(path, reader, format, opts.rate, opts.channels)
            .map(|s| Box::new(s) as _),
        InputFormat::Flac
        | InputFormat::Mp3
        | InputFormat::Ogg
        | InputFormat::Aiff
        | InputFormat::Caf
        | InputFormat::M4a => audio::open(path, reader, format, opts).map(|s| Box::new(s) as _),
    };
    match opened {
        Err(_) if stopped.load(std::sync::atomic::Ordering::Relaxed) => {
            Ok(Box::new(EmptySource::new(path, format, opts)))
        }
        other => other,
    }
}

/// The format `path`'s name gives: none for stdin or an extension fftd does not know (`sniff`
/// then looks at its first bytes).
fn named_format(path: &str) -> Option<InputFormat> {
    match path {
        "-" => None,
        _ => InputFormat::by_extension(path),
    }
}

/// Whether `path` is read as a stream, opened once and read front to back: stdin (`-`), or
/// anything that is not a regular file or a folder (a FIFO, process substitution's `/dev/fd/N`,
/// a character device, a socket).
pub(crate) fn is_stream(path: &str) -> bool {
    path == "-" || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// A read that met a bad value (`fault`): the whole sample frames of `per_frame` values the
/// decoder left in `out` after `before` are handed on, the values past them taken off, and the
/// fault kept in `pending` for the next read; with no whole frame, the fault now. The frames
/// handed on (`RawSource`, `WavSource`).
pub(crate) fn before_the_fault(
    out: &mut Vec<f64>,
    before: usize,
    per_frame: usize,
    fault: FftdError,
    pending: &mut Option<FftdError>,
) -> Result<usize> {
    let frames = (out.len() - before) / per_frame.max(1);
    out.truncate(before + frames * per_frame);
    if frames == 0 {
        return Err(fault);
    }
    *pending = Some(fault);
    Ok(frames)
}

/// Whether stdin is redirected from a regular file (`fftd --file - < x.wav`): read once to the
/// end, as that file would be.
pub(crate) fn stdin_is_regular_file() -> bool {
    std::fs::metadata("/proc/self/fd/0").is_ok_and(|m| m.is_file())
}

/// A buffered reader over a regular file, or a stream's pump (`is_stream`), with clear errors
/// for missing files and folders. A stream's pump starts at once: its open (a FIFO waiting for
/// a writer) runs while other inputs are opened.
pub(crate) fn open_reader(path: &str, stop: &Arc<AtomicBool>) -> Result<InputReader> {
    if path == "-" {
        return Ok(InputReader::stdin(stop.clone()));
    }
    let meta = std::fs::metadata(path).map_err(|e| FftdError::io(path, e))?;
    if meta.is_dir() {
        return Err(FftdError::input(path, "is a directory, not a file"));
    }
    if !meta.is_file() {
        return Ok(InputReader::stream_path(path, stop.clone()));
    }
    let file = File::open(path).map_err(|e| FftdError::io(path, e))?;
    Ok(InputReader::file(file))
}

/// An input stopped before it said what it holds: no samples.
struct EmptySource {
    info: SourceInfo,
}

impl EmptySource {
    fn new(path: &str, format: InputFormat, opts: &FileOptions) -> Self {
        let (channels, kind) = match format {
            InputFormat::Text | InputFormat::Wav => (1, InputKind::Real),
            audio if audio.is_compressed_audio() => (1, InputKind::Real),
            raw => (opts.channels, raw::sample_kind(raw)),
        };
        EmptySource {
            info: SourceInfo {
                name: path.to_string(),
                rate: opts.rate,
                channels,
                kind,
                live: false,
            },
        }
    }
}

impl SampleSource for EmptySource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, _out: &mut Vec<f64>, _max_frames: usize) -> Result<usize> {
        Ok(0)
    }
}
