//! A recording's file: 32-bit float WAV (real input, every channel), or SigMF (`cf32_le` data and
//! its `.sigmf-meta`) for I/Q input. Samples are appended as they come; `finish` cuts the file to
//! the frames the recording keeps and writes the header (or the meta file).

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const WAV_HEADER: u64 = 44;

/// What a recording holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub rate: f64,
    /// Values per sample frame (channels, or 2 for one complex channel).
    pub width: usize,
    pub complex: bool,
}

pub(crate) struct SampleWriter {
    path: PathBuf,
    file: io::BufWriter<File>,
    shape: Shape,
    /// Sample frames written.
    pub frames: u64,
    /// For the SigMF meta: what the recording is.
    description: String,
}

impl SampleWriter {
    /// Creates `stem.wav` (or `stem.sigmf-data` for complex input).
    pub(crate) fn create(stem: &Path, shape: Shape, description: String) -> io::Result<Self> {
        let ext = if shape.complex { "sigmf-data" } else { "wav" };
        // (the stem holds a '.' before its milliseconds: the extension is added, not replaced)
        let mut name = stem.as_os_str().to_owned();
        name.push(format!(".{ext}"));
        let path = PathBuf::from(name);
        let mut file = io::BufWriter::new(File::create(&path)?);
        if !shape.complex {
            file.write_all(&[0u8; WAV_HEADER as usize])?;
        }
        Ok(SampleWriter {
            path,
            file,
            shape,
            frames: 0,
            description,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends whole sample frames (`values.len()` a multiple of the width).
    pub(crate) fn append(&mut self, values: &[f32]) -> io::Result<()> {
        for v in values {
            self.file.write_all(&v.to_le_bytes())?;
        }
        self.frames += (values.len() / self.shape.width.max(1)) as u64;
        Ok(())
    }

    /// Keeps the first `frames` sample frames and completes the file.
    pub(crate) fn finish(mut self, frames: u64) -> io::Result<PathBuf> {
        let frames = frames.min(self.frames);
        let bytes = frames * self.shape.width as u64 * 4;
        self.file.flush()?;
        let mut file = self.file.into_inner().map_err(|e| e.into_error())?;
        let header = if self.shape.complex { 0 } else { WAV_HEADER };
        file.set_len(header + bytes)?;
        if self.shape.complex {
            let meta = self.path.with_extension("sigmf-meta");
            std::fs::write(meta, sigmf_meta(self.shape, &self.description))?;
        } else {
            file.seek(SeekFrom::Start(0))?;
            file.write_all(&wav_header(self.shape, bytes))?;
        }
        file.sync_data()?;
        Ok(self.path)
    }
}

/// A RIFF/WAVE header for IEEE float samples.
fn wav_header(shape: Shape, data_bytes: u64) -> Vec<u8> {
    let channels = shape.width as u16;
    let rate = shape.rate.round() as u32;
    let data = data_bytes.min(u32::MAX as u64 - 36) as u32;
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&3u16.to_le_bytes()); // WAVE_FORMAT_IEEE_FLOAT
    h.extend_from_slice(&channels.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&(rate * 4 * channels as u32).to_le_bytes());
    h.extend_from_slice(&(4 * channels).to_le_bytes());
    h.extend_from_slice(&32u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data.to_le_bytes());
    h
}

fn sigmf_meta(shape: Shape, description: &str) -> String {
    let meta = serde_json::json!({
        "global": {
            "core:datatype": "cf32_le",
            "core:sample_rate": shape.rate,
            "core:version": "1.0.0",
            "core:recorder": "fftd",
            "core:description": description,
        },
        "captures": [{ "core:sample_start": 0 }],
        "annotations": [],
    });
    format!("{meta:#}\n")
}
