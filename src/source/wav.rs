//! WAV input through hound: PCM 8/16/24/32-bit integer (scaled to [-1, 1) by full scale, as
//! soundfile and librosa do) and 32-bit float, any channel count, rate from the header.

use super::input::InputReader;
use super::{SampleSource, SourceInfo};
use crate::error::{FftdError, Result};
use crate::fft::InputKind;

pub struct WavSource {
    info: SourceInfo,
    reader: hound::WavReader<InputReader>,
    float: bool,
    /// 1 / 2^(bits-1) for integer samples.
    int_scale: f64,
    /// Sample values (all channels) still to come, from the header.
    remaining: u64,
    total: u64,
}

impl WavSource {
    pub fn new(path: &str, reader: InputReader) -> Result<Self> {
        let reader = hound::WavReader::new(reader).map_err(|e| describe(path, e))?;
        let spec = reader.spec();
        let float = match (spec.sample_format, spec.bits_per_sample) {
            (hound::SampleFormat::Float, 32) => true,
            (hound::SampleFormat::Int, 8 | 16 | 24 | 32) => false,
            (format, bits) => {
                return Err(FftdError::input(
                    path,
                    format!(
                        "unsupported WAV encoding: {bits}-bit {}; fftd reads 8/16/24/32-bit integer PCM and 32-bit float",
                        if format == hound::SampleFormat::Float { "float" } else { "integer" }
                    ),
                ))
            }
        };
        if spec.channels == 0 || spec.sample_rate == 0 {
            return Err(FftdError::input(
                path,
                "corrupt WAV header: zero channels or zero sample rate",
            ));
        }
        let total = reader.len() as u64;
        if total == 0 {
            return Err(FftdError::input(path, "WAV file contains no samples"));
        }
        Ok(WavSource {
            info: SourceInfo {
                name: path.to_string(),
                rate: spec.sample_rate as f64,
                channels: spec.channels as usize,
                kind: InputKind::Real,
                live: false,
            },
            reader,
            float,
            int_scale: 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f64,
            remaining: total,
            total,
        })
    }
}

/// hound's errors, as one line naming the file.
fn describe(path: &str, e: hound::Error) -> FftdError {
    match e {
        hound::Error::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            FftdError::input(path, "truncated WAV file: it ends inside the header")
        }
        hound::Error::IoError(io) => FftdError::io(path, io),
        hound::Error::FormatError(what) if what.contains("bits per sample") => FftdError::input(
            path,
            format!("unsupported WAV encoding ({what}); fftd reads 8/16/24/32-bit integer PCM and 32-bit float"),
        ),
        hound::Error::FormatError(what) => {
            FftdError::input(path, format!("not a valid WAV file: {what}"))
        }
        hound::Error::Unsupported => FftdError::input(
            path,
            "unsupported WAV encoding; fftd reads 8/16/24/32-bit integer PCM and 32-bit float",
        ),
        other => FftdError::input(path, format!("corrupt WAV file: {other}")),
    }
}

impl SampleSource for WavSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        let channels = self.info.channels;
        let want = (max_frames as u64 * channels as u64).min(self.remaining) as usize;
        let start = out.len();
        out.reserve(want);
        let done = self.total - self.remaining;
        let truncated = |got: usize| {
            FftdError::input(
                self.info.name.clone(),
                format!(
                    "truncated WAV file: the header promises {} samples, the data ends after {}",
                    self.total,
                    done + got as u64
                ),
            )
        };
        if self.float {
            for (i, s) in self.reader.samples::<f32>().take(want).enumerate() {
                match s {
                    Ok(v) if v.is_finite() => out.push(v as f64),
                    Ok(v) => {
                        return Err(FftdError::input(
                            self.info.name.clone(),
                            format!("sample {} is {v}, not a finite number", done + i as u64),
                        ))
                    }
                    Err(_) => return Err(truncated(i)),
                }
            }
        } else {
            let scale = self.int_scale;
            for (i, s) in self.reader.samples::<i32>().take(want).enumerate() {
                match s {
                    Ok(v) => out.push(v as f64 * scale),
                    Err(_) => return Err(truncated(i)),
                }
            }
        }
        let got = out.len() - start;
        if got < want {
            return Err(truncated(got));
        }
        self.remaining -= got as u64;
        Ok(got / channels)
    }
}
