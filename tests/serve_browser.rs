//! The live page of `fftd --serve` in a real browser: runs tests/serve_browser.py (Debian's
//! chromium, headless, through chromedriver and selenium) against the built binary. The script
//! says what it checks: no console errors, rows arriving, the waterfall's brightest column (read
//! from its pixels) and the cursor readout at the tone, pause, the spectrum's and the waterfall's
//! own dB ranges (one changed, the other's pixels unchanged), the waterfall's speed (rows gained
//! at 5 rows/s, a one-row burst in the max of a 1 row/s row, time labels at the rows' times),
//! settings kept over a reload, the stream picker switching streams, the speed menu's "every row"
//! saying the rate that arrives, all under the server's Content-Security-Policy; then a page of
//! another origin (a second port) refused the WebSocket while the page's own origin opens it, and
//! with `--serve-token` the page refused until opened once with `?token=` (then working from its
//! HttpOnly cookie); with measurements the levels readout and the unit on the level axis and in the
//! cursor readout; with `--cross` the transfer-function panel (H1 against a FIR filter's response,
//! its traces' pixels). It also measures how the page keeps up and saves a screenshot in
//! `target/tmp/serve_browser/`.
//!
//! Without chromium, chromedriver or selenium the test is skipped with a message, except under
//! `CI=true` (or `FFTD_REQUIRE_BROWSER` set), where it fails: `scripts/deps.sh --test` installs them.

use crate::common;

use common::{python, python_has};
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// Whether chromium, chromedriver and selenium are all there; under CI a missing one fails.
/// `FFTD_CHROMIUM` and `FFTD_CHROMEDRIVER` override the paths (the script reads them too).
fn browser_available() -> bool {
    let missing: Vec<String> = [
        ("FFTD_CHROMIUM", "/usr/bin/chromium"),
        ("FFTD_CHROMEDRIVER", "/usr/bin/chromedriver"),
    ]
    .into_iter()
    .map(|(var, default)| std::env::var(var).unwrap_or_else(|_| default.into()))
    .filter(|p| !Path::new(p).exists())
    .collect();
    if !missing.is_empty() {
        let required = std::env::var("CI").is_ok_and(|v| v == "true")
            || std::env::var_os("FFTD_REQUIRE_BROWSER").is_some();
        assert!(
            !required,
            "{} missing (CI requires them: run scripts/deps.sh --test)",
            missing.join(" and ")
        );
        // straight to stderr, past the test harness's capture: a skip must be seen
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPING the browser test: {} missing (apt-get install chromium chromium-driver)",
            missing.join(" and ")
        );
        return false;
    }
    python_has("selenium")
}

#[test]
fn live_page_in_chromium() {
    if !browser_available() {
        return;
    }
    let out_dir = concat!(env!("CARGO_TARGET_TMPDIR"), "/serve_browser");
    let _ = std::fs::remove_dir_all(out_dir);
    let mut cmd = Command::new(python());
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/serve_browser.py"
    ))
    .args(["--fftd", env!("CARGO_BIN_EXE_fftd"), "--out", out_dir])
    .env("RUST_LOG", "fftd=warn");
    if std::env::var_os("FFTD_CACHE_DIR").is_none() {
        cmd.env(
            "FFTD_CACHE_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/fftd-cache"),
        );
    }
    let out = cmd.output().expect("python runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(out.status.success(), "the browser test failed:\n{report}");
}
