//! Spectral products through the whole binary: `--average` equals scipy.signal.welch (mean and
//! median, density and spectrum) and numpy's max/min over the frames; `--bands mel:N` equals
//! librosa.feature.melspectrogram (center=False, power=2); an octave band takes a tone's power;
//! `--fmin`/`--fmax` are exactly the bins in range with their frequencies in the csv header and
//! `--meta`; every product on the OpenCL engine (PoCL in CI; bands and the runs of mean, max,
//! min and peak averages reduced on the device) equals the CPU engine's; the averages reduced by
//! the engines equal those of every frame through the averaging stage; bad values
//! are one-line usage errors.

use crate::common;

use common::*;
use std::path::Path;

/// A noise signal with a tone at 1000 Hz, written as raw f32; returns its path.
fn write_signal(dir: &Path, len: usize) -> String {
    let x = noise(len, 5);
    let bytes: Vec<u8> = x
        .iter()
        .enumerate()
        .flat_map(|(i, v)| {
            let tone = (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 8000.0).sin();
            ((0.1 * v + tone) as f32).to_le_bytes()
        })
        .collect();
    let path = dir.join("x.f32");
    std::fs::write(&path, bytes).expect("write");
    path.to_string_lossy().into_owned()
}

/// `--file input` as 8 kHz raw f32 in frames of 512.
fn base_args(input: &str) -> Vec<&str> {
    vec![
        "--file",
        input,
        "--input-format",
        "f32",
        "--rate",
        "8000",
        "--frame",
        "512",
    ]
}

/// Runs fftd on `input` (8 kHz raw f32) into `out` as .npy with `args`; returns its stderr.
fn run_npy(input: &str, out: &Path, args: &[&str]) -> String {
    let mut all = vec!["--file", input, "--input-format", "f32", "--rate", "8000"];
    all.extend(args);
    all.extend(["--format", "npy", "--output", out.to_str().expect("utf-8")]);
    let result = run(&all);
    assert!(
        result.status.success(),
        "{args:?}: {}",
        stderr_text(&result)
    );
    stderr_text(&result)
}

const WELCH_CHECK: &str = r#"
import sys, numpy as np, scipy.signal as ss
x = np.fromfile(sys.argv[1], '<f4').astype(float)
got = np.load(sys.argv[2]); mode, scaling, group = sys.argv[3], sys.argv[4], int(sys.argv[5])
nper, hop = 256, 128
f, t, frames = ss.spectrogram(x, 8000, window='hann', nperseg=nper, noverlap=nper - hop,
                              detrend=False, scaling=scaling, mode='psd')
frames = frames.T
count = len(frames)
assert got.shape[0] == -(-count // group), (got.shape, count, group)
for r in range(got.shape[0]):
    seg = x[r * group * hop : (r * group + min(group, count - r * group) - 1) * hop + nper]
    if mode in ('mean', 'median'):
        _, want = ss.welch(seg, 8000, window='hann', nperseg=nper, noverlap=nper - hop,
                           detrend=False, scaling=scaling, average=mode)
    else:
        want = getattr(np, mode)(frames[r * group:(r + 1) * group], axis=0)
    err = np.max(np.abs(got[r] - want)) / np.max(want)
    assert err < 1e-9, (mode, scaling, r, err)
print('ok', got.shape)
"#;

#[test]
fn average_equals_scipy_welch_and_numpy_max_min() {
    if !python_has("numpy, scipy.signal") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_signal(dir.path(), 40_000);
    let out = dir.path().join("a.npy");
    for (mode, scaling, group) in [
        ("mean", "density", "1000"),
        ("median", "density", "1000"),
        ("mean", "spectrum", "32"),
        ("median", "spectrum", "31"),
        ("max", "density", "50"),
        ("min", "spectrum", "64"),
    ] {
        let args = [
            "--frame",
            "256",
            "--hop",
            "128",
            "--tail",
            "drop",
            "--precision",
            "f64",
            "--scale",
            scaling,
            "--average",
            group,
            "--average-mode",
            mode,
        ];
        let _ = run_npy(&input, &out, &args);
        let out = out.to_str().expect("utf-8");
        let argv = [input.as_str(), out, mode, scaling, group];
        let _ = run_python(WELCH_CHECK, &argv, mode);
    }
}

const MEL_CHECK: &str = r#"
import sys, numpy as np, librosa
x = np.fromfile(sys.argv[1], '<f4').astype(float)
got = np.load(sys.argv[2]); n_fft, hop, n_mels = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
htk, norm, db = sys.argv[6] == 'htk', None if sys.argv[7] == 'none' else 'slaney', sys.argv[8] == 'db'
S = librosa.feature.melspectrogram(y=x, sr=8000, n_fft=n_fft, hop_length=hop, window='hann',
                                   center=False, power=2.0, n_mels=n_mels, htk=htk, norm=norm).T
if db:
    S = 10 * np.log10(np.maximum(S, 1e-24))
    err = np.max(np.abs(got - S))
    assert err < 1e-6, err
else:
    assert got.shape == S.shape, (got.shape, S.shape)
    err = np.max(np.abs(got - S) / np.max(S, axis=1, keepdims=True))
    assert err < 1e-6, err  # librosa's mel weights are float32 (fftd's f64 matrix: tests/bands_librosa.rs)
print('ok', got.shape, err)
"#;

#[test]
fn mel_bands_equal_librosa_melspectrogram() {
    if !python_has("numpy, librosa") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_signal(dir.path(), 30_000);
    let out = dir.path().join("m.npy");
    for (n_fft, hop, mels, htk, norm, scale) in [
        ("1024", "256", "64", "slaney", "slaney", "power"),
        ("512", "512", "40", "htk", "none", "power"),
        ("2048", "300", "128", "slaney", "slaney", "db"),
    ] {
        let mut spec = format!("mel:{mels}");
        if htk == "htk" {
            spec += ",htk";
        }
        if norm == "none" {
            spec += ",norm=none";
        }
        let args = [
            "--frame",
            n_fft,
            "--hop",
            hop,
            "--tail",
            "drop",
            "--precision",
            "f64",
            "--scale",
            scale,
            "--bands",
            &spec,
        ];
        let _ = run_npy(&input, &out, &args);
        let out = out.to_str().expect("utf-8");
        let argv = [&input, out, n_fft, hop, mels, htk, norm, scale];
        let _ = run_python(MEL_CHECK, &argv, &spec);
    }
}

fn csv_table(args: &[&str]) -> (Vec<String>, Vec<Vec<f64>>) {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr_text(&out));
    let text = stdout_text(&out);
    let mut lines = text.lines();
    let header = lines
        .next()
        .expect("header")
        .split(',')
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| {
            l.split(',')
                .skip(3)
                .map(|v| v.parse().expect("number"))
                .collect()
        })
        .collect();
    (header, rows)
}

#[test]
fn a_frequency_range_is_the_bins_in_range_and_an_octave_band_takes_the_tone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_signal(dir.path(), 16_000);
    let base = base_args(&input);
    let (full_header, full) = csv_table(&[&base[..], &["--format", "csv"]].concat());
    let range = ["--fmin", "1000", "--fmax", "1500", "--format", "csv"];
    let (header, rows) = csv_table(&[&base[..], &range].concat());
    // bins 15.625 Hz apart: 1000 Hz is bin 64, 1500 Hz bin 96, both included
    assert_eq!(header[3], "1000.0");
    assert_eq!(header.last().map(String::as_str), Some("1500.0"));
    assert_eq!(&header[3..], &full_header[3 + 64..3 + 97]);
    for (row, whole) in rows.iter().zip(&full) {
        assert_eq!(row.as_slice(), &whole[64..97]);
    }
    let octave = ["--bands", "octave", "--scale", "power", "--format", "csv"];
    let (header, rows) = csv_table(&[&base[..], &octave].concat());
    let centre = |h: &str| h.parse::<f64>().expect("centre");
    let loudest = |row: &Vec<f64>| {
        (0..row.len())
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .expect("bands")
    };
    for row in &rows {
        let band = centre(&header[3 + loudest(row)]);
        assert!((band - 1000.0).abs() < 1.0, "the tone's band is {band} Hz");
    }
    let meta = dir.path().join("m.json");
    let meta_args = [
        "--fmin",
        "1000",
        "--fmax",
        "1500",
        "--meta",
        meta.to_str().expect("utf-8"),
    ];
    let out = run(&[&base[..], &meta_args].concat());
    assert!(out.status.success(), "{}", stderr_text(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(doc["bins"], 33);
    assert_eq!(doc["inputs"][0]["columns_hz"][0], 1000.0);
}

#[test]
fn every_product_on_opencl_equals_the_cpu_engine() {
    if std::env::var("FFTD_SKIP_OPENCL_TESTS").is_ok_and(|v| v == "1") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_signal(dir.path(), 40_000);
    let (cpu, gpu) = (dir.path().join("cpu.npy"), dir.path().join("gpu.npy"));
    let cases: [&[&str]; 11] = [
        &[
            "--frame",
            "1024",
            "--hop",
            "300",
            "--average",
            "5",
            "--average-mode",
            "min",
            "--fmin",
            "100",
        ],
        &[
            "--frame",
            "512",
            "--average",
            "2000",
            "--average-mode",
            "peak",
            "--bands",
            "octave",
        ],
        &["--frame", "1024", "--average", "8", "--scale", "db"],
        &[
            "--frame",
            "512",
            "--hop",
            "128",
            "--average",
            "100ms",
            "--average-mode",
            "median",
        ],
        &[
            "--frame",
            "1024",
            "--bands",
            "mel:40",
            "--average",
            "4",
            "--average-mode",
            "max",
        ],
        &[
            "--frame",
            "2048",
            "--bands",
            "third-octave",
            "--scale",
            "density",
        ],
        // band rows finished on the device (dB, magnitude), from overlapping frames formed there
        &[
            "--frame", "1024", "--hop", "256", "--bands", "mel:40", "--scale", "db",
        ],
        &[
            "--frame",
            "512",
            "--hop",
            "100",
            "--bands",
            "octave",
            "--scale",
            "magnitude",
        ],
        &[
            "--frame",
            "256",
            "--fmin",
            "500",
            "--fmax",
            "3000",
            "--average",
            "1",
            "--average-mode",
            "exp:0.25",
        ],
        // measurements: the weighting and calibration folded into the device's band weights,
        // the level total a band of all bins
        &[
            "--frame",
            "1024",
            "--bands",
            "third-octave",
            "--weighting",
            "a",
            "--calibration",
            "20",
            "--levels",
            "--average",
            "4",
        ],
        &[
            "--frame",
            "512",
            "--weighting",
            "c",
            "--levels",
            "--peaks",
            "2",
            "--scale",
            "db",
        ],
    ];
    for case in cases {
        let _ = run_npy(&input, &cpu, &[case, &["--device", "cpu"]].concat());
        let log = run_npy(&input, &gpu, &[case, &["--device", "gpu"]].concat());
        // the OpenCL engine did the work (bands summed on the device), no fallback to the CPU
        assert!(!log.contains("CPU engine"), "{case:?}: {log}");
        let (a, b) = (npy_values(&cpu), npy_values(&gpu));
        assert_eq!(a.len(), b.len(), "{case:?}");
        let peak = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(worst <= 1e-4 * peak.max(1.0), "{case:?}: {worst} of {peak}");
    }
}

/// The f32 values of a 2-D .npy file fftd wrote (128-byte header).
fn npy_values(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).expect("npy");
    bytes[128..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
        .collect()
}

#[test]
fn bad_product_values_are_one_line_usage_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_signal(dir.path(), 4_000);
    let base = base_args(&input);
    for (args, needles) in [
        (&["--average", "0"][..], &["--average 0"][..]),
        (&["--average-mode", "exp:2"], &["--average-mode exp:2"]),
        (&["--average", "1ms"], &["--average 1ms", "--hop"]),
        (
            &["--fmin", "3000", "--fmax", "1000"],
            &["--fmin 3000", "--fmax 1000"],
        ),
        (
            &["--fmin", "1100", "--fmax", "1101"],
            &["--fmin/--fmax", "15.625 Hz apart"],
        ),
        (
            &["--bands", "mel:300"],
            &["--bands mel:300", "257 frequency bins"],
        ),
        (
            &["--bands", "mel:40", "--scale", "complex"],
            &["--scale complex", "--bands"],
        ),
        (
            &["--average", "4", "--scale", "complex"],
            &["--scale complex", "--average"],
        ),
        (
            &["--bands", "mel:40", "--fmin", "10"],
            &["--fmin/--fmax with --bands"],
        ),
        (&["--bands", "fifth-octave"], &["--bands fifth-octave"]),
        (
            &["--average-mode", "max"],
            &["--average-mode needs --average"],
        ),
    ] {
        let out = run(&[&base[..], args].concat());
        assert_clean_error(&out, 2, needles);
    }
    let whole = run(&[
        "--file",
        &input,
        "--input-format",
        "f32",
        "--frame",
        "whole",
        "--average",
        "2",
    ]);
    assert_clean_error(&whole, 2, &["--frame N, not whole"]);
}

#[test]
fn averages_reduced_by_the_engines_equal_every_frame_through_the_averaging_stage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_signal(dir.path(), 40_000);
    let (whole, runs) = (dir.path().join("whole.npy"), dir.path().join("runs.npy"));
    for mode in ["mean", "max", "min", "peak"] {
        for group in ["7", "250ms", "1000"] {
            let args = [
                "--frame",
                "256",
                "--hop",
                "100",
                "--precision",
                "f64",
                "--batch",
                "50",
                "--average",
                group,
                "--average-mode",
                mode,
            ];
            let mut every_frame = fftd();
            every_frame.env("FFTD_ENGINE_AVERAGING", "0");
            let out = every_frame
                .args(["--file", &input, "--input-format", "f32", "--rate", "8000"])
                .args(args)
                .args(["--device", "cpu", "--format", "npy", "--output"])
                .arg(&whole)
                .output()
                .expect("fftd runs");
            assert!(out.status.success(), "{}", stderr_text(&out));
            let _ = run_npy(&input, &runs, &[&args[..], &["--device", "cpu"]].concat());
            let (a, b) = (npy_f64(&whole), npy_f64(&runs));
            assert_eq!(a.len(), b.len(), "{mode} {group}");
            let peak = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let worst = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            assert!(worst <= 1e-12 * peak, "{mode} {group}: {worst} of {peak}");
        }
    }
}

/// The f64 values of a 2-D .npy file fftd wrote with `--precision f64`.
fn npy_f64(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).expect("npy");
    bytes[128..]
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect()
}
