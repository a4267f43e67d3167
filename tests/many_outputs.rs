//! Many `--output-dir` files under a low open-file limit: 600 streams (one 600-channel input)
//! into 600 files with `ulimit -n 64`. Files are opened when their rows arrive, at most a fixed
//! number at once, closed and reopened for appending; every file must come out complete.

use crate::common;

use common::*;
use std::path::Path;
use std::process::Command;

const CHANNELS: usize = 600;
const SAMPLES: usize = 64; // per channel: 4 frames of 16

/// Runs fftd under `ulimit -n 64` with `args`.
fn run_limited(args: &[&str]) -> std::process::Output {
    let exe = env!("CARGO_BIN_EXE_fftd");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(exe)
        .args(args)
        .args(["--device", "cpu"])
        .env("RUST_LOG", "fftd=warn");
    if std::env::var_os("FFTD_CACHE_DIR").is_none() {
        cmd.env(
            "FFTD_CACHE_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/fftd-cache"),
        );
    }
    cmd.output().expect("sh runs")
}

fn write_input(path: &Path) {
    let x = noise(CHANNELS * SAMPLES, 21);
    let bytes: Vec<u8> = x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write input");
}

fn dir_args<'a>(input: &'a str, out: &'a str, format: &'a str) -> Vec<&'a str> {
    vec![
        "--file",
        input,
        "--input-format",
        "f32",
        "--channels",
        "600",
        "--channel",
        "all",
        "--frame",
        "16",
        "--batch",
        "3",
        "--workers",
        "2",
        "--format",
        format,
        "--output-dir",
        out,
    ]
}

#[test]
fn six_hundred_output_files_under_ulimit_64() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let input = tmp.path().join("wide.raw");
    write_input(&input);
    let inp = input.to_str().expect("utf8");

    // csv: the header once, then the stream's 4 rows in frame order, in every file
    let csv_dir = tmp.path().join("csv");
    std::fs::create_dir(&csv_dir).expect("mkdir");
    let out = run_limited(&dir_args(inp, csv_dir.to_str().expect("utf8"), "csv"));
    assert!(out.status.success(), "{}", stderr_text(&out));
    for c in 0..CHANNELS {
        let path = csv_dir.join(format!("wide-ch{c}.csv"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{c}: {e}"));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{}: header + 4 rows", path.display());
        assert!(
            lines[0].starts_with("stream,frame,time_s,0.0,"),
            "{}",
            lines[0]
        );
        for (f, line) in lines[1..].iter().enumerate() {
            assert!(
                line.starts_with(&format!("{c},{f},")),
                "{}: {line}",
                path.display()
            );
        }
    }

    let files = std::fs::read_dir(&csv_dir).expect("dir").count();
    assert_eq!(
        files, CHANNELS,
        "one file per stream and nothing else (no probe file left)"
    );

    // npy: header rewritten with the count (files reopened at the end), and the same bytes as
    // the channel analysed alone into one --output
    let npy_dir = tmp.path().join("npy");
    std::fs::create_dir(&npy_dir).expect("mkdir");
    let out = run_limited(&dir_args(inp, npy_dir.to_str().expect("utf8"), "npy"));
    assert!(out.status.success(), "{}", stderr_text(&out));
    let header_of = |bytes: &[u8]| String::from_utf8_lossy(&bytes[..128]).into_owned();
    for c in 0..CHANNELS {
        let bytes = std::fs::read(npy_dir.join(format!("wide-ch{c}.npy"))).expect("npy file");
        assert_eq!(bytes.len(), 128 + 4 * 9 * 4, "channel {c}: size");
        assert!(
            header_of(&bytes).contains("'shape': (4, 9)"),
            "channel {c}: {}",
            header_of(&bytes)
        );
    }
    for c in [0usize, 299, 599] {
        let alone = tmp.path().join(format!("alone{c}.npy"));
        let ch = c.to_string();
        let out = run(&[
            "--file",
            inp,
            "--input-format",
            "f32",
            "--channels",
            "600",
            "--channel",
            &ch,
            "--frame",
            "16",
            "--format",
            "npy",
            "--output",
            alone.to_str().expect("utf8"),
        ]);
        assert!(out.status.success(), "{}", stderr_text(&out));
        assert_eq!(
            std::fs::read(npy_dir.join(format!("wide-ch{c}.npy"))).expect("dir file"),
            std::fs::read(&alone).expect("alone file"),
            "channel {c}"
        );
    }
}
