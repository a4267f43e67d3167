//! Alert and gap marks on the live page's waterfall (issue 27): runs tests/alerts_browser.py
//! (headless chromium through chromedriver and selenium) against the built binary. The script
//! checks that the page receives the start and end of an alert from `/events` and marks each on
//! the waterfall at the row of its time, in the mark colour, with no console errors; and that a
//! `--retry` FIFO input whose writer goes and comes back sends a `gap` event that the page marks
//! at the last row before the outage, in the gap colour. Skipped (with a message) without
//! chromium, chromedriver or selenium, except under CI, where it fails.

use crate::common;

use common::{python, python_has};
use std::path::Path;
use std::process::Command;

#[test]
fn alert_marks_on_the_waterfall_in_chromium() {
    let present = ["/usr/bin/chromium", "/usr/bin/chromedriver"]
        .iter()
        .all(|p| Path::new(p).exists());
    if !present {
        let required = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!required, "chromium and chromedriver are required in CI");
        eprintln!("SKIPPING the alert browser test: chromium or chromedriver missing");
        return;
    }
    if !python_has("selenium") {
        return;
    }
    let out_dir = concat!(env!("CARGO_TARGET_TMPDIR"), "/alerts_browser");
    let out = Command::new(python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/alerts_browser.py"
        ))
        .args(["--fftd", env!("CARGO_BIN_EXE_fftd"), "--out", out_dir])
        .env("RUST_LOG", "fftd=warn")
        .env(
            "FFTD_CACHE_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/fftd-cache"),
        )
        .output()
        .expect("python runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(
        out.status.success(),
        "the alert browser test failed:\n{report}"
    );
}
