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
