//! Opening an output path for writing without ever holding up a stop request. A regular file
//! (or a new one) is created and truncated at once; a FIFO is opened without blocking and, while
//! no reader has opened it yet, tried again every 20 ms until one does or SIGINT/SIGTERM (`stop`)
//! asks the run to end; a device (`/dev/null`) opens at once. Such streams are opened once and kept
//! open for the whole run: closing a FIFO would hand its reader an end of file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often an open of a FIFO with no reader is tried again.
const RETRY: Duration = Duration::from_millis(20);

/// Whether `path` is an existing file that is not a regular file (a FIFO, a device, a socket),
/// or names one of the process's own descriptors (`/dev/stdout`, `/dev/fd/N`,
/// `/proc/self/fd/N`: stdout redirected to a file is still stdout): written front to back only,
/// never reopened, never split by `--rotate`, never rewritten at its start.
pub(crate) fn is_stream_path(path: &Path) -> bool {
    let descriptor = ["/dev/stdout", "/dev/stderr", "/dev/stdin"]
        .iter()
        .any(|name| path == Path::new(name))
        || ["/dev/fd/", "/proc/self/fd/"]
            .iter()
            .any(|folder| path.starts_with(folder));
    descriptor || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Whether `path` is a FIFO (or a socket): a place that cannot seek, where bytes written once
/// are gone to its reader.
pub(crate) fn is_pipe_path(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

/// Stdout as a file of its own (a copy of descriptor 1), for rows and events. Not
/// `io::stdout()`: std takes a write that fails with EBADF (a stdout opened read-only,
/// `fftd ... 1<file`) as done, so every row would be lost without a word.
pub(crate) fn stdout_file() -> io::Result<File> {
    use std::os::fd::AsFd;
    Ok(File::from(io::stdout().as_fd().try_clone_to_owned()?))
}

/// Creates (truncates) `path`, or opens a stream path for writing (stdout by name: a copy of
/// descriptor 1). A FIFO waits for its reader
/// for as long as `stop` is not set; a stop while waiting is `ErrorKind::Interrupted`.
pub(crate) fn create(path: &Path, stop: &AtomicBool) -> io::Result<File> {
    // stdout by name is stdout as the shell left it (`>>` appends), not a file truncated anew
    if crate::stdio::names_stdout(path) {
        return stdout_file();
    }
    let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    if !fifo {
        return File::create(path);
    }
    loop {
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(file) => return blocking(file),
            // ENXIO: no reader has the FIFO open yet
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if stop.load(Ordering::Relaxed) {
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        "stopped while waiting for a reader to open it",
                    ));
                }
                std::thread::sleep(RETRY);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Checks that `file` takes bytes, with a write of none: harmless to a file, a FIFO or a
/// terminal, refused by a device that refuses every write (`/dev/full`: "no space left").
pub(crate) fn check_writable(file: &File) -> io::Result<()> {
    use std::io::Write;
    let mut file = file;
    file.write(&[]).map(drop)
}

/// Clears `O_NONBLOCK`, so writes wait for room in the pipe as an ordinary file's would.
fn blocking(file: File) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by `file`, alive for both calls; F_GETFL and
    // F_SETFL only read and set its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::io::{Read, Write};
    use std::os::unix::ffi::OsStrExt;

    fn mkfifo(path: &Path) {
        let name = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path for the call's duration.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_waits_for_its_reader_and_a_stop_ends_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out");
        mkfifo(&fifo);
        assert!(is_stream_path(&fifo) && is_pipe_path(&fifo));
        let stop = AtomicBool::new(true);
        let e = create(&fifo, &stop).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);

        let reader_path = fifo.clone();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            File::open(reader_path)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            text
        });
        let mut out = create(&fifo, &AtomicBool::new(false)).unwrap();
        out.write_all(b"rows\n").unwrap();
        drop(out);
        assert_eq!(reader.join().unwrap(), "rows\n");
    }

    #[test]
    fn regular_files_and_devices_open_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(true);
        let file = dir.path().join("f.txt");
        std::fs::write(&file, "old").unwrap();
        create(&file, &stop).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"");
        assert!(!is_stream_path(&file));
        assert!(is_stream_path(Path::new("/dev/null")) && !is_pipe_path(Path::new("/dev/null")));
        check_writable(&create(Path::new("/dev/null"), &stop).unwrap()).unwrap();
        let full = create(Path::new("/dev/full"), &stop).unwrap();
        assert_eq!(
            check_writable(&full).unwrap_err().raw_os_error(),
            Some(libc::ENOSPC)
        );
    }
}
