//! Where a writer's bytes go: stdout or a file (buffered). Files are created up front so a missing
//! directory is reported before any work starts.

use crate::error::{FftdError, Result};
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub enum Destination {
    Stdout(BufWriter<io::Stdout>),
    File {
        path: PathBuf,
        file: BufWriter<File>,
    },
}

impl Destination {
    pub fn stdout() -> Self {
        Destination::Stdout(BufWriter::with_capacity(1 << 16, io::stdout()))
    }

    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(|e| FftdError::io(path, e))?;
        Ok(Destination::File {
            path: path.to_path_buf(),
            file: BufWriter::with_capacity(1 << 16, file),
        })
    }

    /// A name for messages: the path, or "stdout".
    pub fn describe(&self) -> String {
        match self {
            Destination::Stdout(_) => "stdout".to_string(),
            Destination::File { path, .. } => path.display().to_string(),
        }
    }

    /// Seeks (files only); stdout cannot seek.
    pub fn seek_start(&mut self) -> io::Result<()> {
        match self {
            Destination::File { file, .. } => file.seek(SeekFrom::Start(0)).map(|_| ()),
            Destination::Stdout(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "cannot seek on stdout",
            )),
        }
    }
}

impl Write for Destination {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Destination::Stdout(w) => w.write(buf),
            Destination::File { file, .. } => file.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Destination::Stdout(w) => w.write_all(buf),
            Destination::File { file, .. } => file.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Destination::Stdout(w) => w.flush(),
            Destination::File { file, .. } => file.flush(),
        }
    }
}
