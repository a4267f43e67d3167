//! End-to-end tests of the `fftd` binary on the CPU engine: numerics through the whole pipeline,
//! every output format read back, stdin, several streams, WAV channels, limits, signals, closed
//! pipes and every bad input the README promises a clear error for.

use crate::common;

use common::*;
use fftd::fft::{naive_spectrum, Scale, TransformSpec};
use fftd::frame::{expected_frames, Tail};
use fftd::types::InputKind;
use fftd::window::WindowKind;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

/// Frames of `x` per the documented rule, zero-padded.
fn frames_of(x: &[f64], n: usize, hop: usize, tail: Tail) -> Vec<Vec<f64>> {
    let count = expected_frames(x.len() as u64, n as u64, hop as u64, tail) as usize;
    (0..count)
        .map(|i| {
            let mut f = vec![0.0; n];
            for (j, v) in f.iter_mut().enumerate() {
                if let Some(s) = x.get(i * hop + j) {
                    *v = *s;
                }
            }
            f
        })
        .collect()
}

fn spec(n: usize, window: WindowKind, scale: Scale, rate: f64) -> TransformSpec {
    TransformSpec {
        n,
        kind: InputKind::Real,
        window,
        scale,
        rate,
    }
}

#[test]
fn text_input_matches_naive_dft_for_frame_hop_and_tail_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("input.txt");
    let x = noise(1000, 3);
    write_text_samples(&path, &x);
    let p = path.to_str().expect("utf8");
    for (n, hop, tail) in [
        (64, 64, Tail::Pad),
        (100, 30, Tail::Pad),
        (100, 30, Tail::Drop),
        (7, 11, Tail::Pad),
        (1024, 1024, Tail::Pad),
    ] {
        let (ns, hs) = (n.to_string(), hop.to_string());
        let tail_name = if tail == Tail::Pad { "pad" } else { "drop" };
        let out = run(&[
            "--file",
            p,
            "--frame",
            &ns,
            "--hop",
            &hs,
            "--tail",
            tail_name,
            "--precision",
            "f64",
        ]);
        assert!(out.status.success(), "{}", stderr_text(&out));
        let rows = parse_rows(&stdout_text(&out));
        let want = frames_of(&x, n, hop, tail);
        assert_eq!(
            rows.len(),
            want.len(),
            "frame count for N={n} H={hop} {tail:?}"
        );
        let s = spec(n, WindowKind::Hann, Scale::Magnitude, 1.0);
        for (got, frame) in rows.iter().zip(&want) {
            assert!(max_relative_error(got, &naive_spectrum(&s, frame)) < 1e-10);
        }
    }
}

#[test]
fn whole_frame_pads_to_power_of_two_with_rect_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("input.txt");
    let x = noise(1500, 5);
    write_text_samples(&path, &x);
    let out = run(&[
        "--file",
        path.to_str().expect("utf8"),
        "--frame",
        "whole",
        "--precision",
        "f64",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let rows = parse_rows(&stdout_text(&out));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].len(), 2048 / 2 + 1);
    let mut frame = x.clone();
    frame.resize(2048, 0.0);
    let want = naive_spectrum(&spec(2048, WindowKind::Rect, Scale::Magnitude, 1.0), &frame);
    assert!(max_relative_error(&rows[0], &want) < 1e-10);
    // a window or a window-sum scale would count the padding (helper-38): refused
    let input = path.to_str().expect("utf8");
    for (flag, value) in [
        ("--window", "hann"),
        ("--scale", "density"),
        ("--scale", "spectrum"),
    ] {
        let out = run(&["--file", input, "--frame", "whole", flag, value]);
        assert_clean_error(&out, 2, &[flag, value, "zero-pads"]);
    }
}

/// A piped raw input that ends inside a sample keeps every whole frame before the cut, as one
/// with a NaN there does (helper-42: the cut lost the whole block read with it, up to 1 MiB).
#[test]
fn a_piped_input_cut_inside_a_sample_keeps_its_whole_frames() {
    let samples: Vec<f32> = (0..300_000)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let mut bytes: Vec<u8> = samples.iter().flat_map(|v| v.to_le_bytes()).collect();
    bytes.push(b'x');
    let args = [
        "--file",
        "-",
        "--input-format",
        "f32",
        "--frame",
        "16",
        "--format",
        "f32",
    ];
    let runs: Vec<_> = [&bytes[..bytes.len() - 1], &bytes[..]]
        .map(|input| run_with_stdin(&args, input.to_vec()))
        .into();
    assert!(runs[0].status.success(), "{:?}", runs[0]);
    assert_clean_error(&runs[1], 1, &["-: truncated", "offset 1200000"]);
    assert_eq!(runs[1].stdout.len(), 300_000 / 16 * 9 * 4);
    assert!(runs[1].stdout == runs[0].stdout, "the same rows");
}

/// `--frame whole` into one csv: raw files whose whole frames differ are refused before the
/// output is touched (a file already there is left as it was); equal frames share the header.
#[test]
fn whole_frames_of_different_sizes_into_one_csv_are_refused_at_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (
        dir.path().join("a.f32"),
        dir.path().join("b.f32"),
        dir.path().join("c.f32"),
    );
    write_f32(&a, &noise(1000, 1));
    write_f32(&b, &noise(1500, 2));
    write_f32(&c, &noise(1020, 3));
    let csv = dir.path().join("out.csv");
    std::fs::write(&csv, "kept\n").expect("write");
    let run_into = |second: &Path| {
        run(&[
            "--file",
            a.to_str().expect("utf8"),
            "--file",
            second.to_str().expect("utf8"),
            "--rate",
            "8000",
            "--frame",
            "whole",
            "--format",
            "csv",
            "--output",
            csv.to_str().expect("utf8"),
        ])
    };
    let out = run_into(&b);
    assert_clean_error(
        &out,
        2,
        &["--frame whole", "a.f32", "b.f32", "--output-dir"],
    );
    assert_eq!(std::fs::read_to_string(&csv).expect("read"), "kept\n");
    let out = run_into(&c);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let text = std::fs::read_to_string(&csv).expect("read");
    assert_eq!(text.lines().count(), 3, "a header and one row per input");
}

/// Text holds shortest round-trip decimals of f32 values: parse back to f32 for exact comparison.
fn as_f32(values: &[f64]) -> Vec<f32> {
    values.iter().map(|v| *v as f32).collect()
}

/// Every format carries the same f32 values as the text output.
#[test]
fn every_output_format_reads_back_to_the_same_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    let x = noise(5000, 9);
    let bytes: Vec<u8> = x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    std::fs::write(&input, bytes).expect("write");
    let inp = input.to_str().expect("utf8");
    let base = [
        "--file", inp, "--frame", "256", "--hop", "128", "--rate", "8000",
    ];
    let text = run(&[&base[..], &["--format", "text"]].concat());
    assert!(text.status.success(), "{}", stderr_text(&text));
    let want = parse_rows(&stdout_text(&text));
    let frames = expected_frames(5000, 256, 128, Tail::Pad) as usize;
    assert_eq!(want.len(), frames);
    let bins = 129;

    // csv: header of frequencies, then stream,frame,time_s,values
    let csv = run(&[&base[..], &["--format", "csv"]].concat());
    let csv_text = stdout_text(&csv);
    let mut lines = csv_text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(&header[..3], &["stream", "frame", "time_s"]);
    assert_eq!(header.len(), 3 + bins);
    assert_eq!(header[4].parse::<f64>().expect("hz"), 8000.0 / 256.0);
    for (i, line) in lines.enumerate() {
        let cells: Vec<f64> = line
            .split(',')
            .map(|c| c.parse().expect("number"))
            .collect();
        assert_eq!(cells[0], 0.0);
        assert_eq!(cells[1], i as f64);
        assert_eq!(cells[2], (i * 128) as f64 / 8000.0);
        assert!(
            cells[3..] == want[i][..],
            "csv row {i} differs from text output"
        );
    }

    // ndjson
    let nd = run(&[&base[..], &["--format", "ndjson"]].concat());
    let nd_text = stdout_text(&nd);
    assert_eq!(nd_text.lines().count(), frames);
    for (i, line) in nd_text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        assert_eq!(v["stream"], 0);
        assert_eq!(v["frame"], i as u64);
        let got: Vec<f64> = v["bins"]
            .as_array()
            .expect("bins")
            .iter()
            .map(|b| b.as_f64().expect("f64"))
            .collect();
        assert!(got == want[i], "ndjson row {i} differs from text output");
    }

    // raw f32: exactly frames*bins little-endian floats
    let raw = run(&[&base[..], &["--format", "f32"]].concat());
    assert_eq!(raw.stdout.len(), frames * bins * 4);
    let vals: Vec<f32> = raw
        .stdout
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert!(
        vals == as_f32(&want.concat()),
        "f32 output differs from text output"
    );

    // npy: parse the header and data
    let npy_path = dir.path().join("out.npy");
    let npy = run(&[
        &base[..],
        &[
            "--format",
            "npy",
            "--output",
            npy_path.to_str().expect("utf8"),
        ],
    ]
    .concat());
    assert!(npy.status.success(), "{}", stderr_text(&npy));
    let bytes = std::fs::read(&npy_path).expect("npy");
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).expect("header");
    assert!(header.contains("'descr': '<f4'"), "{header}");
    assert!(
        header.contains(&format!("'shape': ({frames}, {bins})")),
        "{header}"
    );
    assert_eq!((10 + header_len) % 64, 0);
    let data: Vec<f32> = bytes[10 + header_len..]
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert!(
        data == as_f32(&want.concat()),
        "npy data differs from text output"
    );
}

/// numpy itself reads the .npy and agrees with np.abs(np.fft.rfft(w*x)). Needs python3 with numpy
/// and scipy; CI sets FFTD_REQUIRE_NUMPY=1 so a missing numpy fails there instead of skipping.
#[test]
fn numpy_reads_npy_and_agrees_with_rfft() {
    let python = std::env::var("FFTD_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_numpy = std::process::Command::new(&python)
        .args(["-c", "import numpy, scipy.signal"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numpy {
        assert!(
            std::env::var("FFTD_REQUIRE_NUMPY").is_err(),
            "FFTD_REQUIRE_NUMPY set but {python} lacks numpy/scipy"
        );
        eprintln!("skipping: {python} has no numpy/scipy");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    let x = noise(10_000, 11);
    let bytes: Vec<u8> = x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    std::fs::write(&input, bytes).expect("write");
    for (window, scipy_name, scale) in [
        ("hann", "hann", "magnitude"),
        ("blackman-harris", "blackmanharris", "magnitude"),
        ("flattop", "flattop", "spectrum"),
        ("hamming", "hamming", "density"),
    ] {
        let out = dir.path().join(format!("{window}.npy"));
        let r = run(&[
            "--file",
            input.to_str().expect("utf8"),
            "--frame",
            "1000",
            "--hop",
            "250",
            "--rate",
            "500",
            "--window",
            window,
            "--scale",
            scale,
            "--format",
            "npy",
            "--output",
            out.to_str().expect("utf8"),
        ]);
        assert!(r.status.success(), "{}", stderr_text(&r));
        let script = format!(
            r#"
import numpy as np, math, sys
from scipy.signal import get_window, periodogram
a = np.load(r"{out}")
x = np.fromfile(r"{inp}", "<f4").astype(np.float64)
n, h, fs = 1000, 250, 500.0
w = get_window("{scipy_name}", n)
rows = []
for i in range(math.ceil((len(x) - n) / h) + 1):
    f = np.zeros(n); seg = x[i*h:i*h+n]; f[:len(seg)] = seg
    if "{scale}" == "magnitude":
        rows.append(np.abs(np.fft.rfft(w * f)))
    else:
        rows.append(periodogram(f, fs=fs, window=w, detrend=False, scaling="{scale}")[1])
ref = np.array(rows)
assert a.shape == ref.shape, (a.shape, ref.shape)
err = np.max(np.abs(a - ref) / ref.max(axis=1, keepdims=True))
assert err < 1e-5, err
print("ok", err)
"#,
            out = out.display(),
            inp = input.display()
        );
        let _ = run_python(&script, &[], &format!("{window}/{scale}"));
    }
}

#[test]
fn stdin_gives_the_same_output_as_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("input.txt");
    let x = noise(3000, 4);
    write_text_samples(&path, &x);
    let from_file = run(&["--file", path.to_str().expect("utf8"), "--frame", "128"]);
    let mut child = fftd()
        .args(["--file", "-", "--frame", "128", "--device", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let text = std::fs::read(&path).expect("read");
    let mut stdin = child.stdin.take().expect("stdin");
    std::thread::spawn(move || {
        let _ = stdin.write_all(&text);
    });
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    assert_eq!(out.stdout, from_file.stdout);
    assert!(!from_file.stdout.is_empty());
}

#[test]
fn several_streams_stay_in_order_and_split_per_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.txt");
    let b = dir.path().join("b.txt");
    write_text_samples(&a, &noise(64 * 50, 1));
    write_text_samples(&b, &noise(64 * 30 + 5, 2));
    let (pa, pb) = (a.to_str().expect("utf8"), b.to_str().expect("utf8"));
    // ndjson to stdout: each stream's frames in order, all present
    let out = run(&[
        "--file",
        pa,
        "--file",
        pb,
        "--frame",
        "64",
        "--format",
        "ndjson",
        "--batch",
        "7",
        "--workers",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let mut next = [0u64, 0u64];
    for line in stdout_text(&out).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        let s = v["stream"].as_u64().expect("stream") as usize;
        assert_eq!(
            v["frame"].as_u64(),
            Some(next[s]),
            "stream {s} out of order"
        );
        next[s] += 1;
    }
    assert_eq!(next, [50, 31]);
    // --output-dir: one file per stream, identical to running each alone
    let outdir = dir.path().join("out");
    std::fs::create_dir(&outdir).expect("mkdir");
    let r = run(&[
        "--file",
        pa,
        "--file",
        pb,
        "--frame",
        "64",
        "--output-dir",
        outdir.to_str().expect("utf8"),
    ]);
    assert!(r.status.success(), "{}", stderr_text(&r));
    for (input, name) in [(pa, "a.txt"), (pb, "b.txt")] {
        let alone = run(&["--file", input, "--frame", "64"]);
        let written = std::fs::read(outdir.join(name)).expect("per-stream file");
        assert_eq!(written, alone.stdout, "{name}");
    }
    // text to stdout with several streams is a usage error
    let bad = run(&["--file", pa, "--file", pb]);
    assert_clean_error(&bad, 2, &["--output-dir"]);
}

fn write_wav(path: &Path, channels: u16, bits: u16, float: bool, frames: &[Vec<f64>]) {
    let spec = hound::WavSpec {
        channels,
        sample_rate: 8000,
        bits_per_sample: bits,
        sample_format: if float {
            hound::SampleFormat::Float
        } else {
            hound::SampleFormat::Int
        },
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav");
    for frame in frames {
        for v in frame {
            if float {
                w.write_sample(*v as f32).expect("sample");
            } else {
                let full = (1i64 << (bits - 1)) as f64;
                w.write_sample((v * full).round().clamp(-full, full - 1.0) as i32)
                    .expect("sample");
            }
        }
    }
    w.finalize().expect("finalize");
}

#[test]
fn wav_channels_mix_pick_and_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("st.wav");
    // left: 1000 Hz, right: 2000 Hz at 8 kHz; frame 64 → bins 8 and 16
    let frames: Vec<Vec<f64>> = (0..640)
        .map(|j| {
            let t = j as f64 / 8000.0;
            vec![
                0.5 * (2.0 * std::f64::consts::PI * 1000.0 * t).sin(),
                0.5 * (2.0 * std::f64::consts::PI * 2000.0 * t).sin(),
            ]
        })
        .collect();
    write_wav(&path, 2, 16, false, &frames);
    let p = path.to_str().expect("utf8");
    let peak = |row: &Vec<f64>| {
        row.iter()
            .enumerate()
            .fold((0, 0.0), |b, (k, v)| if *v > b.1 { (k, *v) } else { b })
            .0
    };
    let ch1 = run(&["--file", p, "--frame", "64", "--channel", "1"]);
    assert!(ch1.status.success(), "{}", stderr_text(&ch1));
    assert!(parse_rows(&stdout_text(&ch1)).iter().all(|r| peak(r) == 16));
    let csv = run(&[
        "--file",
        p,
        "--frame",
        "64",
        "--channel",
        "all",
        "--format",
        "csv",
    ]);
    let text = stdout_text(&csv);
    let header = text.lines().next().expect("header");
    assert!(
        header.contains(",1000.0,"),
        "rate from the WAV header: {header}"
    );
    for line in text.lines().skip(1) {
        let cells: Vec<f64> = line
            .split(',')
            .map(|c| c.parse().expect("number"))
            .collect();
        let want = if cells[0] == 0.0 { 8 } else { 16 };
        assert_eq!(peak(&cells[3..].to_vec()), want);
    }
    let mix = run(&["--file", p, "--frame", "64"]);
    let row = &parse_rows(&stdout_text(&mix))[0];
    assert!(row[8] > 1.0 && row[16] > 1.0 && (row[8] / row[16] - 1.0).abs() < 0.01);
    let bad = run(&["--file", p, "--channel", "2"]);
    assert_clean_error(&bad, 2, &["2 channels"]);
    // every supported encoding decodes to the same spectrum within its quantisation
    let reference = parse_rows(&stdout_text(&ch1));
    for (bits, float) in [(8, false), (24, false), (32, false), (32, true)] {
        let path = dir.path().join(format!("w{bits}{float}.wav"));
        write_wav(&path, 2, bits, float, &frames);
        let out = run(&[
            "--file",
            path.to_str().expect("utf8"),
            "--frame",
            "64",
            "--channel",
            "1",
        ]);
        assert!(
            out.status.success(),
            "{bits} {float}: {}",
            stderr_text(&out)
        );
        let rows = parse_rows(&stdout_text(&out));
        let tol = if bits == 8 { 2e-2 } else { 1e-4 };
        for (g, w) in rows.iter().zip(&reference) {
            assert!(max_relative_error(g, w) < tol, "{bits}-bit float={float}");
        }
    }
}

#[test]
fn complex_input_gives_n_bins_and_fftshift_centres_dc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("iq.cf32");
    // complex exponential at bin -3 of 16 (i.e. bin 13 in FFT order)
    let n = 16;
    let bytes: Vec<u8> = (0..n)
        .flat_map(|j| {
            let a = -2.0 * std::f64::consts::PI * 3.0 * j as f64 / n as f64;
            [
                (a.cos() as f32).to_le_bytes(),
                (a.sin() as f32).to_le_bytes(),
            ]
            .concat()
        })
        .collect();
    std::fs::write(&path, bytes).expect("write");
    let p = path.to_str().expect("utf8");
    let plain = parse_rows(&stdout_text(&run(&[
        "--file", p, "--frame", "16", "--window", "rect",
    ])));
    assert_eq!(plain[0].len(), 16);
    assert!((plain[0][13] - 16.0).abs() < 1e-4);
    let shifted = parse_rows(&stdout_text(&run(&[
        "--file",
        p,
        "--frame",
        "16",
        "--window",
        "rect",
        "--fftshift",
    ])));
    // shifted order: -8..7, so bin -3 is at index 5
    assert!((shifted[0][5] - 16.0).abs() < 1e-4);
    let csv = stdout_text(&run(&[
        "--file",
        p,
        "--frame",
        "16",
        "--fftshift",
        "--format",
        "csv",
        "--rate",
        "16",
    ]));
    assert!(csv.starts_with("stream,frame,time_s,-8.0,-7.0"), "{csv}");
    // text with two numbers per line is complex too
    let txt = dir.path().join("iq.txt");
    let lines: String = (0..n)
        .map(|j| {
            let a = -2.0 * std::f64::consts::PI * 3.0 * j as f64 / n as f64;
            format!("{} {}\n", a.cos(), a.sin())
        })
        .collect();
    std::fs::write(&txt, lines).expect("write");
    let t = parse_rows(&stdout_text(&run(&[
        "--file",
        txt.to_str().expect("utf8"),
        "--frame",
        "16",
        "--window",
        "rect",
    ])));
    assert!((t[0][13] - 16.0).abs() < 1e-4);
}

#[test]
fn max_frames_and_duration_stop_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.txt");
    write_text_samples(&path, &noise(10_000, 8));
    let p = path.to_str().expect("utf8");
    let out = run(&["--file", p, "--frame", "100", "--max-frames", "7"]);
    assert_eq!(parse_rows(&stdout_text(&out)).len(), 7);
    // 2.5 s at 100 Hz = 250 samples → frames of 100: pad gives ceil(150/100)+1 = 3
    let out = run(&[
        "--file",
        p,
        "--frame",
        "100",
        "--rate",
        "100",
        "--duration",
        "2.5",
    ]);
    assert_eq!(parse_rows(&stdout_text(&out)).len(), 3);
}

#[test]
fn stats_and_meta_report_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.txt");
    write_text_samples(&path, &noise(1000, 8));
    let meta = dir.path().join("m.json");
    let out = run(&[
        "--file",
        path.to_str().expect("utf8"),
        "--frame",
        "100",
        "--hop",
        "50",
        "--rate",
        "1000",
        "--stats",
        "--meta",
        meta.to_str().expect("utf8"),
    ]);
    assert!(out.status.success());
    let err = stderr_text(&out);
    assert!(
        err.contains("frames in 19, frames out 19, dropped 0"),
        "{err}"
    );
    assert!(err.contains("p99"), "{err}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(m["rate"], 1000.0);
    assert_eq!(m["frame"], 100);
    assert_eq!(m["hop"], 50);
    assert_eq!(m["bins"], 51);
    assert_eq!(m["hz_per_bin"], 10.0);
    assert_eq!(m["window"], "hann");
    assert_eq!(m["scale"], "magnitude");
    assert_eq!(m["inputs"][0]["frames"], 19);
    assert_eq!(m["interrupted"], false);
}

#[test]
fn closed_stdout_ends_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.f32");
    let bytes: Vec<u8> = noise(1 << 20, 1)
        .iter()
        .flat_map(|v| (*v as f32).to_le_bytes())
        .collect();
    std::fs::write(&path, bytes).expect("write");
    let meta = dir.path().join("meta.json");
    let script = format!(
        "set -o pipefail; '{}' --file '{}' --frame 64 --meta '{}' 2>'{}' | head -n1 >/dev/null",
        env!("CARGO_BIN_EXE_fftd"),
        path.display(),
        meta.display(),
        dir.path().join("err").display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash");
    let err = std::fs::read_to_string(dir.path().join("err")).expect("stderr file");
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {err}",
        out.status.code()
    );
    assert!(err.is_empty(), "stderr: {err}");
    // the rows stopped short of the input's end, and the sidecar says so (helper-39)
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(doc["interrupted"], true, "{doc}");
    assert!(doc["error"].is_null(), "{doc}");
}

#[test]
fn sigint_drains_queued_frames_and_exits_zero() {
    // stdin stays open: fftd has read 10 frames' worth and waits for more when SIGINT arrives
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("run.json");
    let mut child = fftd()
        .args([
            "--file", "-", "--frame", "10", "--window", "rect", "--stats", "--meta",
        ])
        .arg(&meta)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let samples: String = (0..105).map(|i| format!("{}\n", i % 7)).collect();
    stdin.write_all(samples.as_bytes()).expect("write");
    stdin.flush().expect("flush");
    // the 10 whole frames are written (and flushed, the sink being idle) while stdin stays open:
    // reading them proves fftd is running with its signal handlers in place
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    for _ in 0..10 {
        std::io::BufRead::read_line(&mut stdout, &mut first).expect("a frame");
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("rest of stdout");
    let out = child.wait_with_output().expect("wait");
    drop(stdin);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // the 10 whole frames; the 5 samples after them are no tail (the input did not end) and
    // make no padded frame
    assert_eq!(parse_rows(&(first + &rest)).len(), 10, "{err}");
    assert!(err.contains("frames in 10, frames out 10"), "{err}");
    assert!(
        err.contains("samples read 105, samples analysed 100"),
        "{err}"
    );
    // the sidecar says the rows stop early
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(doc["interrupted"], true, "{doc}");
    assert!(doc["error"].is_null(), "{doc}");
}

#[test]
fn write_errors_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.txt");
    write_text_samples(&path, &noise(100_000, 8));
    let out = run(&[
        "--file",
        path.to_str().expect("utf8"),
        "--frame",
        "64",
        "--output",
        "/dev/full",
    ]);
    assert_clean_error(&out, 1, &["/dev/full", "No space left"]);
    // a stdout opened read-only (`1<file`): every write fails with EBADF, which std's own
    // stdout takes as done (helper-39: exit 0, the rows lost)
    let other = dir.path().join("other.txt");
    std::fs::write(&other, "kept\n").expect("write");
    let out = fftd()
        .args(["--file", path.to_str().expect("utf8"), "--frame", "64"])
        .stdout(std::fs::File::open(&other).expect("open"))
        .output()
        .expect("run fftd");
    assert_clean_error(&out, 1, &["stdout", "Bad file descriptor"]);
    assert_eq!(std::fs::read_to_string(&other).expect("read"), "kept\n");
}

#[test]
fn bad_inputs_get_one_clear_line_and_the_right_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let p = |name: &str| d.join(name).to_str().expect("utf8").to_string();
    std::fs::write(d.join("empty.txt"), "").expect("write");
    std::fs::write(d.join("comments.txt"), "# only\n\n# comments\n").expect("write");
    std::fs::write(d.join("bad.txt"), "1\n2\n# c\n3.5\nfoo\n").expect("write");
    std::fs::write(d.join("nan.txt"), "1\n2\nNaN\n").expect("write");
    std::fs::write(d.join("inf.txt"), "1\ninf\n").expect("write");
    std::fs::write(d.join("three.txt"), "1 2 3\n").expect("write");
    std::fs::write(d.join("mixed.txt"), "1 2\n3\n").expect("write");
    std::fs::write(d.join("good.txt"), "1\n2\n3\n4\n").expect("write");
    std::fs::create_dir(d.join("dir")).expect("mkdir");
    // a valid WAV, then cut inside its data and inside its header, and a corrupt one
    write_wav(&d.join("ok.wav"), 1, 16, false, &vec![vec![0.25]; 1000]);
    let wav = std::fs::read(d.join("ok.wav")).expect("wav");
    std::fs::write(d.join("cut.wav"), &wav[..wav.len() - 501]).expect("write");
    std::fs::write(d.join("header.wav"), &wav[..20]).expect("write");
    let mut corrupt = wav.clone();
    corrupt[8..12].copy_from_slice(b"JUNK");
    std::fs::write(d.join("corrupt.wav"), corrupt).expect("write");
    // 64-bit float WAV (hound cannot write one): ok.wav's header, relabelled, with f64 data
    let mut f64wav = wav[..36].to_vec();
    f64wav[20..22].copy_from_slice(&3u16.to_le_bytes());
    f64wav[34..36].copy_from_slice(&64u16.to_le_bytes());
    f64wav[32..34].copy_from_slice(&8u16.to_le_bytes());
    f64wav[28..32].copy_from_slice(&(8000u32 * 8).to_le_bytes());
    f64wav.extend(b"data");
    f64wav.extend(8000u32.to_le_bytes());
    f64wav.extend((0..1000).flat_map(|_| 0.25f64.to_le_bytes()));
    std::fs::write(d.join("f64.wav"), f64wav).expect("write");
    std::fs::write(d.join("notwav.wav"), "1\n2\n3\n").expect("write");
    std::fs::write(d.join("tiny.wav"), "RI").expect("write");
    std::fs::write(d.join("cut.bin"), &wav[..10]).expect("write");
    std::fs::write(d.join("cut.aiff"), b"FORM1234").expect("write");
    std::fs::write(d.join("odd.f32"), [0u8; 6]).expect("write");
    // raw f32 with one NaN in its second read block and one inf in its first
    let raw_with = |at: usize, v: f32| -> Vec<u8> {
        (0..40_000)
            .flat_map(|i| if i == at { v } else { 0.5f32 }.to_le_bytes())
            .collect()
    };
    std::fs::write(d.join("nan.f32"), raw_with(20_000, f32::NAN)).expect("write");
    std::fs::write(d.join("inf.f32"), raw_with(3, f32::INFINITY)).expect("write");
    std::fs::write(d.join("badkey.toml"), "frame = 64\nwindoww = \"hann\"\n").expect("write");
    std::fs::write(d.join("badtype.toml"), "frame = 64\nhop = \"lots\"\n").expect("write");
    std::fs::write(d.join("range.toml"), "frame = 64\n\nhop = 0\n").expect("write");
    // keys found wrong only once the inputs are open (their frame, their channels)
    std::fs::write(d.join("bands.toml"), "frame = 64\nbands = \"mel:1000\"\n").expect("write");
    std::fs::write(d.join("channel.toml"), "\nchannel = 5\n").expect("write");
    std::fs::write(
        d.join("dirkey.toml"),
        format!("output-dir = {:?}\n", p("dir")),
    )
    .expect("write");

    // (arguments, exit code, what the one stderr line must name)
    let expect =
        |args: &[&str], code: i32, needles: &[&str]| assert_clean_error(&run(args), code, needles);
    expect(
        &["--file", &p("missing.txt")],
        1,
        &["missing.txt", "No such file"],
    );
    expect(&["--file", &p("dir")], 1, &["is a directory"]);
    expect(&["--file", &p("empty.txt")], 1, &["empty.txt", "empty"]);
    expect(&["--file", &p("comments.txt")], 1, &["no samples"]);
    expect(
        &["--file", &p("bad.txt")],
        1,
        &["bad.txt", "line 5", "'foo'"],
    );
    expect(&["--file", &p("nan.txt")], 1, &["line 3", "NaN"]);
    expect(&["--file", &p("inf.txt")], 1, &["line 2", "inf"]);
    expect(&["--file", &p("three.txt")], 1, &["line 1"]);
    expect(&["--file", &p("mixed.txt")], 1, &["line 2", "two numbers"]);
    expect(
        &["--file", &p("header.wav")],
        1,
        &[
            "header.wav",
            "truncated WAV file: it ends inside the header",
            "'fmt '",
        ],
    );
    expect(
        &["--file", &p("corrupt.wav")],
        1,
        &["corrupt.wav", "no RIFF/WAVE header", "'JUNK'"],
    );
    expect(
        &["--file", &p("notwav.wav")],
        1,
        &["notwav.wav", "no RIFF/WAVE header", "not a WAV file"],
    );
    expect(&["--file", &p("tiny.wav")], 1, &["no RIFF/WAVE header"]);
    // a file of no known extension cut inside the RIFF magic is a WAV cut short, not text
    expect(
        &["--file", &p("cut.bin")],
        1,
        &["cut.bin", "truncated WAV file", "RIFF preamble"],
    );
    // and an AIFF cut inside its magic (helper-51: "its content matches none of them")
    expect(
        &["--file", &p("cut.aiff")],
        1,
        &["cut.aiff", "begins as aiff", "truncated or damaged"],
    );
    expect(&["--file", &p("odd.f32")], 1, &["truncated", "offset 4"]);
    expect(
        &["--file", &p("nan.f32"), "--rate", "8000"],
        1,
        &["nan.f32", "byte offset 80000", "NaN"],
    );
    expect(
        &["--file", &p("inf.f32"), "--rate", "8000"],
        1,
        &["byte offset 12", "inf"],
    );
    expect(&["--file", &p("good.txt"), "--frame", "0"], 2, &["--frame"]);
    expect(
        &["--file", &p("good.txt"), "--frame", "1"],
        2,
        &["at least 2"],
    );
    expect(&["--file", &p("good.txt"), "--hop", "0"], 2, &["--hop"]);
    expect(
        &["--file", &p("good.txt"), "--frame", "1000000000000000"],
        2,
        &["--frame", "at most 67108864"],
    );
    expect(
        &["--file", &p("good.txt"), "--window", "kaiser"],
        2,
        &["kaiser", "hann"],
    );
    expect(&["--file", &p("good.txt"), "--format", "xml"], 2, &["xml"]);
    expect(&["--file", &p("good.txt"), "--scale", "loud"], 2, &["loud"]);
    expect(
        &["--file", &p("good.txt"), "--format", "npy"],
        2,
        &["npy", "stdout"],
    );
    expect(
        &["--file", &p("good.txt"), "--output", &p("nodir/out.txt")],
        2,
        &["--output", "no such directory", "nodir"],
    );
    expect(
        &["--file", &p("good.txt"), "--config", &p("badkey.toml")],
        2,
        &["windoww", "badkey.toml:2"],
    );
    expect(
        &["--file", &p("good.txt"), "--config", &p("badtype.toml")],
        2,
        &["hop", "badtype.toml:2"],
    );
    expect(
        &["--file", &p("good.txt"), "--config", &p("none.toml")],
        2,
        &["none.toml"],
    );
    // a value found wrong once the file meets the flags: the file and line, in the file's words
    expect(
        &["--file", &p("good.txt"), "--config", &p("range.toml")],
        2,
        &["range.toml:3: hop = 0: must be a whole number"],
    );
    expect(
        &[
            "check",
            "--file",
            &p("good.txt"),
            "--config",
            &p("range.toml"),
        ],
        2,
        &["range.toml:3: hop = 0"],
    );
    expect(
        &[
            "--file",
            &p("good.txt"),
            "--config",
            &p("dirkey.toml"),
            "--output",
            &p("o.txt"),
        ],
        2,
        &["--output-dir", "(output-dir is set in", "dirkey.toml:1)"],
    );
    // and where the inputs must be open to judge them (helper-34: they named only the flag)
    expect(
        &["--file", &p("good.txt"), "--config", &p("bands.toml")],
        2,
        &["bands.toml:2: bands = mel:1000: more bands (1000)"],
    );
    expect(
        &["--file", &p("good.txt"), "--config", &p("channel.toml")],
        2,
        &["channel", "channel.toml:2"],
    );
    // the flag's value, not the file's, is the one judged and named
    expect(
        &[
            "--file",
            &p("good.txt"),
            "--config",
            &p("range.toml"),
            "--hop",
            "-1",
        ],
        2,
        &["--hop"],
    );
    let ok = run(&[
        "--file",
        &p("good.txt"),
        "--config",
        &p("range.toml"),
        "--hop",
        "2",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    expect(&[], 2, &["no input"]);
    // check reads files only: its message does not offer the microphone
    let check = run(&["check"]);
    assert_clean_error(&check, 2, &["no input to check", "--file PATH"]);
    assert!(
        !stderr_text(&check).contains("--mic"),
        "{}",
        stderr_text(&check)
    );
}

/// Runs fftd (CPU engine) with `args` and `input` on stdin.
fn run_with_stdin(args: &[&str], input: Vec<u8>) -> std::process::Output {
    let mut child = fftd()
        .args(args)
        .args(["--device", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    child.wait_with_output().expect("wait")
}

#[test]
fn wav_cut_short_is_analysed_with_one_warning_and_f64_decodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let p = |name: &str| d.join(name).to_str().expect("utf8").to_string();
    write_wav(&d.join("ok.wav"), 1, 16, false, &vec![vec![0.25]; 1000]);
    let wav = std::fs::read(d.join("ok.wav")).expect("wav");
    // 1000 samples promised; 1499 data bytes left: 749 whole samples and half of one
    std::fs::write(d.join("cut.wav"), &wav[..wav.len() - 501]).expect("write");
    write_text_samples(&d.join("749.txt"), &[0.25; 749]);
    let want = run(&["--file", &p("749.txt"), "--frame", "64"]);
    assert!(want.status.success() && !want.stdout.is_empty());
    // with the tests' RUST_LOG=fftd=warn and with RUST_LOG unset (main's default, info)
    for unset in [false, true] {
        let mut cmd = fftd();
        if unset {
            cmd.env_remove("RUST_LOG");
        }
        let out = cmd
            .args(["--file", &p("cut.wav"), "--frame", "64", "--device", "cpu"])
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        let err = stderr_text(&out);
        assert!(out.status.success(), "exit code: {err}");
        assert_eq!(out.stdout, want.stdout, "the 749 samples present");
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains("WARN")).collect();
        assert_eq!(
            warnings.len(),
            1,
            "one warning (RUST_LOG unset: {unset}): {err}"
        );
        assert!(
            warnings[0].contains("cut.wav: WAV data ends early: 251 of 1000 samples missing; analysed the 749 present"),
            "{err}"
        );
        if !unset {
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    // 64-bit float samples (0.25 each) decode to what the 16-bit file holds
    let mut f64wav = wav[..36].to_vec();
    f64wav[20..22].copy_from_slice(&3u16.to_le_bytes());
    f64wav[34..36].copy_from_slice(&64u16.to_le_bytes());
    f64wav.extend(b"data");
    f64wav.extend(8000u32.to_le_bytes());
    f64wav.extend((0..1000).flat_map(|_| 0.25f64.to_le_bytes()));
    std::fs::write(d.join("f64.wav"), f64wav).expect("write");
    let f64_out = run(&["--file", &p("f64.wav"), "--frame", "64"]);
    let ok_out = run(&["--file", &p("ok.wav"), "--frame", "64"]);
    assert_silent_success(&f64_out);
    assert_eq!(f64_out.stdout, ok_out.stdout);
}

#[test]
fn wav_piped_with_unknown_sizes_gives_the_same_spectra_as_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("st.wav");
    let x = noise(2 * 3000, 9);
    let frames: Vec<Vec<f64>> = x.chunks(2).map(|f| f.to_vec()).collect();
    write_wav(&path, 2, 16, false, &frames);
    let args = ["--frame", "256", "--hop", "100"];
    let from_file = run(&[&["--file", path.to_str().expect("utf8")][..], &args].concat());
    assert!(from_file.status.success() && !from_file.stdout.is_empty());
    let wav = std::fs::read(&path).expect("read");
    assert_eq!(&wav[36..40], b"data", "hound's 44-byte header");
    // what arecord and ffmpeg write into a pipe (0xFFFFFFFF), and the zeros others write
    for unknown in [u32::MAX, 0] {
        let mut piped = wav.clone();
        piped[4..8].copy_from_slice(&unknown.to_le_bytes());
        piped[40..44].copy_from_slice(&unknown.to_le_bytes());
        let out = run_with_stdin(
            &[&["--file", "-", "--input-format", "wav"][..], &args].concat(),
            piped,
        );
        assert_silent_success(&out);
        assert_eq!(out.stdout, from_file.stdout, "sizes {unknown:#x}");
    }
}

/// Whether an external producer can run; when it cannot, CI (CI=true or FFTD_REQUIRE_NUMPY)
/// fails with `why` instead of skipping.
fn producer_available(program: &str, args: &[&str], why: &str) -> bool {
    let ok = std::process::Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let required = std::env::var("CI").is_ok_and(|v| v == "true")
            || std::env::var_os("FFTD_REQUIRE_NUMPY").is_some();
        assert!(!required, "{why} (CI requires it: run scripts/deps.sh)");
        eprintln!("skipping: {why}");
    }
    ok
}

/// Runs a shell command line, which must succeed.
fn shell(line: &str) {
    let out = std::process::Command::new("sh")
        .args(["-c", line])
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// fftd's spectra of `file` (a WAV) equal those of `reference`, raw f32 of the same samples.
fn assert_same_spectra(file: &Path, reference: &Path, channels: usize, tolerance: f64) {
    let args = ["--frame", "256", "--hop", "128"];
    let wav = run(&[&["--file", file.to_str().expect("utf8")][..], &args].concat());
    let raw = run(&[
        &[
            "--file",
            reference.to_str().expect("utf8"),
            "--input-format",
            "f32",
            "--rate",
            "8000",
            "--channels",
            &channels.to_string(),
        ][..],
        &args,
    ]
    .concat());
    let name = file.display();
    assert_silent_success(&wav);
    assert!(raw.status.success(), "{}", stderr_text(&raw));
    let (got, want) = (
        parse_rows(&stdout_text(&wav)),
        parse_rows(&stdout_text(&raw)),
    );
    assert_eq!(got.len(), want.len(), "{name}: frame counts");
    assert!(!got.is_empty());
    for (g, w) in got.iter().zip(&want) {
        let err = max_relative_error(g, w);
        assert!(err <= tolerance, "{name}: relative error {err}");
    }
}

/// WAVs written by sox (A-law, mu-law, 64-bit float, 8-bit, 24-bit and 3-channel as
/// WAVE_FORMAT_EXTENSIBLE, and into a pipe) decode to the samples sox itself decodes them to.
#[test]
fn sox_wavs_decode_as_sox_decodes_them() {
    if !producer_available("sox", &["--version"], "sox is not installed") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for channels in [1usize, 3] {
        let input = d.join(format!("in{channels}.f32"));
        let x = noise(channels * 4000, 21 + channels as u64);
        let bytes: Vec<u8> = x
            .iter()
            .flat_map(|v| (0.8 * *v as f32).to_le_bytes())
            .collect();
        std::fs::write(&input, bytes).expect("write");
    }
    let raw_in = |c: usize| {
        format!(
            "-t raw -e floating-point -b 32 -r 8000 -c {c} {}",
            d.join(format!("in{c}.f32")).display()
        )
    };
    // (name, channels, sox output options, format tag fftd must meet in the file)
    let cases: [(&str, usize, &str, u16); 6] = [
        ("alaw", 1, "-e a-law", 6),
        ("ulaw", 1, "-e u-law", 7),
        ("f64", 1, "-b 64 -e floating-point", 3),
        ("u8", 1, "-b 8", 1),
        ("s24", 1, "-b 24", 0xFFFE),
        ("s16x3", 3, "-b 16", 0xFFFE),
    ];
    for (name, channels, options, tag) in cases {
        let wav = d.join(format!("{name}.wav"));
        let reference = d.join(format!("{name}.f32"));
        shell(&format!(
            "sox -D {} {options} {}",
            raw_in(channels),
            wav.display()
        ));
        shell(&format!(
            "sox {} -t f32 {}",
            wav.display(),
            reference.display()
        ));
        let bytes = std::fs::read(&wav).expect("read");
        assert_eq!(
            u16::from_le_bytes([bytes[20], bytes[21]]),
            tag,
            "{name}: format tag"
        );
        // sox decodes 64-bit float to f32: that rounding is the only difference
        let tolerance = if name == "f64" { 1e-6 } else { 1e-9 };
        assert_same_spectra(&wav, &reference, channels, tolerance);
    }
    // from a pipe into a pipe: sox knows no length and cannot seek back, so its sizes are a
    // placeholder; fftd reads to EOF
    let piped = d.join("piped.wav");
    shell(&format!(
        "cat {} | sox -D -t raw -e floating-point -b 32 -r 8000 -c 1 - -b 16 -t wav - 2>/dev/null | cat > {}",
        d.join("in1.f32").display(),
        piped.display()
    ));
    let bytes = std::fs::read(&piped).expect("read");
    let data_size = u32::from_le_bytes([bytes[40], bytes[41], bytes[42], bytes[43]]);
    assert_eq!(
        data_size, 0x7fff_f000,
        "sox's placeholder for an unknown size"
    );
    let reference = d.join("piped.f32");
    shell(&format!(
        "sox {} -t f32 {} 2>/dev/null",
        piped.display(),
        reference.display()
    ));
    assert_same_spectra(&piped, &reference, 1, 1e-9);
    let args = ["--frame", "256", "--hop", "128"];
    let from_stdin = run_with_stdin(
        &[&["--file", "-", "--input-format", "wav"][..], &args].concat(),
        bytes,
    );
    let from_file = run(&[&["--file", piped.to_str().expect("utf8")][..], &args].concat());
    assert_silent_success(&from_stdin);
    assert_eq!(from_stdin.stdout, from_file.stdout);
}

/// scipy.io.wavfile writes a float64 array as a 64-bit float WAV; fftd reads back exactly the
/// values written (here f32 values, so the raw f32 file holds the very same samples).
#[test]
fn scipy_float64_wav_decodes_exactly() {
    let python = std::env::var("FFTD_PYTHON").unwrap_or_else(|_| "python3".into());
    let check = ["-c", "import numpy, scipy.io.wavfile"];
    if !producer_available(&python, &check, "python3 lacks numpy/scipy.io.wavfile") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    let wav = dir.path().join("x.wav");
    let x = noise(2 * 5000, 33);
    let bytes: Vec<u8> = x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    std::fs::write(&input, bytes).expect("write");
    let script = format!(
        "import numpy as np, scipy.io.wavfile as w\n\
         x = np.fromfile(r'{}', '<f4').astype(np.float64).reshape(-1, 2)\n\
         w.write(r'{}', 8000, x)",
        input.display(),
        wav.display()
    );
    let _ = run_python(&script, &[], "scipy.io.wavfile.write");
    let header = std::fs::read(&wav).expect("read");
    assert_eq!(&header[20..22], &3u16.to_le_bytes(), "IEEE float");
    assert_eq!(&header[34..36], &64u16.to_le_bytes(), "64 bits");
    assert_same_spectra(&wav, &input, 2, 0.0);
}
