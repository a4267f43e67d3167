//! Where an output's bytes go: stdout, or a file that is opened only while it is being written.
//! A file is created (truncated) when it is first opened in a run and reopened for appending after
//! it was closed; `output::Outputs` decides when (at most a fixed number open at once).
//! Writes go through a buffer held only while the file is open; buffers larger than it are
//! written directly.
//!
//! A NATS subject (`--output nats://...`, `fleet::output::NatsRows`) takes rows, each its own message,
//! rather than bytes; it counts as always open.
//!
//! An image (`--format png`) is a whole-output destination: it takes level records as they come
//! (`png::ImageFile`), holds no descriptor while it does (it counts as always open, so it is never
//! closed to make room), and is drawn and written when it is closed at the end of the run.

use super::output::Rows;
use super::png::ImageFile;
use super::stuck_write::WatchedFile;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A destination that takes rows, each its own message, rather than bytes (`--output
/// nats://...`: `fleet::output::NatsRows`).
pub(crate) trait RowMessages: Send {
    /// The address (redacted) and the run, for messages and `--meta`.
    fn describe(&self) -> String;
    /// Starts sending `rows`, one message each; an error is a batch that could not be stored.
    fn send(&mut self, rows: &Rows<'_>) -> std::io::Result<()>;
    /// Waits until every row sent is acknowledged.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// Buffer of an open destination.
const BUFFER: usize = 1 << 16;

pub(crate) enum Destination {
    Stdout(BufWriter<WatchedFile>),
    File {
        path: PathBuf,
        /// The open file, if it is open.
        file: Option<BufWriter<WatchedFile>>,
        /// Whether this run has created (truncated) it yet.
        created: bool,
    },
    /// A PNG image, written whole when closed.
    Image(Box<ImageFile>),
    /// A NATS subject, a message per row (`nats`): `output::Outputs` hands it rows, not bytes.
    Messages(Box<dyn RowMessages>),
}

impl Destination {
    /// Stdout (`opening::stdout_file`).
    pub(crate) fn stdout() -> io::Result<Self> {
        let file = super::opening::stdout_file()?;
        let file = WatchedFile::new(file);
        Ok(Destination::Stdout(BufWriter::with_capacity(BUFFER, file)))
    }

    /// A file, not opened yet.
    pub(crate) fn file(path: &Path) -> Self {
        Destination::File {
            path: path.to_path_buf(),
            file: None,
            created: false,
        }
    }

    /// A file opened already (kept open to the end: a FIFO or a device, or a single `--output`).
    pub(crate) fn opened(path: &Path, file: File) -> Self {
        Destination::File {
            path: path.to_path_buf(),
            file: Some(BufWriter::with_capacity(BUFFER, WatchedFile::new(file))),
            created: true,
        }
    }

    /// A name for messages: the path, or "stdout".
    pub(crate) fn describe(&self) -> String {
        match self {
            Destination::Stdout(_) => "stdout".to_string(),
            Destination::File { path, .. } => crate::types::shown_path(path).to_string(),
            Destination::Image(image) => crate::types::shown_path(image.path()).to_string(),
            Destination::Messages(messages) => messages.describe(),
        }
    }

    /// Whether writes can go through now (stdout and images always; a file once opened).
    pub(crate) fn is_open(&self) -> bool {
        match self {
            Destination::Stdout(_) | Destination::Image(_) | Destination::Messages(_) => true,
            Destination::File { file, .. } => file.is_some(),
        }
    }

    /// Whether nothing of this run is in the file yet: not created (truncated), or an image with
    /// no rows whose file is not created. Stdout and NATS count as begun.
    pub(crate) fn untouched(&self) -> bool {
        match self {
            Destination::File { file, created, .. } => file.is_none() && !*created,
            Destination::Image(image) => !image.is_created() && !image.has_rows(),
            Destination::Stdout(_) | Destination::Messages(_) => false,
        }
    }

    /// Whether what this destination writes is still found at its path: an open file that was
    /// not moved or removed (the same device and inode), or an image, which is written whole
    /// when it closes. A SIGHUP leaves such a destination open while it has no row.
    pub(crate) fn still_at_its_path(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match self {
            Destination::File {
                path,
                file: Some(file),
                ..
            } => {
                let open = file.get_ref().file().metadata();
                let named = std::fs::metadata(path);
                matches!((open, named), (Ok(a), Ok(b)) if a.dev() == b.dev() && a.ino() == b.ino())
            }
            Destination::Image(_) => true,
            _ => false,
        }
    }

    /// Opens a file: creates (truncates) it the first time, else reopens it at its end.
    pub(crate) fn open(&mut self) -> io::Result<()> {
        if let Destination::File {
            path,
            file: file @ None,
            created,
        } = self
        {
            let f = if *created {
                let mut f = OpenOptions::new().write(true).open(&*path)?;
                f.seek(SeekFrom::End(0))?;
                f
            } else {
                File::create(&*path)?
            };
            *created = true;
            *file = Some(BufWriter::with_capacity(BUFFER, WatchedFile::new(f)));
        }
        Ok(())
    }

    /// Flushes and closes a file (its buffer is freed); stdout is only flushed; an image is
    /// drawn and written.
    pub(crate) fn close(&mut self) -> io::Result<()> {
        match self {
            Destination::Stdout(w) => w.flush(),
            Destination::Image(image) => image.finish(),
            Destination::Messages(messages) => messages.finish(),
            Destination::File { file, .. } => match file.take() {
                Some(mut f) => f.flush(),
                None => Ok(()),
            },
        }
    }

    /// Overwrites the start of the output with `bytes` (files only: stdout cannot seek), after
    /// writing out what is buffered. Opens the file if needed.
    pub(crate) fn write_at_start(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.open()?;
        match self {
            Destination::File { file: Some(f), .. } => {
                f.flush()?;
                f.get_ref().file().write_all_at(bytes, 0)
            }
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "cannot seek on stdout",
            )),
        }
    }

    /// A file after a write error: what its buffer can still write is written, the rest
    /// dropped, and the file handed back (opened again if it was closed); None for others.
    pub(crate) fn give_up(&mut self) -> io::Result<Option<File>> {
        let Destination::File { path, file, .. } = self else {
            return Ok(None);
        };
        match file.take() {
            Some(mut buffered) => {
                let _ = buffered.flush();
                let (watched, _dropped) = buffered.into_parts();
                Ok(Some(watched.file().try_clone()?))
            }
            None => OpenOptions::new().write(true).open(&*path).map(Some),
        }
    }

    /// Bytes without row marks cannot become messages (`output::Outputs` sends rows).
    fn rows_only() -> io::Error {
        io::Error::new(io::ErrorKind::Unsupported, "a NATS output takes rows")
    }

    fn not_open() -> io::Error {
        io::Error::other("output file is not open")
    }
}

impl Write for Destination {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Destination::Stdout(w) => w.write(buf),
            Destination::File { file: Some(f), .. } => f.write(buf),
            Destination::File { file: None, .. } => Err(Self::not_open()),
            Destination::Image(image) => image.write(buf),
            Destination::Messages(_) => Err(Self::rows_only()),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Destination::Stdout(w) => w.write_all(buf),
            Destination::File { file: Some(f), .. } => f.write_all(buf),
            Destination::File { file: None, .. } => Err(Self::not_open()),
            Destination::Image(image) => image.write_all(buf),
            Destination::Messages(_) => Err(Self::rows_only()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Destination::Stdout(w) => w.flush(),
            Destination::File { file: Some(f), .. } => f.flush(),
            Destination::File { file: None, .. }
            | Destination::Image(_)
            | Destination::Messages(_) => Ok(()),
        }
    }
}
