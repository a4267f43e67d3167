//! Flags a run would accept and then do nothing with, because of what its inputs are: refused
//! with the reason, as a user reading the output would otherwise take them to have acted. Only
//! flags given for the run are judged (the command line's, `Given`): a config file shared by
//! runs of every kind may set what some of them do not use. Judged from the inputs' names (a
//! receiver's address, an extension, `--input-format`, whether a path is a regular file) and a
//! SigMF recording's metadata (whether it gives its rate), before any input is opened. An input
//! whose format is found by its first bytes is text, WAV or compressed audio (`source::sniff`):
//! never raw, but perhaps complex ("re im" lines); for `--fftshift` a regular file of text is
//! read as far as its first sample line to tell.

use super::options::Options;
use crate::error::{FftdError, Result};
use crate::source::spec::is_receiver;
use crate::source::InputFormat;
use crate::types::InputKind;

/// What an input is, as far as its name tells.
#[derive(Clone, Copy)]
enum Kind {
    /// The microphone: real samples, its channels chosen, reopened by `--retry`.
    Mic,
    /// An rtl_tcp:// or soapy:// receiver: complex, reopened by `--retry`.
    Receiver,
    /// A file in this format (`--input-format`, else its extension); None: found by its bytes.
    File(Option<InputFormat>),
}

fn kinds(o: &Options) -> Vec<Kind> {
    if o.mic.is_some() {
        return vec![Kind::Mic];
    }
    let kind = |path: &String| match path.as_str() {
        p if is_receiver(p) => Kind::Receiver,
        "-" => Kind::File(o.input_format),
        p => Kind::File(o.input_format.or_else(|| InputFormat::by_extension(p))),
    };
    o.file.iter().map(kind).collect()
}

/// Raw samples, whose interleaved channels only `--channels` gives.
fn is_raw(format: InputFormat) -> bool {
    use InputFormat::*;
    matches!(format, F32 | S16 | Cf32 | Cu8 | Cs8 | Cs16)
}

/// A format whose header gives its sample rate (a SigMF recording's may not: `--rate` then
/// stands in).
fn has_own_rate(format: InputFormat) -> bool {
    format == InputFormat::Wav || format.is_compressed_audio()
}

/// Whether the SigMF recording `path` names gives its sample rate (one whose metadata cannot be
/// read is left to its open, which says why).
fn sigmf_gives_rate(path: &str) -> bool {
    crate::source::sigmf::read_recording(path, None).is_ok_and(|r| r.rate.is_some())
}

/// A format whose samples are real whatever the file holds (a raw format's kind as its reader
/// takes it, `source::raw::sample_kind`).
fn is_real_only(format: InputFormat) -> bool {
    let real_raw = is_raw(format) && crate::source::raw::sample_kind(format) == InputKind::Real;
    real_raw || format == InputFormat::Wav || format.is_compressed_audio()
}

/// Whether the regular file `path`, text by `--input-format` or of a format its first bytes
/// show (`format` None), holds real samples only: WAV or compressed audio, or text whose first
/// sample line is one number. Stdin (even redirected from a file: it is read once), a FIFO, a
/// file that cannot be read or whose first sample is bad are not judged (false): their open
/// says what they are.
fn file_found_real(path: &str, format: Option<InputFormat>) -> bool {
    use crate::source::{input::InputReader, sniff::sniff, text::TextSource};
    if path == "-" // (stdin: not a disk file named `-`)
        || !matches!(format, None | Some(InputFormat::Text))
        || !std::fs::metadata(path).is_ok_and(|m| m.is_file())
    {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut reader = InputReader::from_read(file);
    let format = match format {
        Some(format) => format,
        None => match sniff(&mut reader) {
            Ok(format) => format,
            Err(_) => return false,
        },
    };
    if format != InputFormat::Text {
        return is_real_only(format);
    }
    // f64: only the first sample line's count of numbers matters here
    let mut text = TextSource::new(path, reader, 1.0).in_precision(crate::types::Precision::F64);
    matches!(text.detect_kind(), Ok(Some((_, None))))
}

/// Which of `--rate`, `--channels`, `--fftshift` and `--retry` were given for the run itself.
#[derive(Clone, Copy)]
pub(super) struct Given {
    rate: bool,
    channels: bool,
    fftshift: bool,
    retry: bool,
}

impl Given {
    pub(super) fn of(o: &Options) -> Self {
        Given {
            rate: o.rate.is_some(),
            channels: o.channels.is_some(),
            fftshift: o.fftshift,
            retry: o.retry.is_some(),
        }
    }
}

/// Refuses each of `--rate`, `--channels`, `--fftshift` and `--retry` that `given` holds where no
/// input of the run can use it. `nats_in_use`: rows or events go to a NATS server, whose loss
/// `--retry` also covers. A run with no input, or two kinds, is left to the input's own check.
pub(super) fn check_flags_apply(o: &Options, given: Given, nats_in_use: bool) -> Result<()> {
    if o.file.is_empty() == o.mic.is_none() {
        return Ok(());
    }
    let kinds = kinds(o);
    let names = || o.file.join(", ");
    let takes_rate = |(k, path): (&Kind, Option<&String>)| match k {
        Kind::Mic | Kind::Receiver => true,
        Kind::File(Some(InputFormat::Sigmf)) => !path.is_some_and(|p| sigmf_gives_rate(p)),
        Kind::File(format) => !format.is_some_and(has_own_rate),
    };
    let paths = o.file.iter().map(Some).chain(std::iter::repeat(None));
    let any_takes_rate = kinds.iter().zip(paths).any(takes_rate);
    if let Some(rate) = o.rate.filter(|_| given.rate && !any_takes_rate) {
        return usage(format!(
            "--rate {}: for raw and text files, SigMF recordings without core:sample_rate, --mic and receivers; {} {}",
            crate::types::shown(rate),
            names(),
            one_or_more(o, "gives its own rate", "give their own rates")
        ));
    }
    let takes_channels = |k: &Kind| match k {
        Kind::Mic => true,
        Kind::Receiver => false,
        Kind::File(format) => format.is_some_and(is_raw),
    };
    let unused = given.channels && !kinds.iter().any(takes_channels);
    if let Some(c) = o.channels.filter(|_| unused) {
        return usage(format!(
            "--channels {c}: for raw files (f32, s16, cf32, cu8, cs8, cs16: by extension or --input-format) and --mic; {} {}",
            names(),
            one_or_more(
                o,
                "gives its own channel count",
                "give their own channel counts"
            )
        ));
    }
    let may_be_complex = |(k, path): (&Kind, &String)| match k {
        Kind::Mic => false,
        Kind::Receiver => true,
        Kind::File(format) if format.is_some_and(is_real_only) => false,
        Kind::File(format) => !file_found_real(path, *format),
    };
    // (the microphone, real, has no file: none of its kinds is judged complex)
    if given.fftshift && !kinds.iter().zip(&o.file).any(may_be_complex) {
        return usage(format!(
            "--fftshift: orders a complex input's bins; {} (a real signal's bins run from DC up already)",
            match o.mic {
                Some(_) => "the microphone is real".to_string(),
                None => format!("{} {}", names(), one_or_more(o, "is real", "are real")),
            }
        ));
    }
    // (a receiver, a stream, stdin from a pipe or FIFO; or a path that cannot be read, whose
    // open names the problem)
    let reopened = |p: &String| match p.as_str() {
        "-" => !crate::source::stdin_is_regular_file(),
        p => is_receiver(p) || !std::fs::metadata(p).is_ok_and(|m| m.is_file()),
    };
    let live = o.mic.is_some() || o.file.iter().any(reopened);
    if given.retry && !live && !nats_in_use {
        return usage(format!(
            "--retry: reopens a microphone, a receiver, a FIFO or a piped stdin, or a NATS server gone; {} {} read once to the end",
            o.file
                .iter()
                .map(|f| match f.as_str() {
                    "-" => "stdin (redirected from a file)",
                    f => f,
                })
                .collect::<Vec<_>>()
                .join(", "),
            one_or_more(o, "is a file,", "are files,")
        ));
    }
    Ok(())
}

/// `one` for a run of one input file, else `more`.
fn one_or_more(o: &Options, one: &'static str, more: &'static str) -> &'static str {
    if o.file.len() == 1 {
        one
    } else {
        more
    }
}

fn usage(message: String) -> Result<()> {
    Err(FftdError::Usage(message))
}
