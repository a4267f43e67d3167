//! `--scale complex` end to end on the CPU engine: numpy reads the .npy as complex64/complex128
//! and it equals `np.fft.rfft(w*x)` / `np.fft.fft(w*x)` (and `fftshift` of it); every output
//! format carries the same re, im values in its documented layout; `--fftshift` moves whole bins
//! and keeps the phase of a known tone; `--meta` says two values per bin.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

/// One numpy comparison: fftd's arguments beyond input and output, and what numpy computes.
struct NumpyCase {
    name: &'static str,
    input: &'static str,
    args: &'static [&'static str],
    n: usize,
    hop: usize,
    window: &'static str,
    /// "<c8" or "<c16".
    dtype: &'static str,
    /// numpy expression of one frame `f` windowed by `w`.
    reference: &'static str,
    tolerance: f64,
}

const NUMPY_CASES: &[NumpyCase] = &[
    NumpyCase {
        name: "real-1024-hann",
        input: "x.f32",
        args: &["--input-format", "f32", "--frame", "1024"],
        n: 1024,
        hop: 1024,
        window: "hann",
        dtype: "<c8",
        reference: "np.fft.rfft(w * f)",
        tolerance: 1e-5,
    },
    NumpyCase {
        name: "real-1000-hop-300-flattop-f64",
        input: "x.f32",
        args: &[
            "--frame",
            "1000",
            "--hop",
            "300",
            "--window",
            "flattop",
            "--precision",
            "f64",
        ],
        n: 1000,
        hop: 300,
        window: "flattop",
        dtype: "<c16",
        reference: "np.fft.rfft(w * f)",
        tolerance: 1e-12,
    },
    NumpyCase {
        name: "complex-512-blackman",
        input: "z.cf32",
        args: &["--frame", "512", "--window", "blackman"],
        n: 512,
        hop: 512,
        window: "blackman",
        dtype: "<c8",
        reference: "np.fft.fft(w * f)",
        tolerance: 1e-5,
    },
    NumpyCase {
        name: "complex-4097-fftshift-f64",
        input: "z.cf32",
        args: &["--frame", "4097", "--fftshift", "--precision", "f64"],
        n: 4097,
        hop: 4097,
        window: "hann",
        dtype: "<c16",
        reference: "np.fft.fftshift(np.fft.fft(w * f))",
        tolerance: 1e-12,
    },
];

/// The script that checks one case's .npy against numpy.
fn numpy_script(case: &NumpyCase, npy: &Path, input: &Path) -> String {
    let complex = input.extension().is_some_and(|e| e == "cf32");
    let (read, zeros) = if complex {
        (
            "np.fromfile(p, '<c8').astype(np.complex128)",
            "np.zeros(n, complex)",
        )
    } else {
        ("np.fromfile(p, '<f4').astype(np.float64)", "np.zeros(n)")
    };
    format!(
        r#"
import numpy as np, math
from scipy.signal import get_window
a = np.load(r"{npy}")
p = r"{input}"
x = {read}
n, h = {n}, {hop}
w = get_window("{window}", n)
rows = []
for i in range(math.ceil((len(x) - n) / h) + 1):
    f = {zeros}; seg = x[i*h:i*h+n]; f[:len(seg)] = seg
    rows.append({reference})
ref = np.array(rows)
assert a.dtype == np.dtype("{dtype}"), a.dtype
assert a.shape == ref.shape, (a.shape, ref.shape)
err = np.max(np.abs(a - ref) / np.abs(ref).max(axis=1, keepdims=True))
assert err < {tolerance}, err
"#,
        npy = npy.display(),
        input = input.display(),
        n = case.n,
        hop = case.hop,
        window = case.window,
        reference = case.reference,
        dtype = case.dtype,
        tolerance = case.tolerance,
    )
}

/// A real `x.f32` (10 000 samples) and a complex `z.cf32` (9 000 samples) in `dir`.
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let (x, z) = (dir.join("x.f32"), dir.join("z.cf32"));
    write_f32(&x, &noise(10_000, 31));
    write_f32(&z, &noise(2 * 9_000, 32));
    (x, z)
}

#[test]
fn npy_equals_numpy_rfft_and_fft() {
    if !python_has("numpy, scipy.signal") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    inputs(dir.path());
    for case in NUMPY_CASES {
        let input = dir.path().join(case.input);
        let npy = dir.path().join(format!("{}.npy", case.name));
        let fixed = [
            "--file",
            input.to_str().expect("utf8"),
            "--scale",
            "complex",
            "--format",
            "npy",
            "--output",
            npy.to_str().expect("utf8"),
        ];
        let out = run(&[&fixed[..], case.args].concat());
        assert_silent_success(&out);
        let _ = run_python(&numpy_script(case, &npy, &input), &[], case.name);
    }
}

/// The values of a `--scale complex` .npy (checking its header): (bins, re/im values).
fn complex_npy_values(bytes: &[u8]) -> (usize, Vec<f32>) {
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).expect("header");
    assert!(header.contains("'descr': '<c8'"), "{header}");
    let shape = header.split("'shape': (").nth(1).expect("shape");
    let bins: usize = shape
        .split([',', ')'])
        .nth(1)
        .expect("bins")
        .trim()
        .parse()
        .expect("bins");
    let values = bytes[10 + header_len..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (bins, values)
}

/// Text numbers read back as f32 (they are shortest round-trip decimals of f32 values).
fn parse_f32(cell: &str) -> f32 {
    cell.parse().expect("number")
}

#[test]
fn every_output_format_carries_the_same_complex_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (x, _) = inputs(dir.path());
    let npy = dir.path().join("out.npy");
    let base = [
        "--file",
        x.to_str().expect("utf8"),
        "--frame",
        "256",
        "--hop",
        "100",
        "--rate",
        "8000",
        "--scale",
        "complex",
    ];
    let out = run(&[
        &base[..],
        &["--format", "npy", "--output", npy.to_str().expect("utf8")],
    ]
    .concat());
    assert_silent_success(&out);
    let (bins, want) = complex_npy_values(&std::fs::read(&npy).expect("npy"));
    assert_eq!(bins, 129);
    let rows: Vec<&[f32]> = want.chunks_exact(2 * bins).collect();
    let format = |name: &str| {
        let out = run(&[&base[..], &["--format", name]].concat());
        assert_silent_success(&out);
        out
    };

    // text: re0 im0 re1 im1 ... per line
    let text = stdout_text(&format("text"));
    let got: Vec<Vec<f32>> = text
        .lines()
        .map(|l| l.split(' ').map(parse_f32).collect())
        .collect();
    assert_eq!(got.len(), rows.len());
    assert!(got.iter().zip(&rows).all(|(g, w)| g == w), "text");

    // csv: re_<Hz>,im_<Hz> columns
    let csv = stdout_text(&format("csv"));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(header.len(), 3 + 2 * bins);
    assert_eq!(
        &header[..7],
        &["stream", "frame", "time_s", "re_0.0", "im_0.0", "re_31.25", "im_31.25"]
    );
    assert_eq!(header[3 + 2 * 128], "re_4000.0");
    for (line, want) in lines.zip(&rows) {
        let cells: Vec<f32> = line.split(',').skip(3).map(parse_f32).collect();
        assert!(cells == *want, "csv row");
    }

    // ndjson: "bins": [[re, im], ...]
    let nd = stdout_text(&format("ndjson"));
    assert_eq!(nd.lines().count(), rows.len());
    for (line, want) in nd.lines().zip(&rows) {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        let pairs = v["bins"].as_array().expect("bins");
        assert_eq!(pairs.len(), bins);
        let got: Vec<f32> = pairs
            .iter()
            .flat_map(|p| {
                let pair = p.as_array().expect("[re, im]");
                assert_eq!(pair.len(), 2);
                pair.iter()
                    .map(|c| c.as_f64().expect("number") as f32)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(got == *want, "ndjson row");
    }

    // f32: re, im interleaved, nothing else
    let raw = format("f32").stdout;
    let got: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert!(got == want, "f32");
}

#[test]
fn fftshift_moves_whole_bins_and_keeps_the_phase() {
    // e^{i(2π(-3)j/16 + φ)} with a rect window: bin -3 (index 13, or 5 after fftshift) holds
    // 16·e^{iφ}, every other bin 0
    let dir = tempfile::tempdir().expect("tempdir");
    let iq = dir.path().join("tone.cf32");
    let (n, phase) = (16usize, 0.6f64);
    let z: Vec<f64> = (0..n)
        .flat_map(|j| {
            let a = -std::f64::consts::TAU * 3.0 * j as f64 / n as f64 + phase;
            [a.cos(), a.sin()]
        })
        .collect();
    write_f32(&iq, &z);
    let p = iq.to_str().expect("utf8");
    let args = [
        "--file", p, "--frame", "16", "--window", "rect", "--scale", "complex",
    ];
    for (extra, index) in [(&[][..], 13usize), (&["--fftshift"][..], 5)] {
        let rows = parse_rows(&stdout_text(&run(&[&args[..], extra].concat())));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].len(), 2 * n);
        for (k, pair) in rows[0].chunks_exact(2).enumerate() {
            let want = if k == index {
                (16.0 * phase.cos(), 16.0 * phase.sin())
            } else {
                (0.0, 0.0)
            };
            assert!(
                (pair[0] - want.0).abs() < 1e-4 && (pair[1] - want.1).abs() < 1e-4,
                "{extra:?} bin {k}: {pair:?} want {want:?}"
            );
        }
    }
}

#[test]
fn meta_says_two_values_per_bin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (x, _) = inputs(dir.path());
    let meta = dir.path().join("m.json");
    let out = run(&[
        "--file",
        x.to_str().expect("utf8"),
        "--frame",
        "100",
        "--scale",
        "complex",
        "--meta",
        meta.to_str().expect("utf8"),
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(m["scale"], "complex");
    assert_eq!(m["bins"], 51);
    assert_eq!(m["values_per_bin"], 2);
    assert_eq!(parse_rows(&stdout_text(&out))[0].len(), 2 * 51);
}
