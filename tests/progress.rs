//! The progress display: shown on a terminal (a pseudo-terminal from util-linux `script`) for a
//! file job, absent when stderr is piped and with `--quiet`.

use crate::common;

use common::*;
use std::process::Command;

/// Runs `fftd ARGS` with stderr on a pseudo-terminal; returns what the terminal showed.
fn on_terminal(args: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("typescript");
    let line = format!("{} --device cpu {args}", env!("CARGO_BIN_EXE_fftd"));
    let status = Command::new("script")
        .args(["-qec", &line, log.to_str().expect("utf8")])
        .env("RUST_LOG", "fftd=warn")
        .output()
        .expect("script (util-linux) runs");
    assert!(status.status.success(), "{}", stderr_text(&status));
    String::from_utf8_lossy(&std::fs::read(&log).expect("typescript")).into_owned()
}

#[test]
fn progress_shows_on_a_terminal_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    let bytes: Vec<u8> = noise(1 << 23, 5)
        .iter()
        .flat_map(|v| (*v as f32).to_le_bytes())
        .collect();
    std::fs::write(&input, bytes).expect("write");
    let job = format!(
        "--file {} --frame 1024 --format text --output /dev/null",
        input.display()
    );
    let shown = on_terminal(&job);
    assert!(
        shown.contains("/8,388,608 samples") && shown.contains("M samples/s"),
        "{shown}"
    );
    let quiet = on_terminal(&format!("{job} --quiet"));
    assert!(!quiet.contains("samples"), "{quiet}");
    let piped = run(&job.split(' ').collect::<Vec<_>>());
    assert_silent_success(&piped);
}
