//! Threads a run leaves behind when its work is done: a device start-up (context, programs,
//! pinned pools on a thread of its own, issue 23) that had not finished when the output was
//! complete. The run does not wait for it; `exit` ends the process without running the
//! OpenCL driver's exit handlers while such a thread may still be inside the driver.
//!
//! Takes: the start-up thread's handle (`leave`). Gives: the process's exit (`exit`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;
use std::thread::JoinHandle;

static LEFT: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

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

/// Ends the process with `code`. While a left-behind start-up still runs, stdout is flushed
/// and the process ends at once (`_exit`): the driver's exit handlers (which tear down its
/// state under a thread that may be creating a context) and the wait for the start-up are
/// skipped; every output file was closed by the run. Otherwise the exit code is returned
/// for a normal exit.
pub fn exit(code: u8) -> ExitCode {
    if !any_running() {
        return ExitCode::from(code);
    }
    let _ = std::io::stdout().lock().flush();
    let _ = std::io::stderr().lock().flush();
    // SAFETY: `_exit` ends the process without running atexit handlers or destructors; every
    // output of the run was written and closed (files on their drop, stdout flushed just now),
    // so nothing is lost, and no other thread's state is touched.
    unsafe { libc::_exit(i32::from(code)) }
}
