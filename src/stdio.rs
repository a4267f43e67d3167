//! The process's standard streams when the shell closed one (`fftd … >&-`, `<&-`). Rust's
//! runtime puts /dev/null on a closed stdin, stdout or stderr before `main`, so spectra or
//! events "written to stdout" would vanish with exit 0, and a closed stdin would read as an
//! empty input. The binary notes which were closed as it is loaded, before that runtime runs
//! (`note_closed_streams`, from an `.init_array` entry in main.rs); a run that would write to a
//! closed stdout (`refuse_closed_stdout`) or read a closed stdin (`refuse_closed_stdin`) is
//! refused, before its inputs open (`pipeline::run_steps`; `fftd publish` for stdin). Nothing
//! is noted for the library's other users: they are never refused.

use crate::error::FftdError;
use std::sync::atomic::{AtomicBool, Ordering};

static STDIN_CLOSED: AtomicBool = AtomicBool::new(false);
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether descriptor `fd` is open in this process.
fn is_open(fd: libc::c_int) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags; an unused number gives -1 (EBADF).
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

/// Notes whether stdin and stdout are closed. Called as the program loads, before Rust's
/// runtime starts (so before it opens /dev/null on them): it uses nothing of `std` but atomics.
pub extern "C" fn note_closed_streams() {
    STDIN_CLOSED.store(!is_open(0), Ordering::Relaxed);
    STDOUT_CLOSED.store(!is_open(1), Ordering::Relaxed);
}

/// A usage error where stdout was closed when the process started: `what` (the spectra, the
/// events) would be written nowhere.
pub(crate) fn refuse_closed_stdout(what: &str, instead: &str) -> Result<(), FftdError> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(FftdError::Usage(format!(
            "stdout is closed: {what} would be lost; {instead}"
        )));
    }
    Ok(())
}

/// Whether `path` names this process's stdout (`/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`).
pub(crate) fn names_stdout(path: &std::path::Path) -> bool {
    ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]
        .iter()
        .any(|name| path == std::path::Path::new(name))
}

/// Whether `path` names an open descriptor rather than a file of its own: stdout by another
/// name, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N` (what it reaches may be a file opened to
/// append, a terminal, a pipe).
pub(crate) fn names_a_descriptor(path: &std::path::Path) -> bool {
    names_stdout(path)
        || ["/dev/stderr", "/dev/fd", "/proc/self/fd"]
            .iter()
            .any(|p| path.starts_with(p))
}

/// Whether `path` names stdin (`/dev/stdin`, `/dev/fd/0`, `/proc/self/fd/0`): `-` by another name.
pub(crate) fn names_stdin(path: &str) -> bool {
    ["/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"].contains(&path)
}

/// A usage error where stdin was closed when the process started and the run reads it.
pub(crate) fn refuse_closed_stdin() -> Result<(), FftdError> {
    if STDIN_CLOSED.load(Ordering::Relaxed) {
        return Err(FftdError::Usage(
            "--file -: stdin is closed; give the input a file or a pipe".into(),
        ));
    }
    Ok(())
}
