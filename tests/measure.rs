//! The measurement layer through the whole binary (docs/measure.md), on analytic signals at
//! 48 kHz: a calibrated sine reads its level (Z within 0.05 dB, A-weighted within 0.1 dB of
//! IEC 61672-1's formula), Leq of a stepped level profile, `--calibration-file` with a synthetic
//! correction, `--peaks` of off-bin tones within 0.05 bin, THD of a tone with set harmonics within
//! 0.1 dB; the ndjson and csv fields are named as documented; bad combinations are one-line
//! usage errors. (A and C against the standard's table: unit tests in
//! `products::measure::weighting`.)

use crate::common;

use common::*;
use fftd::products::measure::weighting::Weighting;
use std::f64::consts::PI;
use std::path::Path;

const RATE: f64 = 48000.0;

/// Σ amplitude·sin(2π·hz·t) over `tones`, `seconds` long.
fn tones(tones: &[(f64, f64)], seconds: f64) -> Vec<f64> {
    (0..(seconds * RATE) as usize)
        .map(|i| {
            let t = i as f64 / RATE;
            tones
                .iter()
                .map(|(a, f)| a * (2.0 * PI * f * t).sin())
                .sum()
        })
        .collect()
}

/// Writes `x` as raw f32 into `dir`; returns the path.
fn write(dir: &Path, name: &str, x: &[f64]) -> String {
    let path = dir.join(name);
    write_f32(&path, x);
    path.to_string_lossy().into_owned()
}

/// Runs fftd on raw f32 at 48 kHz with `args`; the ndjson rows as JSON values.
fn ndjson(input: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["--file", input, "--input-format", "f32", "--rate", "48000"];
    all.extend(args);
    all.extend(["--format", "ndjson"]);
    let out = run(&all);
    assert!(out.status.success(), "{args:?}: {}", stderr_text(&out));
    stdout_text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .collect()
}

fn num(row: &serde_json::Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {row}"))
}

#[test]
fn a_calibrated_sine_reads_its_level_flat_and_a_weighted() {
    let dir = tempfile::tempdir().expect("tempdir");
    // -12.04 dBFS (amplitude 0.25), on a bin of frames of 4800 (10 Hz apart)
    let (amplitude, cal) = (0.25f64, 94.0);
    let want = cal + 20.0 * amplitude.log10();
    for hz in [100.0, 1000.0, 8000.0] {
        let input = write(dir.path(), "sine.f32", &tones(&[(amplitude, hz)], 1.0));
        let args = [
            "--frame",
            "4800",
            "--calibration",
            "94",
            "--levels",
            "--peaks",
            "1",
        ];
        let mut db = args.to_vec();
        db.extend(["--scale", "db", "--average", "1s"]);
        let rows = ndjson(&input, &db);
        let row = &rows[0];
        assert!((num(row, "leq") - want).abs() < 0.05, "{hz}: {row}");
        assert!(
            (row["peaks"][0]["db"].as_f64().unwrap() - want).abs() < 0.05,
            "{hz}: {row}"
        );
        assert_eq!(row["unit"], "dB SPL");
        // the sine's own bin in the bins (dB SPL)
        let bin = row["bins"][(hz / 10.0) as usize].as_f64().unwrap();
        assert!((bin - want).abs() < 0.05, "{hz}: bin {bin}");
        for w in [Weighting::A, Weighting::C] {
            let mut weighted = db.clone();
            let letter = w.to_string();
            weighted.extend(["--weighting", &letter]);
            let rows = ndjson(&input, &weighted);
            let got = num(&rows[0], "leq");
            let expected = want + w.db(hz);
            assert!(
                (got - expected).abs() < 0.1,
                "{w} {hz}: {got} vs {expected}"
            );
            assert!(rows[0]["unit"].as_str().unwrap().contains("-weighted"));
        }
    }
}

#[test]
fn leq_follows_a_stepped_level_profile() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 1 s at -20 dBFS, 1 s at -40 dBFS, 1 s at -30 dBFS (sine amplitudes)
    let amp = |dbfs: f64| 10f64.powf(dbfs / 20.0);
    let mut x = tones(&[(amp(-20.0), 1000.0)], 1.0);
    x.extend(tones(&[(amp(-40.0), 1000.0)], 1.0));
    x.extend(tones(&[(amp(-30.0), 1000.0)], 1.0));
    let input = write(dir.path(), "steps.f32", &x);
    let rows = ndjson(&input, &["--frame", "4800", "--levels", "--average", "1s"]);
    assert_eq!(rows.len(), 3);
    for (row, want) in rows.iter().zip([-20.0, -40.0, -30.0]) {
        assert!((num(row, "leq") - want).abs() < 0.05, "{row}");
        assert!(num(row, "lsmin") >= num(row, "lfmin") - 1e-9, "{row}");
    }
    // the Fast meter falls from -20 towards -40 within the second row, Slow lags behind it
    assert!(num(&rows[1], "lfmin") < -39.0 && num(&rows[1], "lsmin") > -39.0);
    assert!(num(&rows[1], "lfmax") > -40.0 && num(&rows[1], "lfmax") < -20.0);
    // over the whole 3 s: the mean of the powers
    let whole = ndjson(&input, &["--frame", "4800", "--levels", "--average", "3s"]);
    let want = 10.0 * ((1e-2 + 1e-4 + 1e-3) / 3.0f64).log10();
    assert!((num(&whole[0], "leq") - want).abs() < 0.05, "{}", whole[0]);
    // per frame without --average: a row per frame
    let frames = ndjson(&input, &["--frame", "4800", "--levels"]);
    assert_eq!(frames.len(), 30);
    assert!((num(&frames[0], "leq") + 20.0).abs() < 0.05);
}

#[test]
fn a_calibration_file_corrects_each_bin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mic.txt");
    std::fs::write(
        &file,
        "\"Sens Factor =1.0dB, SERNO: 1\"\n* Hz dB\n100\t0.0\n1000\t3.0\n10000\t3.0\n",
    )
    .expect("write");
    let input = write(
        dir.path(),
        "sine.f32",
        &tones(&[(1.0, 1000.0), (1.0, 320.0)], 1.0),
    );
    let cal = file.to_str().unwrap();
    let rows = ndjson(
        &input,
        &[
            "--frame",
            "4800",
            "--calibration",
            "100",
            "--calibration-file",
            cal,
            "--peaks",
            "2",
            "--scale",
            "db",
            "--average",
            "1s",
        ],
    );
    let peaks = &rows[0]["peaks"];
    // 1000 Hz: 100 − 3 − 1; 320 Hz: 100 − 3·log10(3.2) − 1 (linear in log-frequency)
    let at = |i: usize| {
        (
            peaks[i]["hz"].as_f64().unwrap(),
            peaks[i]["db"].as_f64().unwrap(),
        )
    };
    let (mut a, mut b) = (at(0), at(1));
    if a.0 > b.0 {
        std::mem::swap(&mut a, &mut b);
    }
    assert!(
        (b.0 - 1000.0).abs() < 0.5 && (b.1 - 96.0).abs() < 0.05,
        "{peaks}"
    );
    let want = 100.0 - 3.0 * 3.2f64.log10() - 1.0;
    assert!(
        (a.0 - 320.0).abs() < 0.5 && (a.1 - want).abs() < 0.05,
        "{peaks}"
    );
}

#[test]
fn peaks_of_off_bin_tones_are_within_a_twentieth_of_a_bin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let step = RATE / 4096.0;
    let hz = [1234.567, 5000.0 + 0.3 * step, 9876.5 + 0.47 * step];
    let input = write(
        dir.path(),
        "tones.f32",
        &tones(&[(0.5, hz[0]), (0.25, hz[1]), (0.1, hz[2])], 0.5),
    );
    let rows = ndjson(
        &input,
        &["--frame", "4096", "--peaks", "3", "--average", "4"],
    );
    let peaks = rows[0]["peaks"].as_array().expect("peaks");
    for (peak, want) in peaks.iter().zip(hz) {
        let got = peak["hz"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 0.05 * step,
            "{got} vs {want}: {} bin",
            (got - want) / step
        );
    }
    // strongest first
    let levels: Vec<f64> = peaks.iter().map(|p| p["db"].as_f64().unwrap()).collect();
    assert!(levels.windows(2).all(|w| w[0] >= w[1]), "{levels:?}");
    // about a radio's centre, with the precision that holds them (f32 is refused there)
    let args = [
        "--frame",
        "4096",
        "--peaks",
        "3",
        "--average",
        "4",
        "--center-freq",
        "2.4G",
        "--precision",
        "f64",
    ];
    let rows = ndjson(&input, &args);
    let peaks = rows[0]["peaks"].as_array().expect("peaks");
    for (peak, want) in peaks.iter().zip(hz) {
        let got = peak["hz"].as_f64().unwrap() - 2.4e9;
        assert!(
            (got - want).abs() < 0.05 * step,
            "{got} vs {want} above 2.4 GHz"
        );
    }
}

#[test]
fn thd_of_a_tone_with_set_harmonics_is_within_a_tenth_of_a_db() {
    let dir = tempfile::tempdir().expect("tempdir");
    // harmonics at -40 and -50 dB re the fundamental: THD = 10·log10(1e-4 + 1e-5)
    let x = tones(
        &[
            (0.5, 1000.0),
            (0.005, 2000.0),
            (0.5 * 10f64.powf(-2.5), 3000.0),
        ],
        1.0,
    );
    let input = write(dir.path(), "thd.f32", &x);
    let want = 10.0 * (1e-4f64 + 1e-5).log10();
    for tone in [None, Some("1000")] {
        let mut args = vec![
            "--frame",
            "4800",
            "--distortion",
            "--average",
            "1s",
            "--window",
            "blackman-harris",
        ];
        if let Some(t) = tone {
            args.extend(["--tone", t]);
        }
        let rows = ndjson(&input, &args);
        let row = &rows[0];
        assert!((num(row, "thd_db") - want).abs() < 0.1, "{row}");
        assert!((num(row, "thdn_db") - want).abs() < 0.1, "{row}");
        assert!((num(row, "sinad_db") + want).abs() < 0.1, "{row}");
        assert!((num(row, "tone_hz") - 1000.0).abs() < 0.5, "{row}");
    }
}

/// A low tone, whose 2nd harmonic's lobe meets its own (helper-38: the harmonic was left out,
/// THD −101 dB for −20), and one whose lobe meets the DC's, and silence: no figures rather than
/// wrong ones.
#[test]
fn thd_of_a_low_tone_counts_a_harmonic_beside_it_and_a_tone_at_dc_has_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (hz, window, measured) in [
        (100.0, "blackman-harris", true),
        (60.0, "hann", true),
        (50.0, "blackman-harris", false),
        (50.0, "hann", false),
    ] {
        let x = tones(&[(0.5, hz), (0.05, 2.0 * hz)], 0.2);
        let input = write(dir.path(), "low.f32", &x);
        let args = ["--frame", "4096", "--distortion", "--window", window];
        let rows = ndjson(&input, &args);
        let row = &rows[0];
        if measured {
            assert!(
                (num(row, "thd_db") + 20.0).abs() < 0.01,
                "{hz} {window}: {row}"
            );
            assert!(
                (num(row, "thdn_db") + 20.0).abs() < 0.01,
                "{hz} {window}: {row}"
            );
            assert!(num(row, "snr_db") > 90.0, "{hz} {window}: {row}");
        } else {
            for key in ["thd_db", "thdn_db", "sinad_db", "snr_db", "tone_hz"] {
                assert!(row[key].is_null(), "{hz} {window}: {row}");
            }
        }
    }
    // silence has no tone (helper-41: the last column, Nyquist, was named), nor DC alone
    // (helper-43: its rounding was named a tone at 12 kHz)
    for level in [0.0, 0.5] {
        let input = write(dir.path(), "flat.f32", &vec![level; 8192]);
        let rows = ndjson(&input, &["--frame", "4096", "--distortion"]);
        for key in ["thd_db", "thdn_db", "sinad_db", "snr_db", "tone_hz"] {
            assert!(rows[0][key].is_null(), "{level}: {}", rows[0]);
        }
    }
}

/// A figure whose columns a row lacks is null with a warning naming the input, not the ±inf
/// of an empty sum (session 48's audit: null rows without a word): a tone above a quarter of
/// the rate has no harmonic in band; a range of a few columns about it has no noise either.
#[test]
fn a_figure_without_its_columns_is_null_and_said_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write(dir.path(), "high.f32", &tones(&[(0.5, 15000.0)], 0.3));
    for (range, nulls, said) in [
        (&[][..], &["thd_db"][..], "thd_db: no harmonic lies"),
        (
            &["--fmin", "14980", "--fmax", "15020"][..],
            &["thd_db", "thdn_db", "sinad_db", "snr_db"][..],
            "thd_db and snr_db: no harmonic and no noise column lie",
        ),
    ] {
        let mut args = vec!["--file", &input, "--input-format", "f32", "--rate", "48000"];
        args.extend(["--frame", "4800", "--distortion", "--format", "ndjson"]);
        args.extend(range);
        let out = run(&args);
        let stderr = stderr_text(&out);
        assert!(out.status.success(), "{range:?}: {stderr}");
        assert_eq!(stderr.matches(said).count(), 1, "{range:?}: {stderr}");
        assert!(stderr.contains("high.f32"), "{stderr}");
        let rows: Vec<serde_json::Value> = stdout_text(&out)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON row"))
            .collect();
        assert!(rows.len() >= 2, "{range:?}");
        for row in &rows {
            assert!((num(row, "tone_hz") - 15000.0).abs() < 1.0, "{row}");
            for key in ["thd_db", "thdn_db", "sinad_db", "snr_db"] {
                assert_eq!(row[key].is_null(), nulls.contains(&key), "{key}: {row}");
            }
        }
    }
}

#[test]
fn csv_names_the_measurements_and_the_unit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write(dir.path(), "sine.f32", &tones(&[(0.5, 1000.0)], 0.5));
    let out = run(&[
        "--file",
        &input,
        "--input-format",
        "f32",
        "--rate",
        "48000",
        "--frame",
        "4800",
        "--levels",
        "--peaks",
        "1",
        "--distortion",
        "--weighting",
        "a",
        "--fmin",
        "900",
        "--fmax",
        "1100",
        "--format",
        "csv",
        "--scale",
        "db",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    let header = text.lines().next().unwrap();
    assert!(header.ends_with(",leq,lfmax,lfmin,lsmax,lsmin,peak1_hz,peak1_db,thd_db,thdn_db,sinad_db,snr_db,tone_hz,unit"), "{header}");
    let first = text.lines().nth(1).unwrap();
    assert!(first.ends_with(",dBFS (A-weighted)"), "{first}");
    assert_eq!(first.split(',').count(), header.split(',').count());
    // text: the measurements are the last values of each line
    let out = run(&[
        "--file",
        &input,
        "--input-format",
        "f32",
        "--rate",
        "48000",
        "--frame",
        "4800",
        "--levels",
    ]);
    let rows = parse_rows(&stdout_text(&out));
    assert_eq!(rows[0].len(), 2401 + 5);
    assert!(
        (rows[0][2401] - 20.0 * 0.5f64.log10()).abs() < 0.05,
        "{:?}",
        &rows[0][2401..]
    );
}

#[test]
fn bad_measurement_flags_are_one_line_usage_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write(dir.path(), "sine.f32", &tones(&[(0.5, 1000.0)], 0.1));
    let base = [
        "--file",
        input.as_str(),
        "--input-format",
        "f32",
        "--rate",
        "48000",
        "--frame",
        "480",
    ];
    let cases: [(&[&str], &[&str]); 16] = [
        // an uncalibrated level named as if calibrated (helper-52: dBFS written as dBV)
        (
            &["--levels", "--unit", "dBV"],
            &[
                "--unit dBV",
                "--calibration DB or --calibration-file",
                "dBFS",
            ],
        ),
        // a level no f32 power holds, and none at all
        (
            &["--calibration", "400"],
            &["--calibration 400", "from -200 to 300"],
        ),
        (
            &["--calibration=-500"],
            &["--calibration -500", "from -200 to 300"],
        ),
        (&["--peaks", "0"], &["--peaks 0", "from 1 to 100"]),
        // a huge value is echoed as given, not as 309 digits
        (
            &["--bands", "mel:40,fmax=1e308"],
            &["--bands mel:40,fmax=1e308: fmax=1e308 Hz is above Nyquist (24000 Hz"],
        ),
        (
            &["--distortion", "--tone", "30000"],
            &[
                "--tone 30000",
                "outside the bins",
                "0 to 24000 Hz at --frame 480)",
            ],
        ),
        // one column left: no figure could be measured (helper-41)
        (
            &["--distortion", "--fmin", "950", "--fmax", "1050"],
            &["--distortion", "1 column(s)", "--fmin/--fmax crop them"],
        ),
        (
            &["--peaks", "2", "--bands", "octave"],
            &["--peaks", "--bands"],
        ),
        (&["--levels", "--scale", "complex"], &["--scale complex"]),
        (&["--tone", "1000"], &["--tone", "--distortion"]),
        (&["--weighting", "b"], &["--weighting"]),
        // the DC bin was weighted as 1 kHz (helper-41)
        (
            &["--weighting", "c", "--center-freq", "1k"],
            &["--weighting c", "centre of 1000 Hz", "for audio"],
        ),
        // harmonics were sought at multiples of the label, 1.001 MHz (helper-54)
        (
            &["--distortion", "--center-freq", "1M"],
            &["--distortion", "centre of 1000000 Hz", "whole multiples"],
        ),
        // f32 rows held the peak at 2400001024 Hz for 2400000999.99 (helper-54)
        (
            &["--peaks", "2", "--center-freq", "2.4G"],
            &["--peaks", "f32 values step by 256 Hz", "--precision f64"],
        ),
        (
            &["--calibration-file", "/nonexistent/mic.txt"],
            &["--calibration-file", "/nonexistent/mic.txt"],
        ),
        (
            &["--levels", "--format", "png", "--output", "/tmp/x.png"],
            &["png"],
        ),
    ];
    for (extra, needles) in cases {
        let mut args = base.to_vec();
        args.extend(extra);
        assert_clean_error(&run(&args), 2, needles);
    }
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "100 0\n50 1\n").expect("write");
    let mut args = base.to_vec();
    args.extend(["--calibration-file", bad.to_str().unwrap()]);
    assert_clean_error(&run(&args), 2, &["bad.txt: line 2", "increasing"]);
}

/// `program build … (N program…)` of `--stats`: the OpenCL programs the run built.
fn programs_built(stderr: &str) -> usize {
    let at = stderr.find("program build").expect("a program build line");
    let after = &stderr[at..];
    let open = after.find('(').expect("(N programs");
    after[open + 1..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count of programs")
}

/// Without `--bands`, the weighting, calibration and the `--levels` total are a band matrix the
/// OpenCL engine sums on the device (a one-bin band per bin, a band of all bins for the total):
/// on PoCL the rows equal the CPU engine's (the columns within 1e-4 of the row's peak, as
/// tests/products.rs holds every product; levels and peaks within 1e-3 dB), and the run built the
/// bands program besides the FFT's.
#[test]
fn measurements_without_bands_run_on_opencl_equal_to_the_cpu() {
    if std::env::var("FFTD_SKIP_OPENCL_TESTS").is_ok_and(|v| v == "1") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut x = tones(&[(0.3, 1000.0), (0.05, 3150.0), (0.01, 120.0)], 1.0);
    for (v, n) in x.iter_mut().zip(noise(48_000, 31)) {
        *v += 0.01 * n;
    }
    let input = write(dir.path(), "mix.f32", &x);
    let cases: [&[&str]; 4] = [
        &["--weighting", "a", "--calibration", "94", "--levels"],
        &[
            "--weighting",
            "c",
            "--levels",
            "--peaks",
            "2",
            "--hop",
            "512",
            "--scale",
            "db",
        ],
        &[
            "--calibration",
            "120",
            "--fmin",
            "500",
            "--fmax",
            "5000",
            "--levels",
            "--distortion",
        ],
        &[
            "--weighting",
            "a",
            "--scale",
            "power",
            "--average",
            "100ms",
            "--levels",
        ],
    ];
    for case in cases {
        let mut rows = Vec::new();
        for device in ["cpu", "gpu"] {
            let mut args = vec!["--frame", "1024", "--device", device, "--stats"];
            args.extend(case);
            let mut all = vec!["--file", &input, "--input-format", "f32", "--rate", "48000"];
            all.extend(args);
            all.extend(["--format", "ndjson"]);
            let out = run(&all);
            assert!(out.status.success(), "{case:?}: {}", stderr_text(&out));
            let err = stderr_text(&out);
            if device == "gpu" {
                assert!(!err.contains("CPU engine"), "{case:?}: {err}");
                let plain = run(&[
                    "--file",
                    &input,
                    "--input-format",
                    "f32",
                    "--rate",
                    "48000",
                    "--frame",
                    "1024",
                    "--device",
                    "gpu",
                    "--stats",
                    "--format",
                    "ndjson",
                ]);
                let (fused, fft) = (programs_built(&err), programs_built(&stderr_text(&plain)));
                assert_eq!(fused, fft + 1, "{case:?}: the bands kernel built: {err}");
            }
            let parsed: Vec<serde_json::Value> = stdout_text(&out)
                .lines()
                .map(|l| serde_json::from_str(l).expect("a JSON row"))
                .collect();
            rows.push(parsed);
        }
        let (cpu, gpu) = (&rows[0], &rows[1]);
        assert_eq!(cpu.len(), gpu.len(), "{case:?}");
        let db = case.contains(&"db");
        for (c, g) in cpu.iter().zip(gpu) {
            let bins = |r: &serde_json::Value| -> Vec<f64> {
                let v = r["bins"].as_array().expect("bins");
                v.iter()
                    .map(|b| b.as_f64().unwrap_or(f64::NAN))
                    .map(|b| if db { 10f64.powf(b / 10.0) } else { b })
                    .collect()
            };
            let (bc, bg) = (bins(c), bins(g));
            let peak = bc.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let worst = bc
                .iter()
                .zip(&bg)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(worst <= 1e-4 * peak, "{case:?}: {worst} of {peak}");
            for key in [
                "leq", "lfmax", "lfmin", "lsmax", "lsmin", "thd_db", "snr_db",
            ] {
                if let (Some(a), Some(b)) = (c[key].as_f64(), g[key].as_f64()) {
                    assert!((a - b).abs() < 1e-3, "{case:?} {key}: {a} vs {b}");
                }
            }
            for (pc, pg) in c["peaks"]
                .as_array()
                .into_iter()
                .flatten()
                .zip(g["peaks"].as_array().into_iter().flatten())
            {
                assert!(
                    (num(pc, "db") - num(pg, "db")).abs() < 1e-3,
                    "{case:?}: {pc} {pg}"
                );
                assert!(
                    (num(pc, "hz") - num(pg, "hz")).abs() < 1e-2,
                    "{case:?}: {pc} {pg}"
                );
            }
        }
    }
}

/// Runs fftd on raw f32 at 48 kHz read from stdin (`--file -`) with `args`.
fn run_stdin(samples: &[f64], args: &[&str]) -> std::process::Output {
    use std::io::Write;
    let mut child = fftd()
        .args(["--file", "-", "--input-format", "f32", "--rate", "48000"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("fftd runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let bytes = f32_bytes(samples);
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().expect("fftd ends");
    writer.join().expect("writer").expect("stdin written");
    out
}

/// Each row's values after the columns' (`bins`) in a written output of `format`.
fn measured_rows(format: &str, path: &Path, bins: usize) -> Vec<Vec<f64>> {
    let bytes = std::fs::read(path).expect("output");
    let floats = |b: &[u8]| -> Vec<f64> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect()
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let rows: Vec<Vec<f64>> = match format {
        "text" => parse_rows(&text),
        "csv" => text
            .lines()
            .skip(1)
            .map(|l| {
                let cells: Vec<&str> = l.split(',').collect();
                // stream, frame, time_s first; the unit's name last
                let values = &cells[3..cells.len() - 1];
                values
                    .iter()
                    .map(|v| v.parse().expect("a number"))
                    .collect()
            })
            .collect(),
        "ndjson" => text
            .lines()
            .map(|l| {
                let r: serde_json::Value = serde_json::from_str(l).expect("json");
                let mut v: Vec<f64> = r["bins"]
                    .as_array()
                    .expect("bins")
                    .iter()
                    .map(|b| b.as_f64().expect("bin"))
                    .collect();
                v.extend(LEVEL_KEYS.map(|k| num(&r, k)));
                for p in r["peaks"].as_array().expect("peaks") {
                    v.extend([num(p, "hz"), num(p, "db")]);
                }
                v.extend(DISTORTION_KEYS.map(|k| num(&r, k)));
                v
            })
            .collect(),
        "npy" => floats(&bytes[128..])
            .chunks(bins + 14)
            .map(<[f64]>::to_vec)
            .collect(),
        _ => floats(&bytes)
            .chunks(bins + 14)
            .map(<[f64]>::to_vec)
            .collect(),
    };
    rows
}

const LEVEL_KEYS: [&str; 5] = ["leq", "lfmax", "lfmin", "lsmax", "lsmin"];
const DISTORTION_KEYS: [&str; 5] = ["thd_db", "thdn_db", "sinad_db", "snr_db", "tone_hz"];

/// Every measurement at once (levels, two peaks, distortion; calibrated and A-weighted) gives the
/// same rows from a file and from stdin, in text, csv, ndjson, f32 and npy (f32 precision), and
/// `--meta` names the unit, the weighting, the calibration and the values after the columns.
#[test]
fn every_measurement_is_the_same_from_a_file_and_stdin_in_every_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut x = tones(&[(0.25, 1000.0), (0.0025, 2000.0), (0.001, 3000.0)], 1.0);
    for (v, n) in x.iter_mut().zip(noise(48_000, 5)) {
        *v += 1e-4 * n;
    }
    let input = write(dir.path(), "tone.f32", &x);
    let args = [
        "--frame",
        "4800",
        "--calibration",
        "94",
        "--weighting",
        "a",
        "--levels",
        "--peaks",
        "2",
        "--distortion",
        "--scale",
        "db",
        "--average",
        "250ms",
        "--fmax",
        "4000",
    ];
    let bins = 401; // 0 to 4000 Hz, 10 Hz apart
    let meta = dir.path().join("meta.json");
    let mut reference: Option<Vec<Vec<f64>>> = None;
    for format in ["ndjson", "text", "csv", "f32", "npy"] {
        for source in ["file", "stdin"] {
            let path = dir.path().join(format!("{source}.{format}"));
            let mut all = args.to_vec();
            all.extend(["--format", format, "--output", path.to_str().unwrap()]);
            if (format, source) == ("ndjson", "file") {
                all.extend(["--meta", meta.to_str().unwrap()]);
            }
            let out = match source {
                "file" => {
                    let mut with = vec!["--file", &input, "--input-format", "f32", "--rate"];
                    with.extend(["48000"]);
                    with.extend(&all);
                    run(&with)
                }
                _ => run_stdin(&x, &all),
            };
            assert!(
                out.status.success(),
                "{format} {source}: {}",
                stderr_text(&out)
            );
            let rows = measured_rows(format, &path, bins);
            let Some(want) = &reference else {
                reference = Some(rows);
                continue;
            };
            assert_eq!(rows.len(), want.len(), "{format} {source}");
            for (got, want) in rows.iter().zip(want) {
                assert_eq!(got.len(), bins + 14, "{format} {source}");
                for (i, (g, w)) in got.iter().zip(want).enumerate() {
                    assert!(
                        (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                        "{format} {source} value {i}: {g} vs {w}"
                    );
                }
            }
        }
    }
    let rows = reference.expect("rows");
    assert_eq!(rows.len(), 4);
    let want = 94.0 + 20.0 * 0.25f64.log10() + Weighting::A.db(1000.0);
    for row in &rows {
        let m = &row[bins..];
        assert!((m[0] - want).abs() < 0.1, "leq {} vs {want}", m[0]);
        assert!(
            (m[5] - 1000.0).abs() < 0.5 && (m[7] - 2000.0).abs() < 0.5,
            "peaks {:?}",
            &m[5..9]
        );
        // the 2nd harmonic at -40 dB and the 3rd at -48 dB re the tone, A-weighted as they are
        let h = |hz: f64, a: f64| {
            (a / 0.25).powi(2) * 10f64.powf((Weighting::A.db(hz) - Weighting::A.db(1000.0)) / 10.0)
        };
        let thd = 10.0 * (h(2000.0, 0.0025) + h(3000.0, 0.001)).log10();
        assert!((m[9] - thd).abs() < 0.1, "thd {} vs {thd}", m[9]);
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(doc["unit"], "dB SPL (A-weighted)");
    assert_eq!(doc["weighting"], "A");
    assert_eq!(doc["calibration_db"], 94.0);
    let names: Vec<&str> = doc["row_measurements"]
        .as_array()
        .expect("row_measurements")
        .iter()
        .map(|v| v.as_str().expect("a name"))
        .collect();
    assert_eq!(names[..5], LEVEL_KEYS);
    assert_eq!(
        names[5..9],
        ["peak1_hz", "peak1_db", "peak2_hz", "peak2_db"]
    );
    assert_eq!(names[9..], DISTORTION_KEYS);
}

/// `--levels --bands third-octave`: each band's Leq (ndjson `bands`, in the unit): a calibrated
/// tone's band reads its level, and the bands add up to the total Leq.
#[test]
fn band_leqs_read_a_tone_in_its_band_and_add_up_to_the_total() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write(dir.path(), "tone.f32", &tones(&[(0.25, 1000.0)], 1.0));
    let rows = ndjson(
        &input,
        &[
            "--frame",
            "4800",
            "--calibration",
            "94",
            "--levels",
            "--bands",
            "third-octave",
            "--average",
            "1s",
        ],
    );
    let row = &rows[0];
    let want = 94.0 + 20.0 * 0.25f64.log10();
    let bands: Vec<f64> = row["bands"]
        .as_array()
        .expect("bands")
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NEG_INFINITY))
        .collect();
    let loudest = bands.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert!(
        (loudest - want).abs() < 0.05,
        "{loudest} vs {want}: {bands:?}"
    );
    let sum: f64 = bands.iter().map(|db| 10f64.powf(db / 10.0)).sum();
    assert!((10.0 * sum.log10() - num(row, "leq")).abs() < 0.05, "{row}");
    assert!((num(row, "leq") - want).abs() < 0.05, "{row}");
}
