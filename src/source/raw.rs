//! Headerless little-endian sample files: `f32` (float32), `s16` (int16 scaled to [-1, 1)) and
//! `cf32` (interleaved complex float32 I/Q, as SDR tools write); the SDR I/Q formats `cu8`, `cs8`
//! and `cs16`, and a SigMF recording's data, decode through `iq::SampleType`. Multi-channel files
//! interleave channels (`--channels`). A file that ends inside a sample frame, or holds NaN/inf,
//! is an error naming the byte offset.

use super::input::InputReader;
use super::iq::SampleType;
use super::{InputFormat, SampleSource, SourceInfo};
use crate::error::{FftdError, Result};
use crate::types::tuning::Tuning;
use crate::types::InputKind;
use crate::types::Precision;
use std::io::Read;
use std::sync::Arc;

pub struct RawSource {
    info: SourceInfo,
    reader: InputReader,
    format: InputFormat,
    /// Bytes per sample frame (all channels, both parts of a complex value).
    frame_bytes: usize,
    bytes: Vec<u8>,
    offset: u64,
    /// Nanoseconds spent decoding since the last `take_decode_ns`.
    decode_ns: u64,
    /// A SigMF dataset's type and the precision its floats must fit (None: `format` says).
    typed: Option<(SampleType, Precision)>,
    tuning: Option<Arc<Tuning>>,
    /// A bad value found after whole sample frames that were handed on: the next read's answer.
    fault: Option<FftdError>,
}

/// A regular file too short for one sample frame of `frame_bytes` is said to be one before
/// the run, as an empty one is (a stream can only be read). One cut after whole frames is not:
/// their rows come out, then the cut's error.
fn refuse_short_file(path: &str, reader: &InputReader, frame_bytes: usize) -> Result<()> {
    match reader.regular_file_bytes_left() {
        Some(left) if left > 0 && left < frame_bytes as u64 => Err(FftdError::input(
            path,
            format!(
                "truncated: it holds {left} byte(s), less than one {frame_bytes}-byte sample frame"
            ),
        )),
        _ => Ok(()),
    }
}

impl RawSource {
    pub fn new(
        path: &str,
        reader: InputReader,
        format: InputFormat,
        rate: f64,
        channels: usize,
    ) -> Result<Self> {
        let source = Self::opened(path, reader, format, rate, channels)?;
        refuse_short_file(path, &source.reader, source.frame_bytes)?;
        Ok(source)
    }

    /// `new` but for the length of a regular file (`typed` checks it at its own frame size).
    fn opened(
        path: &str,
        mut reader: InputReader,
        format: InputFormat,
        rate: f64,
        channels: usize,
    ) -> Result<Self> {
        // an empty file is said to be one before the run (before an output is created), as
        // an empty text file is (`text::PrimedTextSource::open`); a stream can only be read
        if reader.is_regular_file_at_end() {
            return Err(FftdError::input(path, "is empty"));
        }
        let kind = sample_kind(format);
        // checked: a huge --channels must not wrap to a tiny (or zero) frame size
        let frame_bytes = frame_bytes(format, channels).ok_or_else(|| {
            FftdError::input(
                path,
                format!(
                    "cannot be read as {channels} interleaved {} channels",
                    format.name()
                ),
            )
        })?;
        Ok(RawSource {
            info: SourceInfo {
                name: path.to_string(),
                rate,
                channels,
                kind,
                live: false,
            },
            reader,
            format,
            frame_bytes,
            bytes: Vec::new(),
            offset: 0,
            decode_ns: 0,
            typed: None,
            tuning: None,
            fault: None,
        })
    }

    /// A source of samples of type `t` (a SigMF dataset), `channels` interleaved, recorded at
    /// `tuning`; floats beyond `precision` are errors.
    pub fn typed(
        path: &str,
        reader: InputReader,
        t: SampleType,
        precision: Precision,
        (rate, channels): (f64, usize),
        tuning: Option<Arc<Tuning>>,
    ) -> Result<Self> {
        let frame_bytes = channels
            .checked_mul(t.sample_bytes())
            .filter(|&b| b > 0)
            .ok_or_else(|| FftdError::input(path, format!("cannot hold {channels} channels")))?;
        let mut source = Self::opened(path, reader, InputFormat::F32, rate, channels)?;
        refuse_short_file(path, &source.reader, frame_bytes)?;
        source.info.kind = t.kind();
        source.frame_bytes = frame_bytes;
        source.typed = Some((t, precision));
        source.tuning = tuning;
        Ok(source)
    }

    /// Fills `self.bytes` with up to `len` bytes; fewer only at the end of the input. The buffer
    /// grows with what arrives (from 1 MiB, doubling), not to `len` up front: with many channels
    /// `len` can be far larger than the input.
    fn fill(&mut self, len: usize) -> Result<usize> {
        const FIRST: usize = 1 << 20;
        let mut size = len.min(FIRST.max(self.bytes.len()));
        self.bytes.resize(size, 0);
        let mut got = 0;
        while got < len {
            if got == size {
                size = size.saturating_mul(2).min(len);
                self.bytes.resize(size, 0);
            }
            match self.reader.read(&mut self.bytes[got..size]) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    // from stdin, hand on whole sample frames as they arrive
                    if got % self.frame_bytes == 0 && self.reader.drained() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FftdError::io(&self.info.name, e)),
            }
        }
        self.bytes.truncate(got);
        Ok(got)
    }
}

impl SampleSource for RawSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        if let Some(fault) = self.fault.take() {
            return Err(fault);
        }
        let got = self.fill(max_frames.saturating_mul(self.frame_bytes))?;
        if got == 0 && self.offset == 0 {
            // (a stream stopped before its first sample is an input with none, not an error)
            if self.reader.stopped() {
                return Ok(0);
            }
            return Err(FftdError::input(self.info.name.clone(), "is empty"));
        }
        let whole = got - got % self.frame_bytes;
        if whole < got {
            let truncated = FftdError::input(
                self.info.name.clone(),
                format!(
                    "truncated: {} trailing bytes at offset {} do not make a whole {}-byte sample frame",
                    got - whole,
                    self.offset + whole as u64,
                    self.frame_bytes
                ),
            );
            if whole == 0 {
                return Err(truncated);
            }
            // the whole frames before the cut are this read's, the cut the next read's answer
            self.bytes.truncate(whole);
            self.fault = Some(truncated);
        }
        let decoding = std::time::Instant::now();
        let before = out.len();
        let decoded = match self.typed {
            Some((t, precision)) => {
                t.decode(&self.bytes, self.offset, &self.info.name, precision, out)
            }
            None => decode(self.format, &self.bytes, self.offset, &self.info.name, out),
        };
        self.decode_ns += decoding.elapsed().as_nanos() as u64;
        if let Err(fault) = decoded {
            return self.before_the_fault(out, before, fault);
        }
        self.offset += whole as u64;
        Ok(whole / self.frame_bytes)
    }

    fn take_decode_ns(&mut self) -> u64 {
        std::mem::take(&mut self.decode_ns)
    }

    fn tuning(&self) -> Option<Arc<Tuning>> {
        self.tuning.clone()
    }
}

impl RawSource {
    /// A bad value in a block: the whole sample frames before it (the values `decode` left
    /// after `before`) are this read's, and the fault the next read's answer, so that the
    /// stream's output keeps every whole frame before it, read in any way.
    fn before_the_fault(
        &mut self,
        out: &mut Vec<f64>,
        before: usize,
        fault: FftdError,
    ) -> Result<usize> {
        let per_frame = self.info.channels * self.info.kind.width();
        let frames = super::before_the_fault(out, before, per_frame, fault, &mut self.fault)?;
        self.offset += (frames * self.frame_bytes) as u64;
        Ok(frames)
    }
}

/// The `iq` type of the SDR I/Q formats (cu8, cs8, cs16).
pub(crate) fn iq_type(format: InputFormat) -> Option<SampleType> {
    match format {
        InputFormat::Cu8 => Some(SampleType::CU8),
        InputFormat::Cs8 => Some(SampleType::CS8),
        InputFormat::Cs16 => Some(SampleType::CS16),
        _ => None,
    }
}

/// Complex for cf32 and the I/Q formats, real for the others.
pub(crate) fn sample_kind(format: InputFormat) -> InputKind {
    match format {
        InputFormat::Cf32 | InputFormat::Cu8 | InputFormat::Cs8 | InputFormat::Cs16 => {
            InputKind::Complex
        }
        _ => InputKind::Real,
    }
}

/// Bytes per sample frame of a raw `format` file with `channels` channels; None when that is 0
/// or does not fit a usize (a huge `--channels` must not wrap to a tiny frame).
pub(crate) fn frame_bytes(format: InputFormat, channels: usize) -> Option<usize> {
    let per_channel = match format {
        InputFormat::Cu8 | InputFormat::Cs8 => 2,
        InputFormat::S16 => 2,
        InputFormat::Cs16 => 4,
        InputFormat::Cf32 => 8,
        _ => 4,
    };
    channels.checked_mul(per_channel).filter(|&b| b > 0)
}

/// Appends the samples of `bytes` (whole values of `format`, found at byte `offset` of the input
/// `name`) to `out` as f64. NaN or infinity is an error naming its byte offset, with `out`
/// holding the values before it.
pub fn decode(
    format: InputFormat,
    bytes: &[u8],
    offset: u64,
    name: &str,
    out: &mut Vec<f64>,
) -> Result<()> {
    if let Some(t) = iq_type(format) {
        // integers only: every value is finite and within f32
        return t.decode(bytes, offset, name, Precision::F64, out);
    }
    if format == InputFormat::S16 {
        out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]]) as f64 / 32768.0),
        );
        return Ok(());
    }
    // convert, then look for NaN/inf: two simple loops the compiler vectorises
    let start = out.len();
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
    );
    let all_finite = out[start..].iter().fold(true, |ok, v| ok & v.is_finite());
    let first_bad = || out[start..].iter().position(|v| !v.is_finite());
    match (!all_finite).then(first_bad).flatten() {
        Some(i) => {
            let v = out[start + i];
            out.truncate(start + i);
            Err(FftdError::input(
                name,
                format!(
                    "value at byte offset {} is {v}, not a finite number",
                    offset + 4 * i as u64
                ),
            ))
        }
        None => Ok(()),
    }
}
