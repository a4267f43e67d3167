//! Compressed and Apple audio inputs — FLAC, MP3, Ogg Vorbis, AIFF/AIFF-C, CAF and M4A (AAC or
//! ALAC), raw ADTS AAC too — decoded by symphonia, from files and from streams (stdin, FIFOs).
//! fftd's own reader keeps WAV.
//!
//! - The container is found from the content (the extension or `--input-format` is only a hint):
//!   a misnamed file still decodes, and one that holds none of these is an error saying so.
//! - Gapless: the decoders trim encoder delay and padding where the container says them
//!   (symphonia's `gapless` option, on by default: MP3 with a LAME/Xing header, Ogg Vorbis, FLAC,
//!   AIFF, ALAC); AAC in MP4 and CAF keep their priming samples (symphonia does not trim them).
//! - Samples are symphonia's conversions to f64 (integer PCM `v / 2^(bits-1)`, as fftd's WAV
//!   reader), so a FLAC made from a WAV reads back the WAV's very values.
//! - Regular files are read through their own handle, seekable (an MP4 whose index lies at its
//!   end needs that); streams are read once, front to back (such an MP4 cannot be streamed, nor
//!   can CAF at all: symphonia reads a CAF file's chunks to its end, then seeks back).
//! - Every failure is one error naming the input: no audio found, an unsupported codec, corrupt
//!   data, a stream cut short (after the rows of what it holds: an AIFF or CAF file through
//!   `audio_cut`'s view, an AIFF, FLAC or MP3 short of its header's count by
//!   `check_promised`), a rate or channel layout that changes mid-stream. A decoder panic
//!   on hostile data is caught and reported the same way (its message kept off stderr).

use super::input::InputReader;
use super::{
    audio_probe, overflows, FileOptions, InputFormat, SampleSource, SourceInfo, BEYOND_F32,
};
use crate::error::{FftdError, Result};
use crate::types::InputKind;
use crate::types::Precision;
use std::io;
use std::sync::{Arc, Mutex};
use symphonia::core::codecs::audio::well_known as codec;
use symphonia::core::codecs::audio::{
    AudioCodecId, AudioCodecParameters, AudioDecoder, AudioDecoderOptions,
};
use symphonia::core::codecs::CodecParameters;
use symphonia::core::errors::Error as CodecError;
use symphonia::core::formats::{FormatReader, TrackType};

/// The audio format an extension names (lower case, without the dot).
pub(crate) fn format_of_extension(ext: &str) -> Option<InputFormat> {
    Some(match ext {
        "flac" => InputFormat::Flac,
        "mp3" => InputFormat::Mp3,
        // .opus: an Ogg stream whose codec symphonia lacks, said so by name
        "ogg" | "oga" | "opus" => InputFormat::Ogg,
        "aiff" | "aif" | "aifc" => InputFormat::Aiff,
        "caf" => InputFormat::Caf,
        "m4a" | "m4b" | "mp4" | "aac" => InputFormat::M4a,
        _ => return None,
    })
}

pub struct AudioSource {
    info: SourceInfo,
    reader: Box<dyn FormatReader>,
    decoder: Box<dyn AudioDecoder>,
    track: u32,
    /// What the container was found to be (for messages).
    container: String,
    /// Decoded interleaved samples not yet handed on, from `pending_at`.
    pending: Vec<f64>,
    pending_at: usize,
    /// One packet's samples, as decoded.
    block: Vec<f64>,
    /// Sample frames decoded so far.
    decoded: u64,
    /// Where the packet after the last one should start, in the track's time base (as far as
    /// its container tells: FLAC frames carry their sample number).
    next_pts: Option<i128>,
    /// The sample frames the container's header says it holds, and by how many fewer decoded
    /// it still counts as whole (None: not said, or not exact: Ogg, MP4).
    promised: Option<(u64, u64)>,
    /// What to say at the end of a file read through a view that stops where it does
    /// (`audio_cut`): its header gives more than it holds.
    cut_short: Option<String>,
    /// No more packets (the rest of `pending` is still handed on).
    ended: bool,
    /// An error met while `pending` still held samples: returned once they are handed on.
    failure: Option<FftdError>,
    /// A stream's reader (shared with the decoder's input): whether it is drained or stopped.
    stream: Option<Arc<Mutex<InputReader>>>,
    precision: Precision,
    decode_ns: u64,
}

/// Reads `path` (through `reader`, or its own file handle for a regular file) as compressed
/// audio; `format` is the hint (`--input-format` or the extension).
pub fn open(
    path: &str,
    mut reader: InputReader,
    format: InputFormat,
    opts: &FileOptions,
) -> Result<AudioSource> {
    AudioSource::new(path, reader.take_file(), reader, format, opts.precision)
}

impl AudioSource {
    /// Decodes `file` when given (a regular file, seekable), else what `reader` reads (a stream,
    /// or bytes in memory); values beyond `precision` are errors.
    pub fn new(
        path: &str,
        file: Option<std::fs::File>,
        reader: InputReader,
        format: InputFormat,
        precision: Precision,
    ) -> Result<Self> {
        let probed = audio_probe::probe_input(path, file, reader, format)?;
        let (reader, stream, cut_short) = (probed.reader, probed.stream, probed.cut_short);
        let fail = |what: String| FftdError::input(path, what);
        let container = reader.format_info().short_name.to_ascii_uppercase();
        let Some(track) = reader.default_track(TrackType::Audio) else {
            return Err(fail(format!("{container} file holds no audio track")));
        };
        let Some(CodecParameters::Audio(params)) = track.codec_params.clone() else {
            return Err(fail(format!("{container} file holds no audio track")));
        };
        let promised = track.num_frames.zip(promise_slack(&container));
        let track = track.id;
        let registry = symphonia::default::get_codecs();
        if registry.get_audio_decoder(params.codec).is_none() {
            return Err(fail(format!(
                "unsupported codec {} in its {container} container (fftd decodes FLAC, MP3, Vorbis, AAC-LC, ALAC and PCM)",
                codec_name(params.codec)
            )));
        }
        let options = AudioDecoderOptions::default().gapless(true);
        let decoder = guarded(|| registry.make_audio_decoder(&params, &options))
            .map_err(|e| fail(decoder_failure(e, &params, &container)))?;
        let mut source = AudioSource {
            info: SourceInfo {
                name: path.to_string(),
                rate: params.sample_rate.map_or(0.0, f64::from),
                channels: params.channels.as_ref().map_or(0, |c| c.count()),
                kind: InputKind::Real,
                live: false,
            },
            reader,
            decoder,
            track,
            next_pts: Self::first_pts(&container),
            promised,
            cut_short,
            container,
            pending: Vec::new(),
            pending_at: 0,
            block: Vec::new(),
            decoded: 0,
            ended: false,
            failure: None,
            stream,
            precision,
            decode_ns: 0,
        };
        source.prime()?;
        Ok(source)
    }

    /// Where the first packet must start: a FLAC stream's first frame starts at sample 0, so one
    /// that starts later followed a damaged first frame the reader skipped (`check_continuous`).
    fn first_pts(container: &str) -> Option<i128> {
        (container == "FLAC").then_some(0)
    }

    /// Decodes up to the first samples, so a stream's rate and channels are those it decodes to
    /// (some containers do not say them up front) and an input with no audio fails at once.
    fn prime(&mut self) -> Result<()> {
        while self.pending.is_empty() && !self.ended {
            self.decode_packet()?;
        }
        if self.pending.is_empty() && !self.stopped() {
            return Err(FftdError::input(
                &self.info.name,
                format!("{} file holds no audio samples", self.container),
            ));
        }
        if self.info.rate <= 0.0 && !self.stopped() {
            return Err(FftdError::input(
                &self.info.name,
                format!("{} file does not say its sample rate", self.container),
            ));
        }
        Ok(())
    }

    /// Whether the run was stopped (SIGINT) while reading a stream: its end is no error then.
    fn stopped(&self) -> bool {
        self.stream
            .as_ref()
            .is_some_and(|s| s.lock().is_ok_and(|r| r.stopped()))
    }

    /// A stream with nothing more buffered: hand on what is decoded rather than wait.
    fn drained(&self) -> bool {
        self.stream
            .as_ref()
            .is_some_and(|s| s.lock().is_ok_and(|r| r.drained()))
    }

    /// Reads and decodes the next packet of the track onto `pending`; sets `ended` at the end.
    fn decode_packet(&mut self) -> Result<()> {
        let packet = match guarded(|| self.reader.next_packet()) {
            Ok(Some(packet)) => packet,
            Ok(None) => {
                self.ended = true;
                return self.check_promised();
            }
            Err(e) => return self.failed(e),
        };
        if packet.track_id != self.track {
            return Ok(());
        }
        self.check_continuous(&packet)?;
        let decoding = std::time::Instant::now();
        let (decoder, block) = (&mut self.decoder, &mut self.block);
        let decoded = guarded(|| {
            decoder.decode(&packet).map(|buf| {
                buf.copy_to_vec_interleaved::<f64>(block);
                (buf.spec().rate(), buf.spec().channels().count())
            })
        });
        self.decode_ns += decoding.elapsed().as_nanos() as u64;
        let (rate, channels) = match decoded {
            Ok(spec) => spec,
            Err(e) => return self.failed(e),
        };
        if self.block.is_empty() {
            return Ok(());
        }
        self.check_spec(f64::from(rate), channels)?;
        self.check_values()?;
        self.pending.extend_from_slice(&self.block);
        self.decoded += (self.block.len() / channels) as u64;
        Ok(())
    }

    /// A packet that starts after where the last one ended means the demuxer skipped damaged
    /// data (symphonia's FLAC reader resynchronises past a frame that fails its CRC): an error,
    /// not a signal silently shorter. (The end is taken as the later of the two conventions
    /// symphonia's readers use, with and without the trimmed frames.)
    fn check_continuous(&mut self, packet: &symphonia::core::packet::Packet) -> Result<()> {
        let pts = i128::from(packet.pts.get());
        let valid = i128::from(packet.dur.get());
        let block = valid + i128::from(packet.trim_start.get()) + i128::from(packet.trim_end.get());
        let expected = self.next_pts.replace(pts + block.max(valid));
        match expected {
            Some(end) if pts > end => {
                self.ended = true;
                let at = match self.decoded {
                    0 => "at its start".to_string(),
                    n => format!("after {n} sample frames"),
                };
                Err(FftdError::input(
                    &self.info.name,
                    format!(
                        "corrupt {} stream {at}: a damaged stretch of {} time units was skipped by the decoder",
                        self.container,
                        pts - end
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// At the end: a file whose header promised more sample frames than decoded (beyond the
    /// slack) was cut short, which its demuxer takes for an ordinary end (an AIFF from a pipe
    /// that ends inside a sample, an MP3 short of its Xing/Info or VBRI count).
    fn check_promised(&mut self) -> Result<()> {
        if let Some(said) = self.cut_short.take() {
            return Err(FftdError::input(&self.info.name, said));
        }
        match self.promised {
            Some((n, slack)) if self.decoded + slack < n && !self.stopped() => Err(FftdError::input(
                &self.info.name,
                format!(
                    "{} stream ends early (truncated): {} of the {n} sample frames its header gives",
                    self.container, self.decoded
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The first block sets the rate and channels; a later one that differs is an error.
    fn check_spec(&mut self, rate: f64, channels: usize) -> Result<()> {
        if self.decoded == 0 && self.pending.is_empty() {
            if rate > 0.0 {
                self.info.rate = rate;
            }
            self.info.channels = channels;
        }
        if channels == 0 || channels != self.info.channels || rate != self.info.rate {
            self.ended = true;
            return Err(FftdError::input(
                &self.info.name,
                format!(
                    "{} stream changes from {} channel(s) at {} Hz to {channels} at {rate} Hz at sample frame {}: fftd analyses one layout per input",
                    self.container, self.info.channels, self.info.rate, self.decoded
                ),
            ));
        }
        Ok(())
    }

    /// NaN, infinity or (in f32) values beyond f32 are errors naming the sample frame.
    fn check_values(&mut self) -> Result<()> {
        let bad = |v: &f64| !v.is_finite() || overflows(*v, self.precision);
        let Some(at) = self.block.iter().position(bad) else {
            return Ok(());
        };
        self.ended = true;
        let v = self.block[at];
        let frame = self.decoded + (at / self.info.channels) as u64;
        let what = match v.is_finite() {
            true => BEYOND_F32.to_string(),
            false => format!("{v}, not a finite number"),
        };
        Err(FftdError::input(
            &self.info.name,
            format!("sample frame {frame} decodes to {v}: {what}"),
        ))
    }

    /// The decoder or demuxer failed: the end of a stopped stream, else an error naming it.
    fn failed(&mut self, e: Failure) -> Result<()> {
        self.ended = true;
        if self.stopped() {
            return Ok(());
        }
        let after = match self.decoded {
            0 => "before its first samples".to_string(),
            n => format!("after {n} sample frames"),
        };
        let container = &self.container;
        let what = match &e {
            Failure::Codec(CodecError::IoError(io))
                if io.kind() == io::ErrorKind::UnexpectedEof =>
            {
                format!("{container} stream ends early (truncated) {after}")
            }
            Failure::Codec(CodecError::IoError(io)) => {
                format!("reading its {container} stream {after}: {io}")
            }
            Failure::Codec(CodecError::Unsupported(feature)) => {
                format!("{container} stream uses an unsupported feature {after}: {feature}")
            }
            _ => format!("corrupt {container} stream {after}: {}", e.say()),
        };
        Err(FftdError::input(&self.info.name, what))
    }
}

impl SampleSource for AudioSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        let channels = self.info.channels.max(1);
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        loop {
            let have = (self.pending.len() - self.pending_at) / channels;
            if have >= max_frames || self.ended || (have > 0 && self.drained()) {
                break;
            }
            if self.pending_at > 0 {
                self.pending.drain(..self.pending_at);
                self.pending_at = 0;
            }
            // the samples decoded before a failure are handed on first, the error next call
            if let Err(e) = self.decode_packet() {
                if have == 0 {
                    return Err(e);
                }
                self.failure = Some(e);
                break;
            }
        }
        let have = (self.pending.len() - self.pending_at) / channels;
        let frames = have.min(max_frames);
        let end = self.pending_at + frames * channels;
        out.extend_from_slice(&self.pending[self.pending_at..end]);
        self.pending_at = end;
        Ok(frames)
    }

    fn take_decode_ns(&mut self) -> u64 {
        std::mem::take(&mut self.decode_ns)
    }
}

/// How many fewer sample frames than its header gives a `container` may decode to (None: its
/// count is not exact). An MP3's Xing/Info or VBRI count may differ by one MPEG frame; AIFF
/// and FLAC count every frame. (A CAF's packet table does not: an ALAC one of 1200 frames
/// gives 4096. A CAF file cut short is found by `audio_cut` instead, and none is piped.)
fn promise_slack(container: &str) -> Option<u64> {
    match container {
        "MP3" => Some(1152),
        "AIFF" | "FLAC" => Some(0),
        _ => None,
    }
}

/// Why `params`' decoder could not be made, in a message's words.
fn decoder_failure(e: Failure, params: &AudioCodecParameters, container: &str) -> String {
    let channels = params.channels.as_ref().map_or(0, |c| c.count());
    match e {
        // (symphonia's AAC decoder takes one or two channels: 3 and 4 fail on their program
        // config element, 5.1 as "too complex"; helper-53)
        Failure::Codec(CodecError::Unsupported(_))
            if params.codec == codec::CODEC_ID_AAC && channels != 1 && channels != 2 =>
        {
            let layout = match channels {
                0 => "this channel layout".to_string(),
                n => format!("{n} channels"),
            };
            format!("AAC of {layout} is not decoded (symphonia decodes mono and stereo AAC only): convert it, e.g. ffmpeg -i IN -c:a flac OUT.flac")
        }
        e => format!("cannot decode its {container} audio: {}", e.say()),
    }
}

/// A codec's name for messages (the ones a user is likely to meet; others by symphonia's id).
fn codec_name(id: AudioCodecId) -> String {
    let known = [
        (codec::CODEC_ID_OPUS, "Opus"),
        (codec::CODEC_ID_SPEEX, "Speex"),
        (codec::CODEC_ID_AC3, "AC-3"),
        (codec::CODEC_ID_EAC3, "E-AC-3"),
        (codec::CODEC_ID_DCA, "DTS"),
        (codec::CODEC_ID_WMA, "WMA"),
        (codec::CODEC_ID_WAVPACK, "WavPack"),
        (codec::CODEC_ID_MONKEYS_AUDIO, "Monkey's Audio"),
        (codec::CODEC_ID_MP1, "MPEG layer I"),
        (codec::CODEC_ID_MP2, "MPEG layer II"),
        (codec::CODEC_ID_ADPCM_IMA_QT, "IMA ADPCM"),
        (codec::CODEC_ID_ADPCM_MS, "MS ADPCM"),
        (codec::CODEC_ID_PCM_ALAW, "A-law"),
        (codec::CODEC_ID_PCM_MULAW, "mu-law"),
    ];
    known.iter().find(|(k, _)| *k == id).map_or_else(
        || format!("(symphonia codec id {id})"),
        |(_, n)| n.to_string(),
    )
}

/// Why a guarded decoder call failed.
pub(super) enum Failure {
    Codec(CodecError),
    /// The decoder panicked (on hostile data): reported as corrupt data.
    Panicked,
}

impl Failure {
    pub(super) fn say(&self) -> String {
        match self {
            Failure::Codec(e) => e.to_string(),
            Failure::Panicked => "the decoder gave up on malformed data".into(),
        }
    }
}

thread_local! {
    /// Set while a guarded call runs: its panic is caught and reported, not printed.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a symphonia call, turning a panic inside it into `Failure::Panicked`. The panic hook,
/// wrapped once, stays quiet for such panics and prints every other as before.
pub(super) fn guarded<T>(
    call: impl FnOnce() -> symphonia::core::errors::Result<T>,
) -> Result<T, Failure> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(|g| g.get()) {
                previous(info)
            }
        }));
    });
    GUARDED.with(|g| g.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
    GUARDED.with(|g| g.set(false));
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Failure::Codec(e)),
        Err(_) => Err(Failure::Panicked),
    }
}
