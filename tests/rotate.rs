//! `--rotate` and SIGHUP (issue 27): rotated files joined equal one unrotated run, byte for byte
//! (npy rows through numpy, csv rows as text), for file input and for paced stdin; a SIGHUP after
//! the output file was moved opens a new one and no row is lost; PNG per file.

use crate::common;

use common::{assert_clean_error, fftd, noise, python_has, run, run_python, write_f32};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Files under `dir` (recursively) whose names end with `ext`, sorted by path.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files(&path, ext));
        } else if path.to_string_lossy().ends_with(ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Every file's rows after its header, joined; asserts each file repeats `header`.
fn csv_rows(paths: &[PathBuf], header: &str) -> Vec<String> {
    let mut rows = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).expect("read csv");
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(header),
            "{} repeats the header",
            p.display()
        );
        rows.extend(lines.map(str::to_string));
    }
    rows
}

/// Checks with numpy that every file in `parts` loads and that they join to `whole` exactly.
fn assert_npy_join(parts: &[PathBuf], whole: &Path) {
    let script = "import sys, numpy as np\n\
        w = np.load(sys.argv[1])\n\
        parts = [np.load(p) for p in sys.argv[2:]]\n\
        a = np.concatenate(parts)\n\
        assert a.shape == w.shape, (a.shape, w.shape)\n\
        assert a.tobytes() == w.tobytes()\n\
        print(len(parts), [p.shape[0] for p in parts])";
    let mut argv = vec![s(whole)];
    argv.extend(parts.iter().map(|p| s(p)));
    let said = run_python(script, &argv, "npy join");
    eprintln!("npy parts: {said}");
}

#[test]
fn rotated_files_join_to_the_unrotated_run_for_file_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(200_000, 7));
    let common = ["--file", s(&input), "--frame", "256", "--rate", "1000"];
    // npy split by size
    let whole = dir.path().join("whole.npy");
    let out = run(&[&common[..], &["--format", "npy", "--output", s(&whole)]].concat());
    assert!(out.status.success(), "{out:?}");
    let by_size = dir.path().join("size");
    std::fs::create_dir(&by_size).unwrap();
    let pattern = by_size.join("part-{seq}.npy");
    let args = [
        "--format",
        "npy",
        "--rotate",
        "64KiB",
        "--output",
        s(&pattern),
    ];
    let out = run(&[&common[..], &args].concat());
    assert!(out.status.success(), "{out:?}");
    let parts = files(&by_size, ".npy");
    assert!(parts.len() >= 6, "{parts:?}");
    for p in &parts {
        let len = std::fs::metadata(p).unwrap().len();
        assert!(len <= 64 * 1024, "{} is {len} bytes", p.display());
    }
    if python_has("numpy") {
        assert_npy_join(&parts, &whole);
    }
    // csv split by period: 200 s of signal at 1 kHz, files of whole minutes, folders by date
    let whole_csv = dir.path().join("whole.csv");
    let out = run(&[&common[..], &["--format", "csv", "--output", s(&whole_csv)]].concat());
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&whole_csv).unwrap();
    let header = text.lines().next().unwrap().to_string();
    let want: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
    let by_time = dir.path().join("time");
    std::fs::create_dir(&by_time).unwrap();
    let pattern = by_time.join("%Y%m%d/%H%M%S-{seq}.csv");
    let args = [
        "--format",
        "csv",
        "--rotate",
        "1min",
        "--output",
        s(&pattern),
    ];
    let out = run(&[&common[..], &args].concat());
    assert!(out.status.success(), "{out:?}");
    let parts = files(&by_time, ".csv");
    assert!((4..=5).contains(&parts.len()), "{parts:?}");
    assert_eq!(csv_rows(&parts, &header), want);
    // each file but the first begins on a whole minute of the run's clock
    for p in &parts[1..] {
        let name = p.file_name().unwrap().to_string_lossy();
        assert_eq!(&name[4..6], "00", "{name} begins a minute");
    }
}

#[test]
fn a_later_run_never_overwrites_an_earlier_runs_rotated_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(20_000, 3));
    let common = ["--file", s(&input), "--frame", "256", "--rate", "1000"];
    let csv = ["--format", "csv"];
    let whole = dir.path().join("whole.csv");
    let out = run(&[&common[..], &csv, &["--output", s(&whole)]].concat());
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&whole).unwrap();
    let header = text.lines().next().unwrap().to_string();
    let want: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
    let contents = |paths: &[PathBuf]| -> Vec<Vec<u8>> {
        paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
    };
    // numbered by size: a file there before the run (not fftd's) and every file of a first run
    // are left as they were; each run's own files still join to its rows
    let by_size = dir.path().join("size");
    std::fs::create_dir(&by_size).unwrap();
    std::fs::write(by_size.join("r-000000.csv"), "precious\n").unwrap();
    let rotate = ["--rotate", "4KiB", "--output"];
    let pattern = by_size.join("r.csv");
    let first = run(&[&common[..], &csv, &rotate, &[s(&pattern)]].concat());
    assert!(first.status.success(), "{first:?}");
    let err = String::from_utf8_lossy(&first.stderr);
    assert_eq!(err.matches("WARN").count(), 1, "said once: {err}");
    assert!(
        err.contains("r-000000.csv") && err.contains("r-000001.csv"),
        "{err}"
    );
    let before = files(&by_size, ".csv");
    assert_eq!(std::fs::read(&before[0]).unwrap(), b"precious\n");
    assert_eq!(csv_rows(&before[1..], &header), want);
    let kept = contents(&before);
    let second = run(&[&common[..], &csv, &rotate, &[s(&pattern)]].concat());
    assert!(second.status.success(), "{second:?}");
    let after = files(&by_size, ".csv");
    assert_eq!(
        contents(&after[..before.len()]),
        kept,
        "the first run's files are as they were"
    );
    assert_eq!(csv_rows(&after[before.len()..], &header), want);
    // named by the hour: a second run within the same hour writes beside the first's file
    let by_hour = dir.path().join("hour");
    std::fs::create_dir(&by_hour).unwrap();
    let pattern = by_hour.join("spec-%Y%m%d%H.csv");
    let hourly = ["--rotate", "1h", "--output", s(&pattern)];
    for _ in 0..2 {
        let out = run(&[&common[..], &csv, &hourly].concat());
        assert!(out.status.success(), "{out:?}");
    }
    let hours = files(&by_hour, ".csv");
    assert_eq!(hours.len(), 2, "{hours:?}");
    for file in &hours {
        assert_eq!(csv_rows(std::slice::from_ref(file), &header), want);
    }
}

/// Spawns fftd reading stdin with `args`.
fn spawn_stdin(args: &[&str]) -> Child {
    fftd()
        .args(["--file", "-", "--device", "cpu"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fftd")
}

/// Feeds `bytes` to every child's stdin in `chunks`, sleeping `pause` between them, then closes
/// stdin and waits for each to succeed. `between` runs after each chunk but the last.
fn feed(
    children: Vec<Child>,
    bytes: &[u8],
    chunks: usize,
    pause: Duration,
    between: &mut dyn FnMut(usize),
) {
    let mut children = children;
    let size = bytes.len().div_ceil(chunks);
    for (k, chunk) in bytes.chunks(size).enumerate() {
        for child in &mut children {
            let stdin = child.stdin.as_mut().expect("stdin");
            stdin.write_all(chunk).expect("feed");
            stdin.flush().expect("flush");
        }
        if k + 1 < chunks {
            std::thread::sleep(pause);
            between(k);
        }
    }
    for mut child in children {
        drop(child.stdin.take());
        let out = wait_at_most(child, Duration::from_secs(30));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn wait_at_most(mut child: Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("fftd did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn rotated_files_join_to_the_unrotated_run_for_paced_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    let samples = noise(64 * 1024, 3);
    write_f32(&input, &samples);
    let bytes = std::fs::read(&input).unwrap();
    let common = ["--input-format", "f32", "--frame", "256", "--rate", "8000"];
    let whole_npy = dir.path().join("whole.npy");
    let whole_csv = dir.path().join("whole.csv");
    for (format, whole) in [("npy", &whole_npy), ("csv", &whole_csv)] {
        let args = [
            "--file",
            s(&input),
            "--format",
            format,
            "--output",
            s(whole),
        ];
        let out = run(&[&common[..], &args].concat());
        assert!(out.status.success(), "{out:?}");
    }
    let npy_pattern = dir.path().join("npy/{seq}.npy");
    let csv_pattern = dir.path().join("csv/{seq}.csv");
    std::fs::create_dir(dir.path().join("npy")).unwrap();
    std::fs::create_dir(dir.path().join("csv")).unwrap();
    let npy = spawn_stdin(
        &[
            &common[..],
            &[
                "--format",
                "npy",
                "--rotate",
                "1s",
                "--output",
                s(&npy_pattern),
            ],
        ]
        .concat(),
    );
    let csv = spawn_stdin(
        &[
            &common[..],
            &[
                "--format",
                "csv",
                "--rotate",
                "1s",
                "--output",
                s(&csv_pattern),
            ],
        ]
        .concat(),
    );
    // 8 chunks 400 ms apart: about 3 s of wall clock, so at least three files each
    feed(
        vec![npy, csv],
        &bytes,
        8,
        Duration::from_millis(400),
        &mut |_| {},
    );
    let npy_parts = files(&dir.path().join("npy"), ".npy");
    let csv_parts = files(&dir.path().join("csv"), ".csv");
    assert!(npy_parts.len() >= 3, "{npy_parts:?}");
    assert!(csv_parts.len() >= 3, "{csv_parts:?}");
    let text = std::fs::read_to_string(&whole_csv).unwrap();
    let header = text.lines().next().unwrap();
    let want: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
    assert_eq!(csv_rows(&csv_parts, header), want);
    if python_has("numpy") {
        assert_npy_join(&npy_parts, &whole_npy);
    }
}

/// Whether SIGHUP is still pending for process `pid` (/proc/PID/status, ShdPnd: signal 1 is
/// the lowest bit).
fn sighup_pending(pid: u32) -> bool {
    sighup_in_mask(pid, "ShdPnd:")
}

/// Whether SIGHUP's bit is set in the signal mask `field` of /proc/PID/status.
fn sighup_in_mask(pid: u32, field: &str) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix(field))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & 1 != 0)
}

fn hup(child: &Child) {
    let ok = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

/// Waits until `ready` holds (at most 60 s: the limit only bounds a failure).
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "waited too long for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` has a handler for SIGHUP (/proc/PID/status, SigCgt).
fn sighup_caught(pid: u32) -> bool {
    sighup_in_mask(pid, "SigCgt:")
}

#[test]
fn sighup_before_the_first_row_leaves_the_file_to_take_them() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(8 * 1024, 7));
    let bytes = std::fs::read(&input).unwrap();
    let common = ["--input-format", "f32", "--frame", "256", "--format", "npy"];
    let whole = dir.path().join("whole.npy");
    let out = run(&[&common[..], &["--file", s(&input), "--output", s(&whole)]].concat());
    assert!(out.status.success(), "{out:?}");
    let live = dir.path().join("live.npy");
    let mut child = spawn_stdin(&[&common[..], &["--output", s(&live)]].concat());
    let pid = child.id();
    wait_for("the SIGHUP handler", || sighup_caught(pid));
    hup(&child);
    wait_for("SIGHUP delivered", || !sighup_pending(pid));
    let stdin = child.stdin.as_mut().expect("stdin");
    stdin.write_all(&bytes).expect("feed");
    drop(child.stdin.take());
    let out = wait_at_most(child, Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read(&live).unwrap(),
        std::fs::read(&whole).unwrap()
    );
    let names: Vec<PathBuf> = files(dir.path(), ".npy");
    assert_eq!(names.len(), 2, "no other file was begun: {names:?}");
}

#[test]
fn sighup_after_the_file_was_moved_opens_a_new_one_and_no_row_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(32 * 1024, 5));
    let bytes = std::fs::read(&input).unwrap();
    let common = ["--input-format", "f32", "--frame", "256"];
    for format in ["csv", "npy"] {
        let whole = dir.path().join(format!("whole.{format}"));
        let args = [
            "--file",
            s(&input),
            "--format",
            format,
            "--output",
            s(&whole),
        ];
        let out = run(&[&common[..], &args].concat());
        assert!(out.status.success(), "{out:?}");
        let live = dir.path().join(format!("live.{format}"));
        let moved = dir.path().join(format!("live.{format}.1"));
        let child =
            spawn_stdin(&[&common[..], &["--format", format, "--output", s(&live)]].concat());
        let pid = child.id();
        let (live2, moved2) = (live.clone(), moved.clone());
        feed(
            vec![child],
            &bytes,
            2,
            Duration::from_millis(300),
            &mut |_| {
                // the first half's rows are in the file: logrotate moves it and sends HUP
                let header = if format == "csv" { 1 } else { 128 };
                wait_for("the first rows", || {
                    std::fs::metadata(&live2).is_ok_and(|m| m.len() > header)
                });
                std::fs::rename(&live2, &moved2).unwrap();
                let ok = Command::new("kill")
                    .args(["-HUP", &pid.to_string()])
                    .status()
                    .unwrap();
                assert!(ok.success());
                // the moved file is completed (npy: its header counts its rows) before new rows
                // come: once the signal is no longer pending the handler has set the flag that
                // the next rows' write sees (not after a guessed 600 ms)
                wait_for("SIGHUP delivered", || !sighup_pending(pid));
            },
        );
        assert!(live.exists(), "a new {format} file was opened after SIGHUP");
        if format == "csv" {
            let text = std::fs::read_to_string(&whole).unwrap();
            let header = text.lines().next().unwrap();
            let want: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
            let got = csv_rows(&[moved.clone(), live.clone()], header);
            assert_eq!(got, want);
        } else if python_has("numpy") {
            assert_npy_join(&[moved, live], &whole);
        }
    }
    let _ = hup; // (spawned children are signalled by pid above)
}

#[test]
fn rotated_png_output_is_an_image_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(100_000, 9));
    let pattern = dir.path().join("img-{seq}.png");
    let args = [
        "--file",
        s(&input),
        "--frame",
        "256",
        "--rate",
        "1000",
        "--format",
        "png",
        "--rotate",
        "30s",
        "--output",
        s(&pattern),
    ];
    let out = run(&args);
    assert!(out.status.success(), "{out:?}");
    let parts = files(dir.path(), ".png");
    // 100 s of signal in clock-aligned 30 s periods: four or five images
    assert!((4..=5).contains(&parts.len()), "{parts:?}");
    for p in &parts {
        let bytes = std::fs::read(p).unwrap();
        assert_eq!(
            &bytes[..8],
            b"\x89PNG\r\n\x1a\n",
            "{} is a PNG",
            p.display()
        );
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        decoder.read_info().expect("a whole PNG");
    }
}

#[test]
fn rotate_needs_a_file_and_a_duration_or_size() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(1024, 1));
    let out = run(&["--file", s(&input), "--rotate", "1h"]);
    assert_clean_error(&out, 2, &["--rotate", "--output"]);
    let out = run(&[
        "--file",
        s(&input),
        "--rotate",
        "1 parsec",
        "--output",
        "x.csv",
    ]);
    assert_clean_error(&out, 2, &["--rotate", "duration"]);
    let bad = dir.path().join("x-%Q.csv");
    let out = run(&["--file", s(&input), "--rotate", "1h", "--output", s(&bad)]);
    assert_clean_error(&out, 2, &["%Q"]);
    // a missing folder is named with the flag that gave it (it was named as --rotate's)
    let nowhere = dir.path().join("nowhere");
    let pattern = nowhere.join("x-%H.csv");
    let out = run(&[
        "--file",
        s(&input),
        "--rotate",
        "1h",
        "--output",
        s(&pattern),
    ]);
    let named = format!(
        "--output {} (with --rotate): no such directory",
        s(&pattern)
    );
    assert_clean_error(&out, 2, &[&named, s(&nowhere)]);
    let out = run(&[
        "--file",
        s(&input),
        "--rotate",
        "1h",
        "--output-dir",
        s(&nowhere),
    ]);
    let named = format!(
        "--output-dir {} (with --rotate): no such directory",
        s(&nowhere)
    );
    assert_clean_error(&out, 2, &[&named]);
    // a FIFO is named as the --output it is (helper-36: it was named as --rotate's value)
    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    let out = run(&["--file", s(&input), "--rotate", "1h", "--output", s(&fifo)]);
    let named = format!(
        "--output {}: a FIFO, a device or stdout cannot be split",
        s(&fifo)
    );
    assert_clean_error(&out, 2, &[&named]);
    std::fs::remove_file(&fifo).expect("rm fifo");
    // a folder named by --output would get its files beside it; --output-dir is the way
    let folder = dir.path().join("out");
    std::fs::create_dir(&folder).expect("mkdir");
    let slashed = format!("{}/", s(&folder));
    for named in [s(&folder), &slashed] {
        let args = ["--file", s(&input), "--rotate", "1h", "--output", named];
        assert_clean_error(&run(&args), 2, &["names a folder", "--output-dir"]);
    }
    let base = ["--file", s(&input), "--format", "csv", "--rotate", "1h"];
    for named in [s(&folder), &slashed] {
        let out = run(&[&base[..], &["--output-dir", named]].concat());
        assert!(out.status.success(), "{}", common::stderr_text(&out));
    }
    // (the second run's file beside the first's, which it does not overwrite)
    assert_eq!(files(&folder, ".csv").len(), 2, "{:?}", files(&folder, ""));
    let beside = std::fs::read_dir(dir.path()).expect("ls").flatten();
    let beside: Vec<_> = (beside.map(|e| e.file_name()))
        .filter(|name| name != "out" && name != "x.f32")
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
}

/// A rotated output's file names are checked against the run's other outputs as each file
/// begins: `--meta`, `--trace` or `--events` naming one of them is refused (before, the
/// sidecar was written over the spectra's first bytes, exit 0), the first file or a later one.
#[test]
fn a_rotated_file_that_is_also_meta_trace_or_events_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(8192, 41));
    let pattern = dir.path().join("o-{seq}.txt");
    let first = dir.path().join("o-000000.txt");
    let third = dir.path().join("o-000002.txt");
    let base = ["--file", s(&input), "--rate", "8000", "--frame", "256"];
    let cases: [(&str, &Path, &str); 3] = [
        ("--meta", &first, "1h"),
        ("--trace", &first, "1h"),
        ("--meta", &third, "4KiB"),
    ];
    for (flag, path, every) in cases {
        let rotated = ["--output", s(&pattern), "--rotate", every, flag, s(path)];
        let out = run(&[&base[..], &rotated].concat());
        let also = format!("which is also {flag}");
        assert_clean_error(&out, 1, &["makes", &also, "each output needs its own file"]);
        for f in std::fs::read_dir(dir.path()).expect("dir").flatten() {
            if f.path() != input {
                std::fs::remove_file(f.path()).expect("remove");
            }
        }
    }
    let events = [
        "--output",
        s(&pattern),
        "--rotate",
        "1h",
        "--alert",
        "name=a,band=100-1000,above=-300",
        "--events",
        s(&first),
    ];
    let out = run(&[&base[..], &events].concat());
    assert_clean_error(&out, 1, &["which is also --events", "its own file"]);
}
