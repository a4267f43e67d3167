//! What a run leaves behind when its work is done, and the process's exit without waiting for
//! it: a device start-up (context, programs, pinned pools on a thread of its own, issue 23)
//! that had not finished when the output was complete, and the OpenCL driver's exit handlers
//! (NVIDIA's take about 0.2 s to tear down a context the kernel driver frees anyway). `exit`
//! ends the process without them: never inside the driver under a running thread, and no
//! wait for a teardown nothing depends on.
//!
//! The device's own objects (engines with their contexts and device memory, pinned host pools)
//! are left to that exit too (`keep`), and the kernel driver's teardown of them, which still
//! held the exit 0.15–0.2 s on NVIDIA's, to a child that outlives the process by a moment
//! (`leave_release_to_a_child`).
//!
//! Programs a device start-up was still building when the run ended are handed on to a
//! process of their own (`fftd build-programs`, `unbuilt_until_done`), which builds them into
//! the driver's program cache after this process has gone: else the next run of the job would
//! build them from source again, and so would each run that ends before its build.
//!
//! Takes: the start-up thread's handle (`leave`), a device's use (`skip_driver_exit`), device
//! objects no longer used (`keep`), programs under way (`unbuilt_until_done`). Gives: the
//! process's exit (`exit`).

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
pub(crate) fn age_s() -> Option<f64> {
    STARTED.get().map(|t| t.elapsed().as_secs_f64())
}

static LEFT: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());
static SKIP_DRIVER_EXIT: AtomicBool = AtomicBool::new(false);
/// Device objects the exit frees (`keep`).
static KEPT: Mutex<Vec<Box<dyn Send>>> = Mutex::new(Vec::new());

/// Leaves `objects` (a device engine, pinned pools) to the process's exit, which frees them
/// with the process: only once no command of theirs is in flight. The exit then skips the
/// driver's exit handlers (`skip_driver_exit`), which would tear them down first: a device
/// that came up too late to join a run held its exit 0.11–0.15 s that way (H200, issue 41).
pub fn keep(objects: Box<dyn Send>) {
    if let Ok(mut kept) = KEPT.lock() {
        kept.push(objects);
    }
    skip_driver_exit();
}

/// A device was used and its work is done: the exit skips the driver's exit handlers.
pub(crate) fn skip_driver_exit() {
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
pub(crate) fn any_running() -> bool {
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
    hand_on_unbuilt();
    let (device_files, other_files) = open_files();
    if !device_files.is_empty() {
        leave_release_to_a_child(&other_files);
    }
    // SAFETY: `_exit` ends the process without running atexit handlers or destructors; every
    // output of the run was written and closed (files on their drop, stdout flushed just now),
    // so nothing is lost, and no other thread's state is touched.
    unsafe { libc::_exit(i32::from(code)) }
}

/// Programs a device start-up is building for the run (`unbuilt_until_done`), each as the
/// command line that builds them in a process of its own (`opencl::job_programs`).
static UNBUILT: Mutex<Vec<(u64, Vec<String>)>> = Mutex::new(Vec::new());

/// Programs under way on a device start-up; dropped when they are built (or failed).
pub(crate) struct Unbuilt(u64);

/// Notes programs a device start-up is building, which `command_line` (the arguments after
/// the program's name) builds alone: the exit hands them on while `Unbuilt` lives.
pub(crate) fn unbuilt_until_done(command_line: Vec<String>) -> Unbuilt {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut unbuilt) = UNBUILT.lock() {
        unbuilt.push((id, command_line));
    }
    Unbuilt(id)
}

impl Drop for Unbuilt {
    fn drop(&mut self) {
        if let Ok(mut unbuilt) = UNBUILT.lock() {
            unbuilt.retain(|(id, _)| *id != self.0);
        }
    }
}

/// Whether a device start-up is still building programs for the run (`--stats` says so).
pub(crate) fn programs_still_building() -> bool {
    first_unbuilt().is_some()
}

/// The command line of the first programs still under way, if any.
fn first_unbuilt() -> Option<Vec<String>> {
    let unbuilt = UNBUILT.lock().ok()?;
    unbuilt.first().map(|(_, line)| line.clone())
}

/// Starts `fftd build-programs` for the first programs a device start-up was still building:
/// detached (a process group of its own, no stdin, stdout or stderr, so no reader of this
/// run's output waits for it; in `/`, holding no folder of the user's), at low priority (it
/// lowers its own first thing, `JobPrograms::build`), not waited for. Identical devices share the
/// driver's cache, so one builder is enough.
fn hand_on_unbuilt() {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let Some(line) = first_unbuilt() else {
        return;
    };
    let builder = Command::new("/proc/self/exe")
        .args(&line)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .current_dir("/")
        .spawn();
    match builder {
        Ok(child) => tracing::debug!(
            pid = child.id(),
            "programs still building handed to a builder"
        ),
        Err(e) => tracing::debug!("no builder for the programs still building: {e}"),
    }
}

/// This process's open files, in two lists: those of a GPU's kernel driver (`/dev/nvidia*`,
/// `/dev/kfd`, `/dev/dri/*`), whose last close tears the device's contexts and memory down
/// (0.15–0.2 s at every exit after a context was made on NVIDIA's driver, issue 23), and the
/// others.
fn open_files() -> (Vec<i32>, Vec<i32>) {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return (Vec::new(), Vec::new());
    };
    let driver = |target: &std::path::Path| {
        let t = target.to_string_lossy();
        t.starts_with("/dev/nvidia") || t.starts_with("/dev/kfd") || t.starts_with("/dev/dri/")
    };
    let files = dir.flatten().filter_map(|e| {
        let fd: i32 = e.file_name().to_str()?.parse().ok()?;
        Some((fd, std::fs::read_link(e.path()).is_ok_and(|t| driver(&t))))
    });
    let (device, other): (Vec<_>, Vec<_>) = files.partition(|&(_, device)| device);
    let fds = |files: Vec<(i32, bool)>| files.into_iter().map(|(fd, _)| fd).collect();
    (fds(device), fds(other))
}

/// Forks a child that holds the driver's files until this process has ended, then ends
/// itself: the driver's teardown runs at the child's last close, after this process has
/// exited and whoever waits for it (a shell, a pipeline) has gone on. The child first closes
/// `other_files` (every file but the driver's, listed before the fork as the child must not
/// allocate: stdout and stderr, so a reader sees their end now; sockets; inputs), and never
/// touches the device.
fn leave_release_to_a_child(other_files: &[i32]) {
    // SAFETY: `getpid` and `fork` have no preconditions. In the child (a copy of this
    // multithreaded process with one thread) only async-signal-safe calls follow: `close`,
    // `getppid`, `nanosleep` and `_exit`, on values computed before the fork; no lock, no
    // allocation, no device call.
    unsafe {
        let parent = libc::getpid();
        if libc::fork() != 0 {
            return; // this process (or no child could be made): it exits now
        }
        for &fd in other_files {
            libc::close(fd);
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        // wait (at most 10 s) for the parent to be gone: its files are closed by then
        for _ in 0..10_000 {
            if libc::getppid() != parent {
                break;
            }
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_under_way_are_handed_on_only_until_they_are_built() {
        let line = vec![
            "build-programs".to_string(),
            "--frame".into(),
            "4096".into(),
        ];
        let unbuilt = unbuilt_until_done(line.clone());
        let later = unbuilt_until_done(vec!["build-programs".into()]);
        assert_eq!(first_unbuilt(), Some(line));
        drop(unbuilt);
        assert_eq!(first_unbuilt(), Some(vec!["build-programs".to_string()]));
        drop(later);
        assert_eq!(first_unbuilt(), None);
    }

    #[test]
    fn device_objects_kept_for_the_exit_skip_the_drivers_exit_handlers() {
        // (a device that came up too late to join leaves its engines here, and no lane says a
        // device was used: the exit must still not run the driver's teardown of them)
        keep(Box::new(vec![0u8; 4]));
        assert!(SKIP_DRIVER_EXIT.load(Ordering::Relaxed));
    }
}
