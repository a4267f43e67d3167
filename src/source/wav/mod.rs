//! WAV input, read by fftd's own RIFF/WAVE parser: integer PCM (8-bit unsigned, 16/24/32-bit),
//! 32/64-bit float, A-law and mu-law, plain or WAVE_FORMAT_EXTENSIBLE, in RIFF, RF64 and BW64
//! files, any channel count, rate from the header. Streams from pipes too: a data size a producer
//! could not fill in (0, 0xFFFFFFFF) means "to the end of the input".
//!
//! Data that ends early (or inside a sample frame) is analysed as far as it goes, with one
//! warning naming the file and how many samples are missing, as sox and ffmpeg do. A second
//! `fmt ` or `data` chunk is an error (a regular file's found when it is opened, a stream's once
//! its data has ended): fftd would read the first alone.
//!
//! - `header`: the chunk walk up to the sample data.
//! - `decode`: sample bytes to f64.

pub(crate) mod decode;
pub(crate) mod header;

use super::input::InputReader;
use super::{SampleSource, SourceInfo};
use crate::error::{FftdError, Result};
use crate::types::InputKind;
use crate::types::Precision;
use header::{DataLength, WavFormat};
use std::io::Read;

/// The most bytes one `read` asks of the input, so a header with many channels cannot make a
/// block huge (a read may return fewer frames than asked).
const MAX_READ_BYTES: usize = 1 << 22;

/// Sample frames the header promised but the input did not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// Frames the header promised (for data read to EOF: those read plus the partial one).
    pub expected: u64,
    /// Whole frames read and analysed.
    pub present: u64,
}

impl Shortfall {
    pub(crate) fn missing(&self) -> u64 {
        self.expected - self.present
    }
}

pub struct WavSource {
    info: SourceInfo,
    reader: InputReader,
    format: WavFormat,
    /// Data bytes still to come per the header; `None`: read to the end of the input.
    remaining: Option<u64>,
    /// Where the data ends per the header, from the input's start.
    data_end: Option<u64>,
    /// Sample frames the header promises (a trailing partial frame counts as one).
    expected_frames: Option<u64>,
    /// Whole sample frames read so far.
    frames_read: u64,
    /// The data has ended (the next read returns 0).
    finished: bool,
    shortfall: Option<Shortfall>,
    bytes: Vec<u8>,
    /// Nanoseconds spent decoding since the last `take_decode_ns`.
    decode_ns: u64,
    /// 64-bit float samples beyond its range are errors.
    precision: Precision,
    /// A bad sample found after whole sample frames that were handed on: the next read's answer.
    fault: Option<FftdError>,
}

impl WavSource {
    pub fn new(path: &str, mut reader: InputReader) -> Result<Self> {
        let layout = header::read_layout(path, &mut reader)?;
        let format = layout.format;
        let frame_bytes = format.frame_bytes() as u64;
        let remaining = match layout.data {
            DataLength::Bytes(n) => Some(n),
            DataLength::ToEof => None,
        };
        let data_end = remaining.map(|n| layout.data_offset + n);
        if let (Some(file), Some(end)) = (reader.regular_file(), data_end) {
            header::check_after_data(path, file, end)?;
        }
        // a file with no samples is said to be one before the run (before an output is
        // created); a stream's samples may be on their way
        if reader.is_regular_file_at_end() {
            return Err(FftdError::input(path, "WAV file contains no samples"));
        }
        let on_disk = reader.regular_file_bytes_left();
        let samples = on_disk.map(|left| remaining.map_or(left, |n| n.min(left)));
        match samples.filter(|&b| b < frame_bytes) {
            Some(0) => return Err(FftdError::input(path, "WAV file contains no samples")),
            Some(bytes) => {
                return Err(FftdError::input(
                    path,
                    format!("WAV file's samples are {bytes} byte(s), less than one {frame_bytes}-byte sample frame"),
                ))
            }
            None => {}
        }
        Ok(WavSource {
            info: SourceInfo {
                name: path.to_string(),
                rate: format.rate as f64,
                channels: format.channels as usize,
                kind: InputKind::Real,
                live: false,
            },
            reader,
            format,
            remaining,
            data_end,
            expected_frames: remaining.map(|n| n.div_ceil(frame_bytes)),
            frames_read: 0,
            finished: false,
            fault: None,
            shortfall: None,
            decode_ns: 0,
            bytes: Vec::new(),
            precision: Precision::F32,
        })
    }

    /// The header's description of the samples.
    pub fn format(&self) -> WavFormat {
        self.format
    }

    /// Set once the data has ended short of what the header promised (or inside a frame).
    #[cfg(test)]
    pub(crate) fn shortfall(&self) -> Option<Shortfall> {
        self.shortfall
    }

    /// Fills `self.bytes` with up to `len` bytes; returns the count and whether the input ended.
    /// From stdin, hands on whole sample frames as they arrive rather than wait for `len`.
    fn fill(&mut self, len: usize) -> Result<(usize, bool)> {
        let frame_bytes = self.format.frame_bytes();
        self.bytes.resize(len, 0);
        let mut got = 0;
        while got < len {
            match self.reader.read(&mut self.bytes[got..]) {
                Ok(0) => {
                    self.bytes.truncate(got);
                    return Ok((got, true));
                }
                Ok(n) => {
                    got += n;
                    if got % frame_bytes == 0 && self.reader.drained() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FftdError::io(&self.info.name, e)),
            }
        }
        self.bytes.truncate(got);
        Ok((got, false))
    }

    /// Bytes to ask for in one read of up to `max_frames` frames.
    fn request(&self, max_frames: usize) -> usize {
        let frame_bytes = self.format.frame_bytes();
        let frames = max_frames.min((MAX_READ_BYTES / frame_bytes).max(1));
        let bytes = frames * frame_bytes;
        match self.remaining {
            Some(left) => left.min(bytes as u64) as usize,
            None => bytes,
        }
    }

    /// Decodes the whole frames in `self.bytes[..len]` onto `out`; NaN/inf is an error.
    fn decode_into(&self, len: usize, out: &mut Vec<f64>) -> Result<()> {
        let first_sample = self.frames_read * self.info.channels as u64;
        let bytes = &self.bytes[..len];
        decode::decode_checked(
            &self.info.name,
            self.format.encoding,
            bytes,
            first_sample,
            self.precision,
            out,
        )
    }

    /// Reads for analysis in `precision` (f32 unless told): 64-bit float samples beyond it are
    /// errors.
    pub fn in_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The data has ended: records (and warns once about) samples the header promised but the
    /// input lacked, including a trailing partial frame. A stop request is no shortfall.
    fn finish(&mut self, partial_frame: bool) -> Result<()> {
        self.finished = true;
        if self.frames_read == 0 && !self.reader.stopped() {
            return Err(FftdError::input(
                self.info.name.clone(),
                "WAV file contains no samples",
            ));
        }
        let expected = match self.expected_frames {
            Some(n) => n.max(self.frames_read),
            None => self.frames_read + partial_frame as u64,
        };
        if expected > self.frames_read && !self.reader.stopped() {
            let shortfall = Shortfall {
                expected,
                present: self.frames_read,
            };
            self.shortfall = Some(shortfall);
            tracing::warn!("{}", self.describe(shortfall));
        }
        Ok(())
    }

    /// A bad sample in a block: the whole sample frames before it (the values `decode_checked`
    /// left after `before`) are this read's, the fault the next read's answer (as
    /// `RawSource`'s), so the output keeps every whole frame before it.
    fn before_the_fault(
        &mut self,
        out: &mut Vec<f64>,
        before: usize,
        fault: FftdError,
    ) -> Result<usize> {
        let channels = self.info.channels;
        let frames =
            crate::source::before_the_fault(out, before, channels, fault, &mut self.fault)?;
        self.frames_read += frames as u64;
        Ok(frames)
    }

    /// The one warning line for data that ends early.
    fn describe(&self, s: Shortfall) -> String {
        let what = if self.info.channels == 1 {
            "samples"
        } else {
            "sample frames"
        };
        format!(
            "{}: WAV data ends early: {} of {} {what} missing; analysed the {} present",
            self.info.name,
            s.missing(),
            s.expected,
            s.present
        )
    }
}

impl SampleSource for WavSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        if let Some(fault) = self.fault.take() {
            return Err(fault);
        }
        if self.finished || max_frames == 0 {
            return Ok(0);
        }
        let frame_bytes = self.format.frame_bytes();
        let want = self.request(max_frames);
        let (got, input_ended) = self.fill(want)?;
        let whole = got - got % frame_bytes;
        let decoding = std::time::Instant::now();
        let before = out.len();
        let decoded = self.decode_into(whole, out);
        self.decode_ns += decoding.elapsed().as_nanos() as u64;
        if let Err(fault) = decoded {
            return self.before_the_fault(out, before, fault);
        }
        let frames = whole / frame_bytes;
        self.frames_read += frames as u64;
        if let Some(left) = self.remaining.as_mut() {
            *left -= got as u64;
        }
        if input_ended || self.remaining == Some(0) {
            self.finish(whole < got)?;
        }
        if let (Some(0), None, Some(end)) =
            (self.remaining, self.reader.regular_file(), self.data_end)
        {
            // a stream: what follows its data is read now (a regular file's was, at the start)
            self.fault =
                header::check_stream_after_data(&self.info.name, &mut self.reader, end).err();
        }
        Ok(frames)
    }

    fn take_decode_ns(&mut self) -> u64 {
        std::mem::take(&mut self.decode_ns)
    }
}

#[cfg(test)]
mod tests;
