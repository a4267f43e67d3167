//! A job's device programs built after a run that ended first (`fftd build-programs`, hidden),
//! on PoCL: the command builds every program a job's first batch uses into the driver's cache
//! (PoCL's, in a folder of the test's own, so each build here is a cold one), names a bad
//! device in one line, and a run whose work ended while its device start-up in the background
//! was still building hands the build on to it, so the programs are in the cache afterwards.

use crate::common;

use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// The programs PoCL keeps in its cache folder `dir` (one `program.bc` each).
fn cached_programs(dir: &Path) -> usize {
    let Ok(groups) = std::fs::read_dir(dir) else {
        return 0;
    };
    let programs = groups
        .flatten()
        .filter_map(|g| std::fs::read_dir(g.path()).ok());
    programs
        .flatten()
        .flatten()
        .filter(|p| p.path().join("program.bc").is_file())
        .count()
}

#[test]
fn build_programs_builds_every_program_of_a_job_and_names_a_bad_device() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let pocl = dir.path().join("pocl");
    let build = |args: &[&str]| {
        fftd()
            .arg("build-programs")
            .args(args)
            .env("POCL_CACHE_DIR", &pocl)
            .output()
            .expect("run fftd")
    };
    let job = [
        "--frame",
        "4096",
        "--window",
        "hann",
        "--scale",
        "magnitude",
        "--precision",
        "f64",
        "--bands",
        "--runs",
        "--samples-f32",
        "--rows-f32",
    ];
    let out = build(&[&["--device", "opencl:0:0"][..], &job].concat());
    assert_silent_success(&out);
    // the plan's, the bands', the runs' and the f64 carriage's
    assert_eq!(cached_programs(&pocl), 4);
    let out = build(&[&["--device", "opencl:9:9"][..], &job].concat());
    assert_clean_error(&out, 1, &["no OpenCL platform 9"]);
    let out = build(&[&["--device", "gpu"][..], &job].concat());
    assert_clean_error(&out, 1, &["--device gpu: not opencl:P:D"]);
}

/// Waits (at most 3 minutes, whatever the machine's load) for the builder process `pid` to
/// end. (Its command line can read empty for a while after it was started: the exec that
/// gives it one is not done when the parent goes on, and the builder runs at low priority.)
fn wait_for_builder(pid: u32) {
    let stat = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(180);
    // (gone, or a zombie not yet reaped)
    let running = || {
        std::fs::read_to_string(&stat).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    while running() {
        assert!(Instant::now() < deadline, "builder {pid} still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A log-mel run read at its sample rate (`--realtime`) with its device (PoCL, recorded as a
/// GPU) started in the background and an empty program cache, stopped as Ctrl-C would once
/// the device's warm-up has begun: the run ends without waiting for its device's programs, and
/// the builder it starts leaves both in the cache; `--stats` says so. The warm-up is held
/// before it builds anything (`FFTD_FAULT_AFTER_BATCHES=warm-up:hang`, which the builder
/// ignores), so the run ends with its programs unbuilt however long its exit takes on a busy
/// machine, and the programs in the cache are the builder's.
#[test]
fn a_run_that_ends_while_its_device_programs_build_hands_them_to_a_builder() {
    use std::io::{BufRead, BufReader};
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (cache, pocl) = (dir.path().join("cache"), dir.path().join("pocl"));
    std::fs::create_dir_all(&cache).expect("cache dir");
    record_device_kinds(&cache, "gpu", true);
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(1 << 20, 37));
    let p = input.to_str().expect("utf8");
    let args = [
        "--file",
        p,
        "--input-format",
        "f32",
        "--rate",
        "16000",
        "--realtime",
        "--frame",
        "2048",
        "--hop",
        "512",
        "--bands",
        "mel:128",
        "--scale",
        "db",
        "--format",
        "f32",
        "--output",
        "/dev/null",
        "--device",
        "gpu",
        "--stats",
    ];
    let mut run = fftd()
        .args(args)
        .env("FFTD_CACHE_DIR", &cache)
        .env("POCL_CACHE_DIR", &pocl)
        .env("FFTD_FAULT_AFTER_BATCHES", "warm-up:hang")
        .env(
            "RUST_LOG",
            "fftd::left_behind=debug,fftd::pipeline::late_join=debug",
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fftd");
    // (a run that never says its warm-up began is killed after 3 minutes, so the test ends)
    let (waited, watch) = std::sync::mpsc::channel::<()>();
    let pid = run.id() as i32;
    let watchdog = std::thread::spawn(move || {
        if watch.recv_timeout(Duration::from_secs(180)).is_err() {
            // SAFETY: kill(2) on the pid of our child, not yet waited for (the test waits
            // for it only after this thread was told or gave up)
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut log = String::new();
    let mut lines = BufReader::new(run.stderr.take().expect("stderr")).lines();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        log.push_str(&line);
        log.push('\n');
        if line.contains("device lanes warming") {
            // SAFETY: kill(2) on the pid of a child we spawned and have not waited for yet.
            unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
            break;
        }
    }
    lines.for_each(|l| log.push_str(&format!("{}\n", l.unwrap_or_default())));
    let _ = waited.send(());
    watchdog.join().expect("watchdog");
    let status = run.wait().expect("fftd ends");
    assert!(status.success(), "{status:?}: {log}");
    let handed = log.lines().find_map(|l| {
        let at = l.find("programs still building handed to a builder pid=")?;
        l[at..].rsplit('=').next()?.trim().parse::<u32>().ok()
    });
    let pid = handed.unwrap_or_else(|| panic!("no builder: {log}"));
    assert!(
        log.contains("fftd device start-up: programs still building when the work was done"),
        "{log}"
    );
    wait_for_builder(pid);
    // the FFT's program and the bands'
    assert_eq!(cached_programs(&pocl), 2, "{log}");
}
