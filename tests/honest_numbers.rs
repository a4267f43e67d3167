//! Honest numbers (issue 22, section 3): every number fftd writes is the value it computed.
//! Non-finite spectrum values read back as NaN and ±infinity through numpy, pandas and a JSON
//! reader, at the places the npy output holds them; input that the working precision cannot hold
//! is an error naming where it is; `--stats` counts what was analysed.

use crate::common;

use common::{
    assert_clean_error, python_has, run, run_python, stderr_text, write_f32, write_text_samples,
};
use std::path::Path;

/// Compares the text, csv and ndjson outputs (argv 2..5) with the npy one (argv 1): the same
/// shape, NaN, +inf and -inf at the same places (JSON: null at every non-finite place), the
/// finite values equal. Complex npy rows are compared as interleaved re, im. Prints the count of
/// NaN and infinite values.
const COMPARE: &str = r#"
import json, sys
import numpy as np
import pandas as pd

npy, txt, csv, ndjson = sys.argv[1:5]
ref = np.load(npy)
if np.iscomplexobj(ref):
    ref = np.stack([ref.real, ref.imag], axis=-1).reshape(ref.shape[0], -1)
ref = ref.astype(np.float64)

def same(name, got):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    for kind, mask in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        assert (mask(got) == mask(ref)).all(), (name, kind, got.tolist(), ref.tolist())
    fin = np.isfinite(ref)
    assert (got[fin].astype(np.float32) == ref[fin].astype(np.float32)).all(), (name, got[fin], ref[fin])

same("text via np.loadtxt", np.loadtxt(txt, ndmin=2))
same("text via np.genfromtxt", np.genfromtxt(txt, ndmin=2))
frame = pd.read_csv(csv, float_precision="round_trip")
same("csv via pandas.read_csv", frame.iloc[:, 3:].to_numpy())
same("csv via np.loadtxt", np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2)[:, 3:])

rows = [json.loads(line) for line in open(ndjson)]
for row, want in zip(rows, ref):
    bins = row["bins"]
    flat = [v for pair in bins for v in pair] if bins and isinstance(bins[0], list) else bins
    assert len(flat) == len(want), (len(flat), len(want))
    for got, w in zip(flat, want):
        if np.isfinite(w):
            assert got is not None and np.float32(got) == np.float32(w), (got, w)
        else:
            assert got is None, ("ndjson", got, w)
assert len(rows) == len(ref)
print(int(np.isnan(ref).sum()), int(np.isinf(ref).sum()))
"#;

/// 16 samples of 3e38 (a rectangular window sums them past f32: inf and inf - inf = NaN bins),
/// then 16 ordinary ones.
fn overflowing_samples() -> Vec<f64> {
    let mut samples = vec![3e38; 16];
    samples.extend(common::noise(16, 22));
    samples
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

#[test]
fn non_finite_values_round_trip_through_numpy_pandas_and_json() {
    if !python_has("numpy, pandas") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("big.txt");
    write_text_samples(&input, &overflowing_samples());
    for scale in ["magnitude", "complex", "db", "power"] {
        let out = |format: &str| dir.path().join(format!("{scale}.{format}"));
        for format in ["npy", "text", "csv", "ndjson"] {
            let path = out(format);
            let run = run(&[
                "--file",
                path_str(&input),
                "--frame",
                "16",
                "--window",
                "rect",
                "--scale",
                scale,
                "--format",
                format,
                "--output",
                path_str(&path),
            ]);
            assert!(
                run.status.success(),
                "{scale} {format}: {}",
                stderr_text(&run)
            );
        }
        let args = ["npy", "text", "csv", "ndjson"].map(&out);
        let args = args.each_ref().map(|p| path_str(p));
        let counts = run_python(COMPARE, &args, scale);
        let counts: Vec<u64> = counts
            .split_whitespace()
            .map(|c| c.parse().expect("count"))
            .collect();
        assert!(
            counts[0] > 0 && (scale == "db" || counts[1] > 0),
            "{scale}: the input must give NaN and infinite bins, got {counts:?}"
        );
        let text = std::fs::read_to_string(out("text")).expect("text output");
        assert!(
            text.contains("nan") && text.contains("inf"),
            "{scale}: {text}"
        );
    }
}

/// |X| above ~1.8e19 squares past f32 (1.3e154 past f64), though |X|, its dB and a power scaled
/// by the window's sum fit: these are written as computed from |X|, on the CPU and the OpenCL
/// route alike (helper-34: a DC of 6.4e19 was written as inf, in dB too).
#[test]
fn a_magnitude_whose_square_overflows_is_written_finite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut devices = vec!["cpu"];
    if common::opencl_required() {
        devices.push("gpu");
    }
    // 64 equal samples, rect window: X_0 = 64·v, the other bins 0
    for (precision, v) in [("f32", 1e18), ("f64", 1e153)] {
        let input = dir.path().join(format!("{precision}.txt"));
        write_text_samples(&input, &[v; 64]);
        let dc = 64.0 * v;
        for (scale, want) in [
            ("magnitude", dc),
            ("db", 20.0 * dc.log10()),
            ("spectrum", v * v), // |X_0|²/(Σw)²
        ] {
            for device in &devices {
                let out = run(&[
                    "--file",
                    path_str(&input),
                    "--frame",
                    "64",
                    "--window",
                    "rect",
                    "--precision",
                    precision,
                    "--scale",
                    scale,
                    "--device",
                    device,
                ]);
                let what = format!("{precision} {scale} {device}: {}", stderr_text(&out));
                assert!(out.status.success(), "{what}");
                let rows = common::parse_rows(&common::stdout_text(&out));
                let got = rows[0][0];
                assert!(
                    (got - want).abs() <= want.abs() * 1e-6,
                    "{got} vs {want}, {what}"
                );
                assert!(rows[0][1..].iter().all(|b| b.is_finite()), "{what}");
            }
        }
    }
}

/// |X| below ~1.1e-19 squares below f32's smallest normal number (1.5e-154 below f64's): a
/// magnitude computed as √|X|² lost digits or all of itself (helper-38/40: 1e-22 read
/// 9.904e-23, 1e-25 read 0). Written as computed from |X|, on both routes; dB keeps its floor.
#[test]
fn a_magnitude_whose_square_underflows_is_written_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut devices = vec!["cpu"];
    if common::opencl_required() {
        devices.push("gpu");
    }
    // 64 samples of a ramp from v to 2v, rect window: no bin is 0
    for (precision, v) in [("f32", 1e-22), ("f32", 1e-25), ("f64", 1e-160)] {
        let input = dir.path().join(format!("{precision}-{v}.txt"));
        let samples: Vec<f64> = (0..64).map(|i| v * (1.0 + i as f64 / 64.0)).collect();
        write_text_samples(&input, &samples);
        let want = dft_magnitudes(&samples);
        for device in &devices {
            let rows = |scale: &str| {
                let out = run(&[
                    "--file",
                    path_str(&input),
                    "--frame",
                    "64",
                    "--window",
                    "rect",
                    "--precision",
                    precision,
                    "--scale",
                    scale,
                    "--device",
                    device,
                ]);
                let what = format!("{precision} {v} {device}: {}", stderr_text(&out));
                assert!(out.status.success(), "{what}");
                (common::parse_rows(&common::stdout_text(&out)), what)
            };
            let (m, what) = rows("magnitude");
            for (k, (got, want)) in m[0].iter().zip(&want).enumerate() {
                assert!(
                    (got - want).abs() <= want * 1e-5,
                    "bin {k}: {got} vs {want}, {what}"
                );
            }
            let (db, what) = rows("db");
            assert!(
                db[0].iter().all(|&d| d == -240.0),
                "{:?} {what}",
                &db[0][..4]
            );
        }
    }
}

/// Band sums and averages reduce power, which in f32 overflowed from samples near 1e15 on
/// (|X| is up to the frame length times a sample): a 1e18 sine's mel bands in dB were +inf
/// (session 48's audit: 238 inf values of a 1e19 sine). In f32 they now match the f64 run
/// wherever the value fits f32, on both routes; a power output past f32 is +inf, as it is.
#[test]
fn power_products_of_large_samples_are_written_as_computed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("big.f32");
    write_f32(&input, &sine_8k(1e18, 8192));
    let jobs: [&[&str]; 4] = [
        &["--bands", "mel:16", "--scale", "db"],
        &["--average", "4", "--scale", "db"],
        &[
            "--bands",
            "octave:fmin=100",
            "--average",
            "2",
            "--scale",
            "magnitude",
        ],
        &["--average", "4", "--scale", "power"],
    ];
    f32_runs_as_computed(&input, "1024", &jobs);
}

/// A run of an average's frames reduced by an engine holds their mean: as their sum, 4096 rows
/// near 2e36 (a 3e18 sine at frame 16, in the power unit) passed f32 and the averages were +inf
/// on both routes (session 49's review, on the device; the CPU route's runs too, this session).
#[test]
fn long_averages_of_large_samples_are_written_as_computed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("big.f32");
    write_f32(&input, &sine_8k(3e18, 1 << 16));
    let jobs: [&[&str]; 2] = [
        &["--average", "4096", "--scale", "db"],
        &["--average", "1000", "--scale", "magnitude"],
    ];
    f32_runs_as_computed(&input, "16", &jobs);
}

/// A 1 kHz sine of `amplitude` sampled at 8 kHz.
fn sine_8k(amplitude: f64, samples: usize) -> Vec<f64> {
    (0..samples)
        .map(|i| amplitude * (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 8000.0).sin())
        .collect()
}

/// Each of `jobs` on `input` (frames of `frame` at 8 kHz) in f32, on the CPU and (where the suite
/// has one) the OpenCL device, against the CPU route in f64 (`assert_written_as_computed`).
fn f32_runs_as_computed(input: &Path, frame: &str, jobs: &[&[&str]]) {
    let mut devices = vec!["cpu"];
    if common::opencl_required() {
        devices.push("gpu");
    }
    for job in jobs {
        let run_of = |device: &str, precision: &str| {
            let how = ["--rate", "8000", "--frame", frame, "--device", device];
            products_of(input, &how, precision, job)
        };
        let (want, _) = run_of("cpu", "f64");
        for device in &devices {
            let (got, what) = run_of(device, "f32");
            assert_written_as_computed(&got, &want, job.contains(&"db"), &what);
        }
    }
}

/// The same in f64, at f64's end: powers near 1e308 (a 2.5e153 sine at frame 16) in runs of 1000
/// added past f64's range on the host (the CPU route's runs and the averager, whose sums were plain
/// f64) and were written +inf where the device, scaling its sums, wrote the mean (helper-45).
#[test]
fn long_f64_averages_at_the_end_of_f64_are_written_as_computed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("huge.txt");
    write_text_samples(&input, &sine_8k(2.5e153, 1 << 14));
    let job = ["--average", "1000", "--scale", "db"];
    let how = |device| ["--rate", "8000", "--frame", "16", "--device", device];
    let (want, _) = products_of(&input, &how("cpu"), "f64", &job);
    let mut runs = vec![(
        "cpu, every frame to the averager",
        every_frame_averaged(&input, &job),
    )];
    if common::opencl_required() {
        runs.push(("gpu", products_of(&input, &how("gpu"), "f64", &job).0));
    }
    assert!(want.iter().flatten().all(|v| v.is_finite()), "{want:?}");
    for (name, got) in runs {
        assert_written_as_computed(&got, &want, true, name);
    }
}

/// The CPU route's rows with every frame sent to the averager (`FFTD_ENGINE_AVERAGING=0`).
fn every_frame_averaged(input: &Path, job: &[&str]) -> Vec<Vec<f64>> {
    let out = common::fftd()
        .env("FFTD_ENGINE_AVERAGING", "0")
        .args(["--file", path_str(input), "--rate", "8000", "--frame", "16"])
        .args(["--precision", "f64", "--device", "cpu"])
        .args(job)
        .output()
        .expect("fftd runs");
    assert!(out.status.success(), "{}", stderr_text(&out));
    common::parse_rows(&common::stdout_text(&out))
}

/// fftd's rows for `input` (f32 samples) with `how` and `job`, in `precision`, and the run named.
fn products_of(
    input: &Path,
    how: &[&str],
    precision: &str,
    job: &[&str],
) -> (Vec<Vec<f64>>, String) {
    let mut args = vec!["--file", path_str(input), "--precision", precision];
    args.extend(how);
    args.extend(job);
    let out = run(&args);
    let what = format!("{job:?} {how:?} {precision}: {}", stderr_text(&out));
    assert!(out.status.success(), "{what}");
    (common::parse_rows(&common::stdout_text(&out)), what)
}

/// `got` (an f32 run) against `want` (the f64 run's): +inf where the value passes f32, within
/// 0.01 dB (or 0.1 %) where it lies within 60 dB of the top, finite elsewhere.
fn assert_written_as_computed(got: &[Vec<f64>], want: &[Vec<f64>], db: bool, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let top = want.iter().flatten().copied().fold(f64::MIN, f64::max);
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        if *w > f32::MAX as f64 {
            assert_eq!(*g, f64::INFINITY, "{w} {what}");
        } else if db && *w > top - 60.0 {
            assert!((g - w).abs() <= 0.01, "{g} dB vs {w} dB, {what}");
        } else if !db && *w > top * 1e-3 {
            assert!((g - w).abs() <= w * 1e-3, "{g} vs {w}, {what}");
        } else {
            assert!(g.is_finite(), "{g} vs {w}, {what}");
        }
    }
}

/// A band summed over bins that are NaN (inf − inf of samples near f32's largest) is NaN in dB
/// on the device as on the CPU: the band kernel's floor must not take it for a silence (-240).
#[test]
fn a_band_of_nan_bins_stays_nan_in_db() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("big.f32");
    write_f32(&input, &overflowing_samples());
    let mut devices = vec!["cpu"];
    if common::opencl_required() {
        devices.push("gpu");
    }
    for device in devices {
        let out = run(&[
            "--file",
            path_str(&input),
            "--rate",
            "8000",
            "--frame",
            "16",
            "--window",
            "rect",
            "--bands",
            "octave:fmin=600",
            "--scale",
            "db",
            "--device",
            device,
        ]);
        let what = format!("{device}: {}", stderr_text(&out));
        assert!(out.status.success(), "{what}");
        let rows = common::parse_rows(&common::stdout_text(&out));
        assert!(rows[0].iter().all(|v| v.is_nan()), "{rows:?} {what}");
        assert!(rows[1].iter().all(|v| v.is_finite()), "{rows:?} {what}");
    }
}

/// |DFT(x)| in f64, each bin's magnitude by `hypot` (no square to underflow).
fn dft_magnitudes(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    (0..=n / 2)
        .map(|k| {
            let (mut re, mut im) = (0.0f64, 0.0f64);
            for (j, v) in x.iter().enumerate() {
                let phase = -2.0 * std::f64::consts::PI * (k * j % n) as f64 / n as f64;
                re += v * phase.cos();
                im += v * phase.sin();
            }
            re.hypot(im)
        })
        .collect()
}

#[test]
fn a_text_sample_beyond_f32_is_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real.txt");
    std::fs::write(&real, "0.5\n1\n# a comment\n1e39\n2\n").expect("write");
    let out = run(&["--file", path_str(&real), "--frame", "4"]);
    assert_clean_error(
        &out,
        1,
        &[
            path_str(&real),
            "line 4",
            "'1e39'",
            "f32",
            "--precision f64",
        ],
    );
    assert!(out.stdout.is_empty(), "nothing written for a refused input");

    // analysed in f64 the same file is fine, and the value is what was read
    let out = run(&[
        "--file",
        path_str(&real),
        "--frame",
        "4",
        "--precision",
        "f64",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let first: f64 = common::stdout_text(&out)
        .split_whitespace()
        .next()
        .expect("a value")
        .parse()
        .expect("number");
    assert!(first > 9.9e38 && first.is_finite(), "{first}");

    // complex lines and stdin the same way; the largest f32 itself (as fftd writes it) is fine
    let complex = dir.path().join("iq.txt");
    std::fs::write(&complex, "0.5 1\n1 -1e39\n").expect("write");
    let out = run(&["--file", path_str(&complex), "--frame", "2"]);
    assert_clean_error(&out, 1, &[path_str(&complex), "line 2", "'-1e39'"]);
    let max = dir.path().join("max.txt");
    std::fs::write(&max, "3.4028235e38\n-3.4028235e38\n").expect("write");
    let out = run(&["--file", path_str(&max), "--frame", "2", "--window", "rect"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
}

/// A mono 64-bit float WAV file (WAVE_FORMAT_IEEE_FLOAT) of `samples`.
fn write_f64_wav(path: &Path, samples: &[f64]) {
    let data: Vec<u8> = samples.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut b = Vec::new();
    b.extend_from_slice(b"RIFF");
    b.extend_from_slice(&(4 + 24 + 8 + data.len() as u32).to_le_bytes());
    b.extend_from_slice(b"WAVEfmt ");
    b.extend_from_slice(&16u32.to_le_bytes());
    for v in [3u16, 1] {
        b.extend_from_slice(&v.to_le_bytes()); // IEEE float, mono
    }
    for v in [8000u32, 8000 * 8] {
        b.extend_from_slice(&v.to_le_bytes()); // rate, bytes per second
    }
    for v in [8u16, 64] {
        b.extend_from_slice(&v.to_le_bytes()); // block align, bits
    }
    b.extend_from_slice(b"data");
    b.extend_from_slice(&(data.len() as u32).to_le_bytes());
    b.extend_from_slice(&data);
    std::fs::write(path, b).expect("write wav");
}

#[test]
fn a_64_bit_wav_sample_beyond_f32_is_an_error_naming_the_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("wide.wav");
    let mut samples = common::noise(64, 3);
    samples[37] = -1e39;
    write_f64_wav(&wav, &samples);
    // the range readers, the sequential reader and stdin
    for range_read in ["1", "0"] {
        let out = common::fftd()
            .env("FFTD_RANGE_READ", range_read)
            .args(["--file", path_str(&wav), "--frame", "8", "--device", "cpu"])
            .output()
            .expect("fftd runs");
        assert_clean_error(&out, 1, &[path_str(&wav), "sample 37", "-1e39", "f32"]);
    }
    let out = common::fftd()
        .args(["--file", "-", "--input-format", "wav", "--frame", "8"])
        .stdin(std::fs::File::open(&wav).expect("open"))
        .output()
        .expect("fftd runs");
    assert_clean_error(&out, 1, &["-: sample 37", "-1e39"]);
    let out = run(&[
        "--file",
        path_str(&wav),
        "--frame",
        "8",
        "--precision",
        "f64",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
}

/// The numbers after `name` in the `fftd stats` line of `err`.
fn stat(err: &str, name: &str) -> u64 {
    let line = err
        .lines()
        .find(|l| l.starts_with("fftd stats"))
        .unwrap_or_else(|| panic!("no stats line: {err}"));
    let after = line
        .split(&format!("{name} "))
        .nth(1)
        .unwrap_or_else(|| panic!("no '{name}' in {line}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("'{name}' in {line}"))
}

#[test]
fn stats_count_what_was_analysed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let samples = common::noise(16000, 9);
    let text = dir.path().join("x.txt");
    write_text_samples(&text, &samples);
    let raw = dir.path().join("x.f32");
    write_f32(&raw, &samples);
    // (extra flags, frames, samples analysed)
    let cases: [(&[&str], u64, u64); 5] = [
        (&["--max-frames", "1"], 1, 1024),
        (&[], 16, 16000),
        (&["--duration", "0.5", "--rate", "16000"], 8, 8000),
        // frames 2000 apart: the 976 samples between frames are not analysed, nor the 976
        // after the last, in the gap before the next start (no frame of padding alone)
        (&["--hop", "2000"], 8, 8 * 1024),
        (&["--tail", "drop", "--hop", "1000"], 15, 14 * 1000 + 1024),
    ];
    for input in [&text, &raw] {
        for (extra, frames, analysed) in cases {
            let mut args = vec!["--file", path_str(input), "--frame", "1024", "--stats"];
            args.extend(["--format", "f32", "--output", "/dev/null"]);
            args.extend(extra);
            let out = run(&args);
            let err = stderr_text(&out);
            assert!(out.status.success(), "{err}");
            let case = format!("{} {extra:?}: {err}", input.display());
            assert_eq!(stat(&err, "frames in"), frames, "{case}");
            assert_eq!(stat(&err, "frames out"), frames, "{case}");
            assert_eq!(stat(&err, "samples analysed"), analysed, "{case}");
            // the text reader reads the whole file in one block; the range readers read only
            // the frames
            let read = if input == &text { 16000 } else { analysed };
            assert_eq!(stat(&err, "samples read"), read, "{case}");
        }
    }
}
