//! Finding an audio input's container: symphonia's prober on a regular file (its own handle,
//! seekable) or a stream (read once, front to back), with a second look at a file cut short
//! (`audio_cut`), and what a failure to find one means, in one line for the user.

use super::audio::{guarded, Failure};
use super::input::InputReader;
use super::{audio_cut, InputFormat};
use crate::error::{FftdError, Result};
use std::io::{self, Read};
use std::sync::{Arc, Mutex};
use symphonia::core::errors::Error as CodecError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, FormatReader};
use symphonia::core::io::{MediaSource, MediaSourceStream, ReadOnlySource};
use symphonia::core::meta::MetadataOptions;

/// A container found: its reader, a stream's shared reader, and what to say at the end of a
/// file read through `audio_cut`'s view.
pub(super) struct Probed {
    pub(super) reader: Box<dyn FormatReader>,
    pub(super) stream: Option<Arc<Mutex<InputReader>>>,
    pub(super) cut_short: Option<String>,
}

/// Probes `file` when given (a regular file), else what `reader` reads; `format` is the hint.
pub(super) fn probe_input(
    path: &str,
    file: Option<std::fs::File>,
    mut reader: InputReader,
    format: InputFormat,
) -> Result<Probed> {
    let content = format_of_start(file.as_ref(), &mut reader);
    let begins_as_format = content == Some(format);
    let second_look = file.as_ref().and_then(|f| f.try_clone().ok());
    let (input, stream): (Box<dyn MediaSource>, _) = match file {
        // (an MP3 file without a Xing/Info or VBRI count: symphonia's reader estimates one from
        // its first frames' bitrate when it can seek, then trims every packet past it; read front
        // to back, it counts only what a tag says, as from a pipe)
        Some(file) if format == InputFormat::Mp3 => (Box::new(ReadOnlySource::new(file)), None),
        Some(file) => (Box::new(file), None),
        None => {
            let shared = Arc::new(Mutex::new(reader));
            let input = ReadOnlySource::new(SharedReader(shared.clone()));
            (Box::new(input), Some(shared))
        }
    };
    let mut cut_short = None;
    let opened = match probe(input, format) {
        Err(e) if begins_as_format && is_early_end(&e) => {
            match second_look.and_then(|f| audio_cut::second_view(format, &f)) {
                Some(cut) => {
                    cut_short = Some(cut.said);
                    probe(cut.view, format)
                }
                None => Err(e),
            }
        }
        opened => opened,
    };
    let streamed = stream
        .as_ref()
        .is_some_and(|s| s.lock().is_ok_and(|r| r.is_stream()));
    let why = |e| probe_failure(format, streamed, content, e);
    let reader = opened.map_err(|e| FftdError::input(path, why(e)))?;
    Ok(Probed {
        reader,
        stream,
        cut_short,
    })
}

/// The decoder's extension hint for `format`.
fn hint_for(format: InputFormat) -> &'static str {
    match format {
        InputFormat::Flac => "flac",
        InputFormat::Mp3 => "mp3",
        InputFormat::Ogg => "ogg",
        InputFormat::Aiff => "aiff",
        InputFormat::Caf => "caf",
        _ => "m4a",
    }
}

/// The formats this module reads, for messages.
const READS: &str = "FLAC, MP3, Ogg Vorbis, AIFF, CAF or M4A";

/// symphonia's prober on `input`, with `format`'s extension as its hint.
fn probe(
    input: Box<dyn MediaSource>,
    format: InputFormat,
) -> Result<Box<dyn FormatReader>, Failure> {
    let mss = MediaSourceStream::new(input, Default::default());
    let mut hint = Hint::new();
    hint.with_extension(hint_for(format));
    let options = (FormatOptions::default(), MetadataOptions::default());
    guarded(|| symphonia::default::get_probe().probe(&hint, mss, options.0, options.1))
}

/// Whether `e` is the input ending where more was expected.
fn is_early_end(e: &Failure) -> bool {
    matches!(e, Failure::Codec(CodecError::IoError(io)) if io.kind() == io::ErrorKind::UnexpectedEof)
}

/// The format the input's first bytes show (its magic number): a regular file's, read where
/// they lie, or a stream's, peeked (read again by the prober).
fn format_of_start(file: Option<&std::fs::File>, reader: &mut InputReader) -> Option<InputFormat> {
    match file {
        Some(file) => format_of_file_start(file),
        None => super::sniff::sniff(reader).ok(),
    }
}

/// The format a regular file's first bytes show (its magic number), whatever was read of it.
fn format_of_file_start(file: &std::fs::File) -> Option<InputFormat> {
    use std::os::unix::fs::FileExt;
    let mut start = [0u8; 12];
    let got = file.read_at(&mut start, 0).ok()?;
    super::sniff::format_of_start(&start[..got], true)
}

/// What the prober's failure means for `format`'s input (`streamed`: read from a pipe;
/// `content`: the format its first bytes' magic number names).
fn probe_failure(
    format: InputFormat,
    streamed: bool,
    content: Option<InputFormat>,
    e: Failure,
) -> String {
    let begins_as_format = content == Some(format);
    let what = match e {
        // (an Ogg reader wants its first page of audio whole before it gives a sample)
        e if begins_as_format && is_early_end(&e) && format == InputFormat::Ogg => {
            "the input ends before its first whole ogg page of audio (inside its headers or that page): a truncated file?".to_string()
        }
        e if begins_as_format && is_early_end(&e) => format!(
            "the input ends inside its {} header: a truncated file?",
            format.name()
        ),
        // (its first bytes are the format's magic number, cut or followed by no header)
        Failure::Codec(CodecError::Unsupported(_)) if begins_as_format => format!(
            "it begins as {0} but no whole {0} header follows: a truncated or damaged file?",
            format.name()
        ),
        e => probe_failure_kind(format, e),
    };
    match (streamed, format) {
        // (a WAV named as compressed audio: symphonia here reads no WAV)
        _ if content == Some(InputFormat::Wav) => format!(
            "{what}; its content is a WAV file (RIFF/WAVE): name it .wav or give --input-format wav"
        ),
        (true, InputFormat::M4a) => format!("{what}; an MP4 whose index (moov box) follows its audio cannot be read from a pipe: give the file itself, or remux it with ffmpeg -movflags +faststart"),
        (true, InputFormat::Caf) => format!("{what}; a CAF file is read to its end before its audio, so it cannot come from a pipe: give the file itself"),
        _ => what,
    }
}

fn probe_failure_kind(format: InputFormat, e: Failure) -> String {
    match e {
        Failure::Codec(CodecError::IoError(io)) if io.kind() == io::ErrorKind::UnexpectedEof => {
            format!("not a {READS} stream: none of them was found before the input ended")
        }
        Failure::Codec(CodecError::IoError(io)) => {
            format!(
                "cannot read it as {} (a corrupt header?): {io}",
                format.name()
            )
        }
        Failure::Codec(CodecError::Unsupported(_)) => format!(
            "not a {READS} stream (read as {}): its content matches none of them",
            format.name()
        ),
        other => format!("not a readable {READS} stream: {}", other.say()),
    }
}

/// A stream's reader, shared between the decoder's input and the source (which asks it whether
/// it is drained or stopped); symphonia wants its input `Sync`, which a `Mutex` makes it.
struct SharedReader(Arc<Mutex<InputReader>>);

impl Read for SharedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.lock() {
            Ok(mut reader) => reader.read(buf),
            Err(_) => Err(io::Error::other("input reader poisoned")),
        }
    }
}
