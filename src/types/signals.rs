//! How a run is asked to end, shared by every stage that reads, waits or serves.

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Arc;

/// The exit status of a run ended by a signal before it could finish: a second SIGINT/SIGTERM,
/// or a write stuck on a reader that took nothing after the first (128 + SIGINT, as a shell
/// reports a process killed by Ctrl-C).
pub const INTERRUPTED_EXIT: i32 = 130;

/// How a run is asked to end: `stop` makes the stages stop reading and drain (set by a signal,
/// and by the stages themselves: a limit, a closed stdout, an error); `interrupted` is set by
/// SIGINT/SIGTERM only, and ends `--serve`'s serving after the input; `reopen` by SIGHUP.
#[derive(Clone, Default)]
pub struct Signals {
    pub stop: Arc<AtomicBool>,
    pub interrupted: Arc<AtomicBool>,
    /// Set by SIGHUP: every output file is closed and the next rows open new ones.
    pub reopen: Arc<AtomicBool>,
}

/// Files that must not outlive a process ended at once (a second SIGINT/SIGTERM, a write stuck
/// after the first: `exit_interrupted`), where no destructor runs: the part files of placed
/// outputs (`sink::placed`), as big as the whole output. A fixed table of leaked C strings read
/// by the signal handler with atomic loads and unlink(2) alone, both async-signal-safe.
const AT_EXIT_SLOTS: usize = 64;
static AT_EXIT: [AtomicPtr<libc::c_char>; AT_EXIT_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; AT_EXIT_SLOTS];

/// A file removed if the process ends at once, until `keep` (its slot; None: the table is full,
/// and the file is left as before).
pub(crate) struct RemovedAtExit(Option<usize>);

impl RemovedAtExit {
    pub(crate) fn new(path: &std::path::Path) -> Self {
        use std::os::unix::ffi::OsStrExt;
        let Ok(name) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return RemovedAtExit(None);
        };
        // (leaked: a handler may read it at any time; one string per placed output)
        let name = name.into_raw();
        for (slot, entry) in AT_EXIT.iter().enumerate() {
            let taken = entry.compare_exchange(
                std::ptr::null_mut(),
                name,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            if taken.is_ok() {
                return RemovedAtExit(Some(slot));
            }
        }
        RemovedAtExit(None)
    }

    /// The file stays (renamed into place, or removed already).
    pub(crate) fn keep(&self) {
        if let Some(slot) = self.0 {
            AT_EXIT[slot].store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

impl Drop for RemovedAtExit {
    fn drop(&mut self) {
        self.keep();
    }
}

/// Ends the process at once with `INTERRUPTED_EXIT`, removing the files `RemovedAtExit` holds:
/// no destructor, no atexit handler, no lock. Async-signal-safe (called from a signal handler).
pub fn exit_interrupted() -> ! {
    for entry in &AT_EXIT {
        let name = entry.load(Ordering::Acquire);
        if !name.is_null() {
            // SAFETY: `name` is a NUL-terminated string leaked by `RemovedAtExit::new`, never
            // freed; unlink(2) is async-signal-safe and only reads it.
            unsafe { libc::unlink(name) };
        }
    }
    // SAFETY: _exit(2) ends the process without running any code of ours; async-signal-safe.
    unsafe { libc::_exit(INTERRUPTED_EXIT) }
}
