//! Several OpenCL devices at once, through the whole binary, on the one device CI has (PoCL):
//! the same device listed twice (`--device D,D`) is two independent engines, so these tests see
//! the spreading, the ordering and a failure of one device mid-stream exactly as two GPUs would.
//! Output must be byte-identical to `--device D` alone; `--stats` must show both devices took a
//! share; a device that fails hands its batches to the other (one warning naming it, still
//! byte-identical); both failing leaves the CPU engine, every row then being exactly the OpenCL
//! row or exactly the CPU row. A device that hangs (no error, no progress) holds the others back
//! after a window of batches, with flat memory and a warning naming it, and SIGINT still ends the
//! run cleanly; one that hangs for a while and goes on leaves the output byte-identical. A paused
//! output (a stdout nobody reads for a while) is no stall: no warning, and SIGINT meanwhile gives
//! no device up. A worker that panics while a device hangs still ends the run. A list started
//! in the background (its devices recorded as GPUs) joins each device as soon as it is up.

use crate::common;
use crate::opencl_common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The device the tests list twice (`--device gpu`'s), or None when OpenCL tests may skip.
fn device() -> Option<String> {
    opencl_common::test_device().map(|d| d.info.address())
}

/// fftd with the kernel cache of the other OpenCL tests and warnings only.
fn fftd_run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = fftd();
    if std::env::var_os("POCL_CACHE_DIR").is_none() {
        cmd.env(
            "POCL_CACHE_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/pocl-cache"),
        );
    }
    cmd.args(args).envs(env.iter().copied());
    let out = cmd.output().expect("fftd runs");
    assert!(
        out.status.success(),
        "{args:?} {env:?}: {}",
        stderr_text(&out)
    );
    out
}

/// Frames per input file of the multi-file job.
const FILE_FRAMES: usize = 3000;

/// Four raw inputs (range-read: several readers fill batches at once), 3000 frames of 256 each.
fn four_files(dir: &Path) -> Vec<String> {
    (0..4)
        .map(|k| {
            let path = dir.join(format!("in{k}.f32"));
            write_f32(
                &path,
                &noise(256 * (FILE_FRAMES - 1) + 7 + 50 * k, 40 + k as u64),
            );
            path.to_str().expect("utf8").to_string()
        })
        .collect()
}

/// The multi-file job's flags: 32 frames per batch, one worker per device, f32 files.
fn multi_file_args(files: &[String]) -> Vec<&str> {
    let mut args: Vec<&str> = files.iter().flat_map(|f| ["--file", f.as_str()]).collect();
    args.extend([
        "--frame",
        "256",
        "--batch",
        "32",
        "--workers",
        "1",
        "--format",
        "f32",
    ]);
    args
}

/// Runs the multi-file job on `device` into a fresh folder: every stream's spectra, one after
/// the other, and stderr.
fn run_job(args: &[&str], device: &str, env: &[(&str, &str)]) -> (Vec<u8>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().to_str().expect("utf8");
    let out = fftd_run(
        &[
            args,
            &["--device", device, "--stats", "--output-dir", out_dir],
        ]
        .concat(),
        env,
    );
    let bytes = (0..4)
        .flat_map(|k| std::fs::read(dir.path().join(format!("in{k}.f32"))).expect("output"))
        .collect();
    (bytes, stderr_text(&out))
}

/// Bytes of one output row (129 f32 bins).
const ROW_BYTES: usize = 129 * 4;

/// One device's part of the `fftd devices:` line of `--stats`: (frames, frames on its CPU
/// engines, failed, batches handed on).
#[derive(Debug, Default)]
struct Share {
    frames: u64,
    cpu_frames: u64,
    failed: bool,
    handed: u64,
}

/// The `fftd devices:` line's part for `label` (e.g. "opencl:0:0#2").
fn share(stderr: &str, label: &str) -> Share {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("fftd devices: "))
        .unwrap_or_else(|| panic!("no devices line: {stderr}"));
    let part = line
        .trim_start_matches("fftd devices: ")
        .split("; ")
        .find(|p| p.starts_with(&format!("{label} ")))
        .unwrap_or_else(|| panic!("{label} not in {line}"));
    let number_before = |what: &str| -> u64 {
        part.split(what)
            .next()
            .and_then(|head| head.rsplit([' ', '(']).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Share {
        frames: number_before(" frames ("),
        cpu_frames: number_before(" frames on its CPU engines"),
        failed: part.contains("failed"),
        handed: number_before(" batches handed"),
    }
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("WARN")).collect()
}

#[test]
fn two_engines_spread_a_multi_file_job_and_give_the_same_bytes() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let files = four_files(dir.path());
    let args = multi_file_args(&files);
    let (one, _) = run_job(&args, &dev, &[]);
    // an empty cache: the run shares the work without measuring a calibration first (issue
    // 41: a first run on a fresh machine never waits for one)
    let cache = tempfile::tempdir().expect("cache dir");
    let env = [("FFTD_CACHE_DIR", cache.path().to_str().expect("utf8"))];
    let (two, err) = run_job(&args, &format!("{dev},{dev}"), &env);
    let written: Vec<_> = std::fs::read_dir(cache.path())
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    let calibrations = written
        .iter()
        .filter(|f| f.to_string_lossy().starts_with("calibration"));
    assert_eq!(
        calibrations.count(),
        0,
        "a calibration was measured: {written:?}"
    );
    assert_eq!(
        one.len(),
        4 * FILE_FRAMES * ROW_BYTES,
        "every frame written"
    );
    assert!(one == two, "two engines changed the output");
    let (a, b) = (
        share(&err, &format!("{dev}#1")),
        share(&err, &format!("{dev}#2")),
    );
    assert!(
        a.frames > 0 && b.frames > 0,
        "both devices take a share: {err}"
    );
    assert_eq!(a.frames + b.frames, 4 * FILE_FRAMES as u64, "{err}");
    assert!(warnings(&err).is_empty(), "{err}");
}

/// A list of devices an earlier run recorded as GPUs alone (`device-kinds.json`, seeded here
/// before each run for the device listed twice: a run that opens them records what they are)
/// starts in the background while the CPU engines work, and each device's lane joins as soon
/// as it is up, on its own: none waits for another's start-up (`router::background_lanes`).
/// Tried with more overlap, so more work, until a device joins (how soon one comes up depends
/// on the machine's load). The rows' values are the other tests' (a list's bytes are one
/// device's).
#[test]
fn a_listed_device_in_the_background_joins_as_soon_as_it_is_up_without_the_others() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    let list = format!("{dev},{dev}");
    let input = dir.path().join("long.f32");
    write_f32(&input, &noise(1 << 23, 35));
    let p = input.to_str().expect("utf8");
    let env = [
        ("FFTD_CACHE_DIR", cache.to_str().expect("utf8")),
        ("RUST_LOG", "fftd=debug"),
    ];
    let joined = ["32", "16", "8", "4"].iter().any(|hop| {
        record_device_kinds(&cache, &list, true);
        let args = [
            "--file",
            p,
            "--input-format",
            "f32",
            "--frame",
            "1024",
            "--hop",
            hop,
            "--format",
            "f32",
            "--output",
            "/dev/null",
            "--device",
            &list,
            "--stats",
        ];
        let log = stderr_text(&fftd_run(&args, &env));
        let joins: Vec<&str> = (log.lines())
            .filter(|l| l.contains("device lanes joined"))
            .collect();
        assert!(
            joins.iter().all(|l| l.contains("lanes=1")),
            "hop {hop}: each device joins on its own: {joins:?}"
        );
        let rows = log.lines().find(|l| l.starts_with("fftd devices:"));
        assert!(rows.is_some_and(|l| l.contains(" frames (")), "{log}");
        !joins.is_empty()
    });
    assert!(joined, "no listed device ever joined, even with hop 4");
}

#[test]
fn two_engines_keep_a_single_stream_in_order() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    // text input: read sequentially, batched by the batcher
    let input = dir.path().join("x.txt");
    let samples = 256 * 300 + 5;
    write_text_samples(&input, &noise(samples, 9));
    let frames = (samples - 256).div_ceil(128) + 1;
    let p = input.to_str().expect("utf8");
    let args = [
        "--file",
        p,
        "--frame",
        "256",
        "--hop",
        "128",
        "--batch",
        "8",
        "--workers",
        "1",
        "--format",
        "f32",
    ];
    let one = fftd_run(&[&args[..], &["--device", &dev]].concat(), &[]);
    let twice = format!("{dev},{dev}");
    let two = fftd_run(&[&args[..], &["--device", &twice, "--stats"]].concat(), &[]);
    assert_eq!(one.stdout.len(), frames * 129 * 4, "every frame written");
    assert!(one.stdout == two.stdout, "frames out of order or changed");
    // (which lane takes which batch depends on timing here: a lane that finishes each batch
    // before the next is cut may take them all; the multi-file test checks the spreading)
    let err = stderr_text(&two);
    let (a, b) = (
        share(&err, &format!("{dev}#1")),
        share(&err, &format!("{dev}#2")),
    );
    assert_eq!(a.frames + b.frames, frames as u64, "{err}");
}

// The first device of the list always gets the first batch, and a second one before the other
// device could finish the job, so its fault after one batch comes mid-stream whatever the
// start-up times (each instance builds its kernels at its first batch).

#[test]
fn a_device_failing_mid_stream_hands_its_batches_to_the_other() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let files = four_files(dir.path());
    let args = multi_file_args(&files);
    let (one, _) = run_job(&args, &dev, &[]);
    let first = format!("{dev}#1");
    let fault = format!("{first}@1");
    let (faulty, err) = run_job(
        &args,
        &format!("{dev},{dev}"),
        &[("FFTD_FAULT_AFTER_BATCHES", &fault)],
    );
    assert!(
        one == faulty,
        "a failed device lost, duplicated, reordered or changed frames"
    );
    let warned = warnings(&err);
    assert_eq!(warned.len(), 1, "one warning: {err}");
    assert!(
        warned[0].contains(&first) && warned[0].contains(&format!("go to {dev}#2")),
        "{err}"
    );
    let (a, b) = (share(&err, &first), share(&err, &format!("{dev}#2")));
    assert!(a.failed && !b.failed, "{err}");
    assert_eq!(a.frames, 32, "it failed mid-stream, after 1 batch: {err}");
    assert!(
        a.handed >= 1,
        "the failed batch went to the other device: {err}"
    );
    assert_eq!(a.cpu_frames + b.cpu_frames, 0, "no batch on the CPU: {err}");
    assert_eq!(b.frames, 4 * FILE_FRAMES as u64 - 32, "{err}");
}

#[test]
fn both_devices_failing_leave_the_cpu_and_every_row_intact() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let files = four_files(dir.path());
    let args = multi_file_args(&files);
    let (opencl, _) = run_job(&args, &dev, &[]);
    let (cpu, _) = run_job(&args, "cpu", &[]);
    // the first instance fails after one batch, the second at its first
    let fault = format!("{dev}#1@1,{dev}#2@0");
    let (got, err) = run_job(
        &args,
        &format!("{dev},{dev}"),
        &[("FFTD_FAULT_AFTER_BATCHES", &fault)],
    );
    assert_eq!(got.len(), opencl.len());
    let mut rows_on = (0, 0);
    let rows = got.chunks(ROW_BYTES).zip(opencl.chunks(ROW_BYTES));
    for ((g, o), c) in rows.zip(cpu.chunks(ROW_BYTES)) {
        assert!(g == o || g == c, "a row is neither OpenCL's nor the CPU's");
        rows_on.0 += usize::from(g == o);
        rows_on.1 += usize::from(g != o);
    }
    assert!(
        rows_on.0 >= 32 && rows_on.1 > 0,
        "OpenCL then the CPU: {rows_on:?}"
    );
    let warned = warnings(&err);
    assert_eq!(warned.len(), 2, "one warning per device: {err}");
    assert!(
        warned.iter().any(|w| w.contains("run on the CPU engine")),
        "{err}"
    );
    let (a, b) = (
        share(&err, &format!("{dev}#1")),
        share(&err, &format!("{dev}#2")),
    );
    assert!(a.failed && b.failed, "{err}");
    assert!(a.cpu_frames + b.cpu_frames > 0, "{err}");
}

#[test]
fn gpu_all_falls_back_like_gpu_and_bad_lists_name_the_entry() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(4096 * 20, 3));
    let p = input.to_str().expect("utf8");
    let args = ["--file", p, "--frame", "1024", "--format", "f32"];
    let gpu = fftd_run(&[&args[..], &["--device", "gpu"]].concat(), &[]);
    let all = fftd_run(
        &[&args[..], &["--device", "gpu:all"]].concat(),
        &[("RUST_LOG", "fftd=info")],
    );
    assert!(gpu.stdout == all.stdout);
    let has_gpu = fftd::fft::opencl::device::all_devices()
        .iter()
        .any(|d| d.info.is_gpu);
    if !has_gpu {
        assert!(
            stderr_text(&all).contains("no GPU-type OpenCL device"),
            "{}",
            stderr_text(&all)
        );
    }
    for (list, says) in [
        ("opencl:9:9,cpu", "entry 1 (opencl:9:9)"),
        ("cpu,opencl:0:99", "entry 2 (opencl:0:99)"),
        ("cpu,,gpu", "entry 2 is empty"),
        ("cpu,auto", "entry 2 'auto'"),
        ("cpu,cpu", "listed twice"),
    ] {
        let out = run(&[&args[..], &["--device", list]].concat());
        assert_clean_error(&out, 2, &[says]);
    }
    let devices = run(&["devices"]);
    assert!(
        stdout_text(&devices).contains("--device gpu:all uses"),
        "{}",
        stdout_text(&devices)
    );
    let _ = dev;
}

#[test]
fn bench_runs_every_device_at_once_and_reports_shares() {
    let Some(dev) = device() else { return };
    let twice = format!("{dev},{dev}");
    let out = fftd_run(
        &[
            "bench", "--device", &twice, "--sizes", "1024", "--reps", "1", "--run-ms", "50",
        ],
        &[],
    );
    let text = stdout_text(&out);
    assert!(text.contains("all devices at once"), "{text}");
    let row = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("1024 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains(&format!("{dev}#1 ")) && row.contains(&format!("{dev}#2 ")),
        "{row}"
    );
}

/// The stall time the hang tests give fftd (`FFTD_STALL_SECONDS`; 10 s by default). A healthy
/// batch here takes milliseconds, tens on a fully busy 2-core machine: 2 s is far from both
/// that and the hangs the tests inject (forever, or 4 s), so no healthy lane is ever reported.
const STALL_SECONDS: &str = "2";

/// A running fftd and its stderr, line by line.
struct Running {
    child: Child,
    stderr: mpsc::Receiver<String>,
    /// Every line read so far.
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_to(args, env, Stdio::null())
    }

    /// `start`, its stdout to `stdout`.
    fn start_to(args: &[&str], env: &[(&str, &str)], stdout: Stdio) -> Self {
        let mut cmd = fftd();
        if std::env::var_os("POCL_CACHE_DIR").is_none() {
            cmd.env(
                "POCL_CACHE_DIR",
                concat!(env!("CARGO_TARGET_TMPDIR"), "/pocl-cache"),
            );
        }
        cmd.args(args).envs(env.iter().copied());
        cmd.stdin(Stdio::null()).stdout(stdout);
        let mut child = cmd.stderr(Stdio::piped()).spawn().expect("fftd starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            stderr: rx,
            seen: Vec::new(),
        }
    }

    /// The first line with `needle` (within 60 s).
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(e) => panic!("no '{needle}' on stderr ({e}): {:?}", self.seen),
            }
        }
    }

    /// A `kB` line of /proc/PID/status (VmHWM: the peak resident memory so far).
    fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status");
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("no {field} in {status}"));
        let kb = line.split_whitespace().nth(1).and_then(|v| v.parse().ok());
        kb.unwrap_or_else(|| panic!("{line}"))
    }

    /// SIGINT, then the exit status and the rest of stderr; fails if fftd takes over `limit`.
    fn interrupt(self, limit: Duration) -> (std::process::ExitStatus, Duration, String) {
        let pid = self.child.id().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status();
        assert!(killed.is_ok_and(|s| s.success()));
        self.wait(limit)
    }

    /// The exit status, how long it took from now and the rest of stderr; fails if fftd takes
    /// over `limit`.
    fn wait(mut self, limit: Duration) -> (std::process::ExitStatus, Duration, String) {
        let sent = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            // (dropping `self` kills it)
            assert!(
                sent.elapsed() <= limit,
                "fftd still running after {limit:?}: {:?}",
                self.seen
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let took = sent.elapsed();
        self.seen.extend(self.stderr.iter());
        (status, took, self.seen.join("\n"))
    }
}

impl Drop for Running {
    /// A test that fails before its SIGINT must not leave a hung fftd behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `N` in the `--stats` text right after `before` (e.g. "frames out ").
fn stat_after(stderr: &str, before: &str) -> u64 {
    let rest = stderr
        .split(before)
        .nth(1)
        .unwrap_or_else(|| panic!("no '{before}' in {stderr}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{before}: {stderr}"))
}

#[test]
fn a_hung_device_holds_the_others_to_a_window_warns_and_sigint_still_ends_the_run() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    // 1 GiB of zeros (sparse): 4096 batches of 256 frames, far more than the window
    let input = dir.path().join("big.f32");
    let file = std::fs::File::create(&input).expect("input");
    file.set_len(1 << 30).expect("sparse input");
    let total_frames = (1u64 << 30) / 4 / 256;
    let output = dir.path().join("out.f32");
    let (i, o) = (
        input.to_str().expect("utf8"),
        output.to_str().expect("utf8"),
    );
    let twice = format!("{dev},{dev}");
    let first = format!("{dev}#1");
    let hang = format!("{first}@2:hang");
    let args = [
        "--file",
        i,
        "--frame",
        "256",
        "--batch",
        "256",
        "--workers",
        "1",
        "--format",
        "f32",
        "--device",
        &twice,
        "--stats",
        "--output",
        o,
    ];
    let env = [
        ("FFTD_FAULT_AFTER_BATCHES", hang.as_str()),
        ("FFTD_STALL_SECONDS", STALL_SECONDS),
    ];
    let mut run = Running::start(&args, &env);
    // (b) a warning names the hung device once its batch has taken the stall time
    let warning = run.wait_for("has not finished batch");
    assert!(
        warning.contains("WARN") && warning.contains(&format!("{first} ")),
        "{warning}"
    );
    // (a) the other device stops a window ahead: memory has a ceiling while it waits. Not a
    // growth rate over wall-clock time (how far the other device got in a second depends on
    // how busy the machine is): whatever it does after the hang is seen, the peak may rise by
    // no more than the batches the window lets it finish and the sink hold for order (checked
    // against the window the run reports, below), however long the hang lasts.
    let stalled_kb = run.status_kb("VmHWM:");
    std::thread::sleep(Duration::from_secs(2));
    let later_kb = run.status_kb("VmHWM:");
    // (c) SIGINT: the hung device is given up and the run ends cleanly at once
    let (status, took, err) = run.interrupt(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0), "{err}");
    // a lane that finishes nothing gets 1 s after the signal (INTERRUPT_GRACE), then PROMPT
    assert!(
        took < Duration::from_secs(1) + PROMPT,
        "took {took:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("WARN") && l.contains(&first) && l.contains("given up")),
        "{err}"
    );
    // (a window past the sink's next batch until the stop; after it, before the queues close,
    // past the hung batch, which itself was within a window of the sink's next: two at most)
    let window = stat_after(&err, "(window ");
    let held = stat_after(&err, "held for order at most ");
    assert!(held <= 2 * window, "{err}");
    let ceiling_kb = 2 * window * BATCH_BYTES_AT_MOST / 1024 + ALLOCATOR_SLACK_KB;
    eprintln!("VmHWM {stalled_kb} kB at the warning, {later_kb} kB 2 s later; window {window}, ceiling +{ceiling_kb} kB");
    assert!(
        later_kb <= stalled_kb + ceiling_kb,
        "memory past the window while a device hangs: VmHWM {stalled_kb} kB at the warning, \
         {later_kb} kB later, more than the window of {window} batches allows ({ceiling_kb} kB)"
    );
    let frames_in = stat_after(&err, "frames in ");
    let frames_out = stat_after(&err, "frames out ");
    // reading stops a window past the hung batch (whichever batch number the device hung on:
    // that depends on how the lanes shared the first batches), plus what the readers hold
    let hung = stat_after(&err, "has not finished batch ");
    assert!(
        frames_in <= (hung + 2 * window) * 256 && frames_in < total_frames / 20,
        "reading went on past the window: {err}"
    );
    // the output holds exactly the frames written in order before the hung batch
    let written = std::fs::metadata(&output).expect("output").len();
    assert_eq!(written, frames_out * ROW_BYTES as u64, "{err}");
    assert!(frames_out < frames_in, "{err}");
}

#[test]
fn a_device_that_hangs_for_a_while_then_goes_on_leaves_the_output_intact() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let files = four_files(dir.path());
    let args = multi_file_args(&files);
    let (one, _) = run_job(&args, &dev, &[]);
    let first = format!("{dev}#1");
    let hang = format!("{first}@2:hang=4");
    let (paused, err) = run_job(
        &args,
        &format!("{dev},{dev}"),
        &[
            ("FFTD_FAULT_AFTER_BATCHES", &hang),
            ("FFTD_STALL_SECONDS", STALL_SECONDS),
            ("RUST_LOG", "fftd=info"),
        ],
    );
    assert!(
        one == paused,
        "a paused device lost, reordered or changed frames"
    );
    let warned = warnings(&err);
    assert_eq!(warned.len(), 1, "one warning: {err}");
    assert!(
        warned[0].contains(&first) && warned[0].contains("has not finished batch"),
        "{err}"
    );
    assert!(err.contains("is done with batch"), "{err}");
    // the window counts from the sink's next batch too: whichever batch an encoder's thread
    // is slow to pass on, however busy the machine, the sink holds at most a window for order
    let window = stat_after(&err, "(window ");
    assert!(
        stat_after(&err, "held for order at most ") <= window,
        "{err}"
    );
    let (a, b) = (share(&err, &first), share(&err, &format!("{dev}#2")));
    assert!(
        !a.failed && a.frames > 64,
        "it went on after its pause: {err}"
    );
    assert_eq!(a.frames + b.frames, 4 * FILE_FRAMES as u64, "{err}");
}

/// The most memory one batch of the hang tests can hold while it is in flight or held for
/// order: 256 frames of 256 samples as f32 (the batch) and as f64 (the reader's decode), its
/// 256 rows of 129 f32 bins, and the engine's pinned input and output blocks for it.
const BATCH_BYTES_AT_MOST: u64 = 256 * 256 * (4 + 8) + 2 * 256 * ROW_BYTES as u64 + 256 * 256 * 4;

/// What the allocator and the OpenCL runtime may add on top of the batches (arenas, PoCL's
/// per-queue buffers) once a run is under way.
const ALLOCATOR_SLACK_KB: u64 = 32 * 1024;

/// The hang tests' input: 1 GiB of zeros (sparse), 4096 batches of 256 frames, far more than
/// the window; its path.
fn big_input(dir: &Path) -> String {
    let input = dir.join("big.f32");
    let file = std::fs::File::create(&input).expect("input");
    file.set_len(1 << 30).expect("sparse input");
    input.to_str().expect("utf8").to_string()
}

#[test]
fn a_paused_output_or_a_first_compile_is_no_stall_and_sigint_meanwhile_gives_no_device_up() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = big_input(dir.path());
    let twice = format!("{dev},{dev}");
    let args = [
        "--file",
        &input,
        "--frame",
        "256",
        "--batch",
        "256",
        "--workers",
        "1",
        "--format",
        "f32",
        "--device",
        &twice,
        "--stats",
    ];
    // a reader paused past the 1 s a stuck write gets after SIGINT (`sink::stuck_write`): this
    // test is about the lanes, so the write may wait as long as the pause. An empty PoCL cache:
    // each device compiles its kernels at their first launch, seconds on a busy machine, and
    // that is no stall either (the warm-up before a lane takes batches, `worker::warm_up`)
    let pocl_cache = dir.path().join("pocl-cache");
    let env = [
        ("FFTD_STALL_SECONDS", STALL_SECONDS),
        ("FFTD_STUCK_WRITE_SECONDS", "20"),
        ("POCL_CACHE_DIR", pocl_cache.to_str().expect("utf8")),
    ];
    let mut run = Running::start_to(&args, &env, Stdio::piped());
    let mut stdout = run.child.stdout.take().expect("stdout");
    // the reader takes one row, then nothing until told: the pipe fills, the sink and the
    // workers' sends wait on it
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut row = vec![0u8; ROW_BYTES];
        stdout.read_exact(&mut row).expect("a first row");
        let _ = started_tx.send(());
        let _ = go_rx.recv();
        let mut rest = Vec::new();
        stdout.read_to_end(&mut rest).expect("the rest");
        ROW_BYTES + rest.len()
    });
    assert!(
        started.recv_timeout(Duration::from_secs(60)).is_ok(),
        "no output"
    );
    // well past the stall time with every lane waiting on the output
    std::thread::sleep(Duration::from_millis(2500));
    // SIGINT while the output is still paused, for longer than the 1 s a stalled lane gets
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        let _ = go.send(());
    });
    let (status, _, err) = run.interrupt(Duration::from_secs(30));
    let written = reader.join().expect("reader");
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("has not finished batch"), "{err}");
    assert!(
        !err.contains("given up") && !err.contains("ends before"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // a normal interrupted run: every frame the sink counted, whole rows
    assert_eq!(
        written as u64,
        stat_after(&err, "frames out ") * ROW_BYTES as u64,
        "{err}"
    );
}

#[test]
fn a_worker_panic_while_a_device_hangs_still_ends_the_run() {
    let Some(dev) = device() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = big_input(dir.path());
    let output = dir.path().join("out.f32");
    let o = output.to_str().expect("utf8");
    let twice = format!("{dev},{dev}");
    let faults = format!("{dev}#1@2:hang,{dev}#2@4:panic");
    let args = [
        "--file",
        &input,
        "--frame",
        "256",
        "--batch",
        "256",
        "--workers",
        "1",
        "--format",
        "f32",
        "--device",
        &twice,
        "--output",
        o,
    ];
    let env = [
        ("FFTD_FAULT_AFTER_BATCHES", faults.as_str()),
        ("FFTD_STALL_SECONDS", STALL_SECONDS),
    ];
    // no SIGINT: the panic alone ends the run (the hung worker is left behind)
    let (status, _, err) = Running::start(&args, &env).wait(Duration::from_secs(30));
    assert!(!status.success(), "{err}");
    assert!(err.contains("injected panic"), "{err}");
}
