//! What a run leaves behind when its work is done, and the process's exit without waiting for
//! it: a device start-up (context, programs, pinned pools on a thread of its own, issue 23)
//! that had not finished when the output was complete, and the OpenCL driver's exit handlers
//! (NVIDIA's take about 0.2 s to tear down a context the kernel driver frees anyway). `exit`
//! ends the process without them: never inside the driver under a running thread, and no
//! wait for a teardown nothing depends on.
//!
//! Takes: the start-up thread's handle (`leave`), a device's use (`skip_driver_exit`). Gives:
//! the process's exit (`exit`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;

static LEFT: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());
static SKIP_DRIVER_EXIT: AtomicBool = AtomicBool::new(false);

/// A device was used and its work is done: the exit skips the driver's exit handlers.
pub fn skip_driver_exit() {
    SKIP_DRIVER_EXIT.store(true, Ordering::Relaxed);
}

/// Joins `thread` if it has already ended; otherwise leaves it to `exit`.
pub fn leave(thread: JoinHandle<()>) {
    if thread.is_finished() {
        let _ = thread.join();
        return;
    }
    tracing::debug!("the device start-up is still under way; the run does not wait for it");
    if let Ok(mut left) = LEFT.lock() {
        left.push(thread);
    }
}

/// Whether a thread left behind is still running.
pub fn any_running() -> bool {
    LEFT.lock()
        .map(|mut left| {
            left.retain(|t| !t.is_finished());
            !left.is_empty()
        })
        .unwrap_or(false)
}

/// Ends the process with `code`. While a left-behind start-up still runs, or after a device
/// was used, stdout is flushed and the process ends at once (`_exit`): the driver's exit
/// handlers (which tear down its state, possibly under a thread that is creating a context)
/// and the wait for the start-up are skipped; every output file was closed by the run.
/// Otherwise the exit code is returned for a normal exit.
pub fn exit(code: u8) -> ExitCode {
    if !SKIP_DRIVER_EXIT.load(Ordering::Relaxed) && !any_running() {
        return ExitCode::from(code);
    }
    let _ = std::io::stdout().lock().flush();
    let _ = std::io::stderr().lock().flush();
    // SAFETY: `_exit` ends the process without running atexit handlers or destructors; every
    // output of the run was written and closed (files on their drop, stdout flushed just now),
    // so nothing is lost, and no other thread's state is touched.
    unsafe { libc::_exit(i32::from(code)) }
}
