//! Seekable inputs: regular raw (f32/s16/cf32, cu8/cs8/cs16), SigMF datasets and WAV files, whose samples lie at a known byte
//! offset in fixed-size sample frames. `SeekableLayout` says where they are and decodes any whole
//! range of them, so several threads can read one stream at once (`pipeline::range_reader`).
//!
//! Only inputs the sequential source would read to the end without a word qualify: a file that
//! ends inside a sample frame, or a WAV whose data ends early, goes the sequential way, which
//! reports it (an error, or the one warning) exactly as for a pipe.

use super::wav::header::{self, DataLength, Encoding};
use super::{raw, InputFormat};
use crate::error::{FftdError, Result};
use crate::types::InputKind;
use crate::types::Precision;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// How the sample bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SampleCoding {
    Raw(InputFormat),
    Wav(Encoding),
    /// A SigMF dataset's `core:datatype`.
    Typed(super::iq::SampleType),
}

/// Where a seekable input's samples are and what they are.
#[derive(Clone, Debug)]
pub(crate) struct SeekableLayout {
    /// The path as the user gave it (for messages).
    pub name: String,
    /// Byte offset of the first sample frame.
    pub data_offset: u64,
    /// Whole sample frames (every channel) in the file.
    pub frames: u64,
    /// Bytes per sample frame.
    pub frame_bytes: usize,
    pub channels: usize,
    pub kind: InputKind,
    pub rate: f64,
    pub coding: SampleCoding,
    /// The precision samples are analysed in: values beyond its range are errors.
    pub precision: Precision,
    /// Where the recording was tuned (SigMF captures).
    pub tuning: Option<std::sync::Arc<crate::types::tuning::Tuning>>,
}

impl SeekableLayout {
    /// The layout of `path` read as `format`, when it is a regular file the range reader can
    /// take; `None` sends it the sequential way. `rate` and `channels` apply to raw files;
    /// `precision` is the one samples are analysed in (values beyond it are errors).
    pub(crate) fn probe(
        path: &str,
        format: InputFormat,
        rate: f64,
        channels: usize,
        precision: Precision,
    ) -> Result<Option<SeekableLayout>> {
        let meta = std::fs::metadata(path).map_err(|e| FftdError::io(path, e))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let layout = match format {
            InputFormat::Text => return Ok(None),
            compressed if compressed.is_compressed_audio() => return Ok(None),
            InputFormat::Wav => Self::probe_wav(path, meta.len())?,
            InputFormat::Sigmf => Self::probe_sigmf(path, rate)?,
            raw_format => Self::raw(path, raw_format, meta.len(), rate, channels),
        };
        Ok(layout
            .filter(|l| l.frames > 0)
            .map(|l| SeekableLayout { precision, ..l }))
    }

    fn raw(
        path: &str,
        format: InputFormat,
        len: u64,
        rate: f64,
        channels: usize,
    ) -> Option<SeekableLayout> {
        let frame_bytes = raw::frame_bytes(format, channels)?;
        (len % frame_bytes as u64 == 0).then(|| SeekableLayout {
            name: path.to_string(),
            data_offset: 0,
            frames: len / frame_bytes as u64,
            frame_bytes,
            channels,
            kind: raw::sample_kind(format),
            rate,
            coding: SampleCoding::Raw(format),
            precision: Precision::F32,
            tuning: None,
        })
    }

    /// A SigMF recording's dataset, when it is a regular file of whole sample frames.
    fn probe_sigmf(path: &str, rate: f64) -> Result<Option<SeekableLayout>> {
        let r = super::sigmf::read_recording(path, None)?;
        super::sigmf::warn_of_captures_past_the_data(&r);
        let meta = std::fs::metadata(&r.data_path).map_err(|e| FftdError::io(&r.data_path, e))?;
        let frame_bytes = r.datatype.sample_bytes() * r.channels;
        if !meta.is_file() || meta.len() % frame_bytes as u64 != 0 {
            return Ok(None);
        }
        Ok(Some(SeekableLayout {
            name: r.data_path.clone(),
            data_offset: 0,
            frames: meta.len() / frame_bytes as u64,
            frame_bytes,
            channels: r.channels,
            kind: r.datatype.kind(),
            rate: r.rate.unwrap_or(rate),
            coding: SampleCoding::Typed(r.datatype),
            precision: Precision::F32,
            tuning: r.tuning,
        }))
    }

    fn probe_wav(path: &str, len: u64) -> Result<Option<SeekableLayout>> {
        let file = File::open(path).map_err(|e| FftdError::io(path, e))?;
        let layout = header::read_layout(path, &mut BufReader::new(&file))?;
        let data_offset = layout.data_offset;
        let present = len.saturating_sub(data_offset);
        let data_bytes = match layout.data {
            DataLength::Bytes(n) if n <= present => {
                header::check_after_data(path, &file, data_offset + n)?;
                n
            }
            DataLength::Bytes(_) => return Ok(None), // ends early: warned about sequentially
            DataLength::ToEof => present,
        };
        let frame_bytes = layout.format.frame_bytes();
        if frame_bytes == 0 || data_bytes % frame_bytes as u64 != 0 {
            return Ok(None);
        }
        Ok(Some(SeekableLayout {
            name: path.to_string(),
            data_offset,
            frames: data_bytes / frame_bytes as u64,
            frame_bytes,
            channels: layout.format.channels as usize,
            kind: InputKind::Real,
            rate: layout.format.rate as f64,
            coding: SampleCoding::Wav(layout.format.encoding),
            precision: Precision::F32,
            tuning: None,
        }))
    }

    /// Appends the samples of `bytes`, whole sample frames starting at frame `first_frame`, to
    /// `out` as f64 (every channel, interleaved), with the sequential source's checks and
    /// messages.
    pub(crate) fn decode(&self, bytes: &[u8], first_frame: u64, out: &mut Vec<f64>) -> Result<()> {
        match self.coding {
            SampleCoding::Raw(format) => {
                let offset = first_frame * self.frame_bytes as u64;
                raw::decode(format, bytes, offset, &self.name, out)
            }
            SampleCoding::Typed(t) => {
                let offset = first_frame * self.frame_bytes as u64;
                t.decode(bytes, offset, &self.name, self.precision, out)
            }
            SampleCoding::Wav(encoding) => {
                let first_sample = first_frame * self.channels as u64;
                let name = &self.name;
                let precision = self.precision;
                super::wav::decode::decode_checked(
                    name,
                    encoding,
                    bytes,
                    first_sample,
                    precision,
                    out,
                )
            }
        }
    }

    /// Opens the file for positioned reads.
    pub(crate) fn open(&self) -> Result<File> {
        File::open(Path::new(&self.name)).map_err(|e| FftdError::io(&self.name, e))
    }
}
