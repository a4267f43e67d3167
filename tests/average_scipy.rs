//! `products::average` against scipy: the per-frame periodograms of
//! `scipy.signal.spectrogram(x, fs, window='hann', nperseg, noverlap, mode='psd', detrend=False)`
//! (exactly the segments `welch` averages) go through an `Averager`, and each row must equal
//! `scipy.signal.welch(..., detrend=False, average='mean'|'median')` over the same frames, or
//! numpy's max/min over them, to 1e-9 relative per bin; for `density` and `spectrum` scaling, odd
//! and even frame counts, all frames in one row and groups of 4 (by count and by a duration of
//! exactly 4 hops) with a partial final group. Row times must be the start of each group's first
//! frame (scipy's segment centre minus nperseg/2).
//!
//! Needs python3 (`FFTD_PYTHON` to choose another) with numpy and scipy; skipped without them
//! unless CI=true or FFTD_REQUIRE_NUMPY is set, which make it fail instead.

use crate::common;

use common::noise;
use fftd::products::average::{AverageMode, AverageSpec, AveragedRow, Averager};
use serde_json::Value;

const RATE: f64 = 1000.0;
const TOLERANCE: f64 = 1e-9;

/// (nperseg, noverlap, signal length): 9, 10, 7 and 8 frames; some lengths leave samples over.
const FRAMINGS: [(usize, usize, usize); 4] = [
    (256, 128, 1330),
    (256, 128, 1408),
    (100, 25, 560),
    (100, 25, 649),
];

/// How each case groups frames: everything in one row, 4 frames, and a duration of 4 hops.
#[derive(Clone, Copy, Debug)]
enum Group {
    All,
    Four,
    FourHopsOfTime,
}

const GROUPS: [Group; 3] = [Group::All, Group::Four, Group::FourHopsOfTime];

fn python_with_scipy() -> Option<String> {
    let python = std::env::var("FFTD_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&python)
        .args(["-c", "import numpy, scipy.signal"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    let required = std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var_os("FFTD_REQUIRE_NUMPY").is_some();
    assert!(
        !required,
        "{python} lacks numpy/scipy (CI requires it: run scripts/deps.sh)"
    );
    eprintln!("skipping: {python} has no numpy/scipy");
    None
}

/// Runs scipy over `signal` for every framing, scaling and group size; returns its JSON.
fn scipy_reference(python: &str, signal: &[f64]) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.f64");
    let bytes: Vec<u8> = signal.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&path, bytes).expect("write signal");
    let framings: Vec<String> = FRAMINGS
        .iter()
        .map(|(n, overlap, len)| format!("({n}, {overlap}, {len})"))
        .collect();
    let script = format!(
        r#"
import json, sys, numpy as np
from scipy.signal import spectrogram, welch
x = np.fromfile(r"{path}", "<f8")
fs = {RATE}
out = []
for nperseg, noverlap, length in [{framings}]:
    xs = x[:length]
    hop = nperseg - noverlap
    case = {{}}
    for scaling in ("density", "spectrum"):
        kw = dict(window="hann", nperseg=nperseg, noverlap=noverlap, detrend=False, scaling=scaling)
        _, t, S = spectrogram(xs, fs, mode="psd", **kw)
        frames = S.T
        count = frames.shape[0]
        by_group = {{}}
        for size in (count, 4):
            rows = []
            for g0 in range(0, count, size):
                n = min(size, count - g0)
                seg = xs[g0 * hop : g0 * hop + (n - 1) * hop + nperseg]
                row = {{"frames": n, "time_s": t[g0] - nperseg / 2 / fs}}
                for average in ("mean", "median"):
                    row[average] = welch(seg, fs, average=average, **kw)[1].tolist()
                row["max"] = frames[g0 : g0 + n].max(axis=0).tolist()
                row["min"] = frames[g0 : g0 + n].min(axis=0).tolist()
                rows.append(row)
            by_group["all" if size == count else "four"] = rows
        case[scaling] = {{"frames": frames.tolist(), "groups": by_group}}
    out.append(case)
json.dump(out, sys.stdout)
"#,
        path = path.display(),
        framings = framings.join(", ")
    );
    let py = std::process::Command::new(python)
        .args(["-c", &script])
        .output()
        .expect("run python");
    assert!(
        py.status.success(),
        "scipy script failed: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    serde_json::from_slice(&py.stdout).expect("scipy JSON")
}

fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_f64().expect("number"))
        .collect()
}

fn spec_for(group: Group, frames: usize, hop: usize) -> AverageSpec {
    match group {
        Group::All => AverageSpec::Frames(frames),
        Group::Four => AverageSpec::Frames(4),
        // 4 hops at 1000 Hz: hop ms each, so exactly 4 frame starts per interval.
        Group::FourHopsOfTime => format!("{}ms", 4 * hop).parse().expect("duration"),
    }
}

/// The averager's rows for `frames` (frame i starting at i·hop).
fn average(
    frames: &[Vec<f64>],
    spec: AverageSpec,
    hop: usize,
    mode: AverageMode,
) -> Vec<AveragedRow<f64>> {
    let grouping = spec.grouping(RATE, hop).expect("valid grouping");
    let mut averager = Averager::new(grouping, mode, frames[0].len());
    let mut rows = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        averager.push(i as u64, (i * hop) as u64, frame, &mut |r| rows.push(r));
    }
    averager.finish(&mut |r| rows.push(r));
    rows
}

/// Largest |got - want| / |want| over the bins.
fn worst_relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "bin counts differ");
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1e-300))
        .fold(0.0, f64::max)
}

#[test]
fn averager_matches_scipy_welch_and_numpy_max_min() {
    let Some(python) = python_with_scipy() else {
        return;
    };
    let signal = noise(2000, 29);
    let reference = scipy_reference(&python, &signal);
    let modes = [
        ("mean", AverageMode::Mean),
        ("median", AverageMode::Median),
        ("max", AverageMode::Max),
        ("min", AverageMode::Min),
    ];
    let mut checked = 0;
    for (case, &(nperseg, overlap, _)) in FRAMINGS.iter().enumerate() {
        let hop = nperseg - overlap;
        for scaling in ["density", "spectrum"] {
            let scipy = &reference[case][scaling];
            let frames: Vec<Vec<f64>> = scipy["frames"]
                .as_array()
                .expect("frames")
                .iter()
                .map(floats)
                .collect();
            for group in GROUPS {
                let key = if matches!(group, Group::All) {
                    "all"
                } else {
                    "four"
                };
                let want_rows = scipy["groups"][key].as_array().expect("groups");
                for (name, mode) in modes {
                    let context = format!(
                        "nperseg {nperseg}, {} frames, {scaling}, {group:?}, {name}",
                        frames.len()
                    );
                    let rows = average(&frames, spec_for(group, frames.len(), hop), hop, mode);
                    assert_eq!(rows.len(), want_rows.len(), "{context}: row count");
                    for (k, (row, want)) in rows.iter().zip(want_rows).enumerate() {
                        assert_eq!(
                            Some(row.frames as u64),
                            want["frames"].as_u64(),
                            "{context}: row {k} frames"
                        );
                        let want_time = want["time_s"].as_f64().expect("time");
                        assert!(
                            (row.time_s - want_time).abs() < 1e-12,
                            "{context}: row {k} time {} vs {want_time}",
                            row.time_s
                        );
                        let error = worst_relative_error(&row.values, &floats(&want[name]));
                        assert!(
                            error < TOLERANCE,
                            "{context}: row {k}: relative error {error:e}"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    // 4 framings × 2 scalings × 4 modes × (1 + 2 × rows in groups of 4: 3, 3, 2, 2).
    assert_eq!(checked, 2 * 4 * (4 + 2 * (3 + 3 + 2 + 2)));
}
