//! What a run leaves behind when its work is done, and the process's exit without waiting for
//! it: a device start-up (context, programs, pinned pools on a thread of its own, issue 23)
//! that had not finished when the output was complete, and the OpenCL driver's exit handlers
//! (NVIDIA's take about 0.2 s to tear down a context the kernel driver frees anyway). `exit`
//! ends the process without them: never inside the driver under a running thread, and no
//! wait for a teardown nothing depends on.
//!
//! The device's own objects (engines with their contexts and device memory, pinned host pools)
//! are left to that exit too (`keep`): releasing them one by one took 0.1–0.2 s after the report
//! on NVIDIA's driver, while the exit frees them at once.
//!
//! Takes: the start-up thread's handle (`leave`), a device's use (`skip_driver_exit`), device
//! objects no longer used (`keep`). Gives: the process's exit (`exit`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

/// When `main` began (`started`), for the debug log's account of the time outside the run.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Marks the process's start (first thing in `main`).
pub fn started() {
    let _ = STARTED.set(Instant::now());
}

/// Seconds since `started`, if it was marked.
pub fn age_s() -> Option<f64> {
    STARTED.get().map(|t| t.elapsed().as_secs_f64())
}

static LEFT: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());
static SKIP_DRIVER_EXIT: AtomicBool = AtomicBool::new(false);
/// Device objects the exit frees (`keep`).
static KEPT: Mutex<Vec<Box<dyn Send>>> = Mutex::new(Vec::new());

/// Whether device objects are left to the process's exit: not when asked to tear down
/// (FFTD_EXIT_TEARDOWN=1, for comparisons).
pub fn keeps_device_objects() -> bool {
    !crate::knobs::exit_teardown()
}

/// Leaves `objects` (a device engine, pinned pools) to the process's exit, which frees them
/// with the process: only once no command of theirs is in flight, and only where the process
/// ends through `exit` after a device's use (`skip_driver_exit`). Without
/// `keeps_device_objects` they are dropped here.
pub fn keep(objects: Box<dyn Send>) {
    if !keeps_device_objects() {
        return;
    }
    if let Ok(mut kept) = KEPT.lock() {
        kept.push(objects);
    }
}

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
    if let Some(age) = age_s() {
        tracing::debug!(age_s = format!("{age:.3}"), "the process ends");
    }
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
