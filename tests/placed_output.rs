//! Placed outputs (`sink::placed`: f32 and npy rows written straight into a mapped file by the
//! encode threads) give byte-identical files to the ordinary sink (`FFTD_PLACED_OUTPUT=0`): one
//! `--output` file, several `--output-dir` files (a small one among them, written the ordinary
//! way), with `--max-frames` and `--duration` cutting the planned rows, and f64 precision. A
//! device file (`/dev/null`) is never mapped.

use crate::common;

use common::*;
use std::path::Path;

fn write_f32(path: &Path, len: usize, seed: u64) {
    let bytes: Vec<u8> = noise(len, seed)
        .iter()
        .flat_map(|v| (*v as f32).to_le_bytes())
        .collect();
    std::fs::write(path, bytes).expect("write f32");
}

/// Runs fftd with `args` (placed outputs on or off) and returns its stderr.
fn run_placed(args: &[&str], placed: bool) -> String {
    let out = fftd()
        .args(args)
        .args(["--device", "cpu", "--quiet"])
        .env("FFTD_PLACED_OUTPUT", if placed { "1" } else { "0" })
        .env("RUST_LOG", "fftd=debug")
        .output()
        .expect("fftd runs");
    assert!(out.status.success(), "{args:?}: {}", stderr_text(&out));
    stderr_text(&out)
}

/// The same run with and without placed outputs: every output file byte-identical; returns how
/// many outputs the placed run mapped.
fn compare(dir: &Path, inputs: &[&str], flags: &[&str], format: &str, many: bool) -> usize {
    let mut placed_logs = 0;
    let mut files = Vec::new();
    for placed in [false, true] {
        let out = dir.join(format!("out-{placed}"));
        std::fs::create_dir_all(&out).expect("mkdir");
        let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        for input in inputs {
            args.extend(["--file".into(), dir.join(input).display().to_string()]);
        }
        args.extend(["--format".into(), format.into()]);
        match many {
            true => args.extend(["--output-dir".into(), out.display().to_string()]),
            false => args.extend(["--output".into(), out.join("o").display().to_string()]),
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = run_placed(&args, placed);
        if placed {
            placed_logs = log.matches("rows placed by the encoders").count();
        }
        let mut names: Vec<_> = std::fs::read_dir(&out)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .collect();
        names.sort();
        files.push(names);
    }
    assert_eq!(files[0].len(), files[1].len());
    for (a, b) in files[0].iter().zip(&files[1]) {
        let (x, y) = (
            std::fs::read(a).expect("read"),
            std::fs::read(b).expect("read"),
        );
        assert!(
            x == y,
            "{} and {} differ ({flags:?} {format})",
            a.display(),
            b.display()
        );
        assert!(!x.is_empty());
    }
    placed_logs
}

#[test]
fn placed_files_equal_the_ordinary_sinks_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_f32(&dir.path().join("a.f32"), 1 << 20, 1);
    write_f32(&dir.path().join("b.f32"), 700_001, 2);
    write_f32(&dir.path().join("small.f32"), 5_000, 3);
    let one = ["a.f32"];
    let flags = ["--frame", "1024", "--input-format", "f32"];
    for format in ["f32", "npy"] {
        assert_eq!(compare(dir.path(), &one, &flags, format, false), 1);
        let all = ["a.f32", "b.f32", "small.f32"];
        assert_eq!(compare(dir.path(), &all, &flags, format, true), 2); // not the small one
    }
    let cases: [&[&str]; 4] = [
        &["--frame", "1000", "--hop", "300", "--input-format", "f32"],
        &[
            "--frame",
            "1024",
            "--max-frames",
            "777",
            "--input-format",
            "f32",
        ],
        &[
            "--frame",
            "1024",
            "--duration",
            "600000",
            "--input-format",
            "f32",
        ],
        &[
            "--frame",
            "1024",
            "--precision",
            "f64",
            "--input-format",
            "f32",
        ],
    ];
    for flags in cases {
        assert_eq!(
            compare(dir.path(), &one, flags, "npy", false),
            1,
            "{flags:?}"
        );
    }
}

#[test]
fn a_device_file_is_written_the_ordinary_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("a.f32");
    write_f32(&input, 1 << 20, 4);
    let args = [
        "--file",
        input.to_str().expect("utf-8"),
        "--input-format",
        "f32",
    ];
    let log = run_placed(
        &[&args[..], &["--format", "f32", "--output", "/dev/null"]].concat(),
        true,
    );
    assert!(!log.contains("rows placed"), "{log}");
}

/// Names of the part files (`.NAME.fftd-PID.part`) in `dir`.
fn part_files(dir: &Path) -> Vec<String> {
    let names = std::fs::read_dir(dir).expect("read dir").flatten();
    let names = names.map(|e| e.file_name().to_string_lossy().into_owned());
    names.filter(|n| n.ends_with(".part")).collect()
}

/// A run ended at once by a second signal removes its part file (as big as the whole output:
/// helper-51 found 1 GB left behind) and leaves the output as it was; a part file a killed
/// run left (its process gone) is removed by the next run writing that output. The run is
/// stopped (SIGSTOP) once its part file is there, both signals queued, and continued: they
/// come one after the other before it runs on. Where the machine is so busy that the run
/// finished before it was stopped, it must have put its rows in place, with no part file left.
#[test]
fn a_run_ended_at_once_leaves_no_part_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write_f32(&d.join("long.f32"), 4 << 20, 31); // 134 MB of rows at frame 4096, hop 256
    let keep = d.join("keep.f32");
    std::fs::write(&keep, b"precious").expect("write");
    let mut gone = std::process::Command::new("true").spawn().expect("spawn");
    let dead_pid = gone.id();
    gone.wait().expect("wait");
    let stale = format!(".keep.f32.fftd-{dead_pid}.part");
    std::fs::write(d.join(&stale), b"left by a killed run").expect("write");
    let mut child = fftd()
        .args([
            "--file",
            s(&d.join("long.f32")),
            "--frame",
            "4096",
            "--hop",
            "256",
        ])
        .args(["--format", "f32", "--output", s(&keep), "--device", "cpu"])
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let live = format!(".keep.f32.fftd-{pid}.part");
    while !part_files(d).contains(&live) && child.try_wait().expect("try_wait").is_none() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // SAFETY: kill(2) on the child this test spawned and has not reaped.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    wait_until_signals_caught(child.id());
    // SAFETY: as above.
    unsafe {
        libc::kill(pid, libc::SIGINT);
        libc::kill(pid, libc::SIGTERM);
        libc::kill(pid, libc::SIGCONT);
    }
    let status = child.wait().expect("wait");
    assert_eq!(part_files(d), Vec::<String>::new(), "{status:?}");
    match status.code() {
        Some(130) => assert_eq!(std::fs::read(&keep).expect("read"), b"precious"),
        _ => assert!(status.success() && std::fs::metadata(&keep).expect("stat").len() > 8),
    }
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// An existing output owned by another user is written in place, not replaced: a renamed part
/// file would be the writer's (helper-51: a nobody:nogroup file became root:root, its group's
/// readers shut out; in a sticky folder the rename was refused and every row lost). Only where
/// the test runs as root, which can give a file away.
#[test]
fn an_output_of_another_owner_keeps_its_owner_and_gets_the_rows() {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write_f32(&d.join("x.f32"), 1 << 20, 32);
    let args = |out: &Path| {
        let x = d.join("x.f32");
        [
            &["--file", s(&x), "--frame", "1024"][..],
            &["--format", "f32", "--output", s(out)],
        ]
        .concat()
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
    };
    let expected = d.join("expected.f32");
    let refs: Vec<String> = args(&expected);
    run_placed(&refs.iter().map(String::as_str).collect::<Vec<_>>(), false);
    let theirs = d.join("theirs.f32");
    std::fs::write(&theirs, b"theirs").expect("write");
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
    let refs: Vec<String> = args(&theirs);
    run_placed(&refs.iter().map(String::as_str).collect::<Vec<_>>(), true);
    let m = std::fs::metadata(&theirs).expect("stat");
    assert_eq!((m.uid(), m.gid()), (65534, 65534));
    assert_eq!(
        std::fs::read(&theirs).expect("read"),
        std::fs::read(&expected).expect("read")
    );
}
