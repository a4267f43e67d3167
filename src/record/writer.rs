//! A recording's file: 32-bit float WAV (real input, every channel), or SigMF (`cf32_le` data and
//! its `.sigmf-meta`) for I/Q input. Samples are appended as they come; `finish` cuts the file to
//! the frames the recording keeps and writes the header (or the meta file). A writer dropped
//! unfinished (a write that failed, a full disk, a run that failed elsewhere) completes its file
//! with the whole sample frames that reached it, so what was recorded stays readable.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
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

impl Shape {
    /// Bytes before the samples.
    fn header_bytes(self) -> u64 {
        if self.complex {
            0
        } else {
            WAV_HEADER
        }
    }

    fn frame_bytes(self) -> u64 {
        self.width.max(1) as u64 * 4
    }
}

pub(crate) struct SampleWriter {
    path: PathBuf,
    /// None once finished (or completed by `drop`).
    file: Option<io::BufWriter<File>>,
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
        file.write_all(&vec![0u8; shape.header_bytes() as usize])?;
        Ok(SampleWriter {
            path,
            file: Some(file),
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
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("finished"))?;
        for frame in values.chunks_exact(self.shape.width.max(1)) {
            for v in frame {
                file.write_all(&v.to_le_bytes())?;
            }
            self.frames += 1; // (counted as it goes: a failed write keeps the frames before)
        }
        Ok(())
    }

    /// Keeps the first `frames` sample frames and completes the file; an error names it.
    pub(crate) fn finish(self, frames: u64) -> io::Result<PathBuf> {
        let path = crate::types::shown_path(&self.path).to_string();
        self.finish_named(frames)
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
    }

    fn finish_named(mut self, frames: u64) -> io::Result<PathBuf> {
        // (a flush that fails leaves the writer to `drop`, which keeps the whole frames on disk)
        if let Some(file) = self.file.as_mut() {
            file.flush()?;
        }
        let Some(file) = self.file.take() else {
            return Ok(self.path.clone());
        };
        let (file, _) = file.into_parts(); // (flushed: nothing left in the buffer)
        self.complete(&file, frames.min(self.frames))?;
        file.sync_data()?;
        Ok(self.path.clone())
    }

    /// Cuts `file` to the header and `frames` sample frames and writes the header (or the meta
    /// file), in place: nothing here needs more room on the disk than the file had, but the
    /// SigMF meta file.
    fn complete(&self, file: &File, frames: u64) -> io::Result<()> {
        let bytes = frames * self.shape.frame_bytes();
        file.set_len(self.shape.header_bytes() + bytes)?;
        if self.shape.complex {
            let meta = self.path.with_extension("sigmf-meta");
            std::fs::write(meta, sigmf_meta(self.shape, &self.description))
        } else {
            file.write_all_at(&wav_header(self.shape, bytes), 0)
        }
    }
}

impl Drop for SampleWriter {
    /// An unfinished recording keeps the whole sample frames its file holds: its buffer is
    /// written if the file takes it; what a failed write left behind is dropped unwritten.
    fn drop(&mut self) {
        let Some(mut writer) = self.file.take() else {
            return;
        };
        let _ = writer.flush(); // (a full disk: the whole frames that fit are kept below)
        let (file, _unwritten) = writer.into_parts();
        let on_disk = file.metadata().map_or(0, |m| m.len());
        let whole = on_disk.saturating_sub(self.shape.header_bytes()) / self.shape.frame_bytes();
        match self.complete(&file, whole.min(self.frames)) {
            Ok(()) => tracing::info!(
                file = %crate::types::shown_path(&self.path),
                frames = whole.min(self.frames),
                "recording cut short: completed with the frames it holds"
            ),
            Err(e) => tracing::debug!(
                file = %crate::types::shown_path(&self.path),
                "recording cut short, not completed: {e}"
            ),
        }
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
