//! A file the run writes only at its end (`--meta`, `--trace`): opened at set-up where that
//! empties nothing (a new or empty file, a FIFO, a device), else checked then and created when
//! written, so a run that ends before it (stopped while waiting, killed) leaves an earlier
//! run's file as it was.

use std::fs::File;
use std::io;
use std::path::PathBuf;

pub(crate) enum DeferredFile {
    /// Opened already.
    Open(File),
    /// A regular file with bytes in it, created (emptied) when written.
    Later(PathBuf),
}

impl DeferredFile {
    /// The file to write now: the one open, or the one at the path, created.
    pub(crate) fn create(self) -> io::Result<File> {
        match self {
            DeferredFile::Open(file) => Ok(file),
            DeferredFile::Later(path) => File::create(path),
        }
    }
}
