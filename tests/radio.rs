//! Radio inputs and conventions (issue 25): the SDR I/Q formats cu8/cs8/cs16 equal numpy's decode
//! of the same bytes (files by extension, stdin pipes by --input-format); SigMF recordings written
//! by the reference `sigmf` Python package, in many datatypes with two captures, equal numpy's
//! decode and label rows with their capture's centre; `--center-freq` reaches every output that
//! has frequencies (csv header, ndjson, --meta, the PNG axis, the live view); `--format rtl-power`
//! rows parse back to what fftd computes; `--dc-remove` equals welch's detrend='constant'.

use crate::common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// `len` pseudo-random bytes (a DC offset and a tone show in any spectrum of them).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    noise(len, seed)
        .iter()
        .enumerate()
        .map(|(i, v)| (128.0 + 60.0 * v + 40.0 * (i as f64 * 0.7).sin()).clamp(0.0, 255.0) as u8)
        .collect()
}

/// numpy's decode of each raw I/Q format, with the scalings docs/radio.md documents.
const NUMPY_DECODE: &str = r#"
import sys, numpy as np, scipy.signal
path, fmt, npy, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dc = len(sys.argv) > 5 and sys.argv[5] == 'dc'
dtype = {'cu8': np.uint8, 'cs8': np.int8, 'cs16': '<i2'}[fmt]
x = np.fromfile(path, dtype).astype(np.float64)
x = {'cu8': (x - 127.5) / 127.5, 'cs8': x / 128.0, 'cs16': x / 32768.0}[fmt]
z = x[0::2] + 1j * x[1::2]
hop = int(sys.argv[7]) if len(sys.argv) > 7 else n
frames = np.stack([z[i : i + n] for i in range(0, len(z) - n + 1, hop)])
window = np.ones(n) if len(sys.argv) > 6 and sys.argv[6] == 'rect' else scipy.signal.get_window('hann', n)
if dc:
    # --dc-remove with --window rect: the DC bin holds the frame's sum, which is then 0
    frames = frames - frames.mean(axis=1, keepdims=True)
    window = np.ones(n)
want = np.abs(np.fft.fft(frames * window, axis=1))
got = np.load(npy)
assert got.shape == want.shape, (got.shape, want.shape)
err = np.max(np.abs(got - want)) / np.max(want)
assert err < 1e-12, err
print(float(np.max(want[:, 0])))
"#;

/// Runs fftd over `input` (a path, or stdin when `stdin` holds bytes) into an f64 npy.
fn npy_of(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> PathBuf {
    let npy = dir.join("out.npy");
    let mut cmd = fftd();
    cmd.args(args)
        .args(["--frame", "64", "--tail", "drop", "--precision", "f64"])
        .args(["--format", "npy", "--output", s(&npy), "--device", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("fftd runs");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(bytes) = stdin {
        pipe.write_all(bytes).expect("feed stdin");
    }
    drop(pipe);
    let out = child.wait_with_output().expect("fftd ends");
    assert_silent_success(&out);
    npy
}

#[test]
fn iq_formats_equal_numpy_from_files_and_pipes() {
    if !python_has("numpy, scipy.signal") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for (k, fmt) in ["cu8", "cs8", "cs16"].iter().enumerate() {
        let data = bytes(
            64 * 40 * 2 * if *fmt == "cs16" { 2 } else { 1 },
            50 + k as u64,
        );
        let path = dir.path().join(format!("x.{fmt}"));
        std::fs::write(&path, &data).expect("write");
        // a file by its extension (the range readers), then a pipe named by --input-format
        let npy = npy_of(dir.path(), &["--file", s(&path)], None);
        run_python(NUMPY_DECODE, &[s(&path), fmt, s(&npy), "64"], fmt);
        let npy = npy_of(
            dir.path(),
            &["--file", "-", "--input-format", fmt],
            Some(&data),
        );
        run_python(NUMPY_DECODE, &[s(&path), fmt, s(&npy), "64"], fmt);
    }
}

#[test]
fn dc_remove_equals_welch_detrend_constant_and_empties_the_centre_bin() {
    if !python_has("numpy, scipy.signal") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // a receiver's DC offset: every byte 30 above the middle
    let data: Vec<u8> = bytes(64 * 30 * 2, 61)
        .iter()
        .map(|b| b.saturating_add(30))
        .collect();
    let path = dir.path().join("x.cu8");
    std::fs::write(&path, &data).expect("write");
    // the range readers, the sequential reader, overlapping frames, frames with gaps
    let cases: [(&[&str], &str); 4] = [
        (&[], "64"),
        (&["--realtime", "--rate", "1e9"], "64"),
        (&["--hop", "24"], "24"),
        (&["--hop", "96"], "96"),
    ];
    for (extra, hop) in cases {
        let args = [
            &["--file", s(&path), "--dc-remove", "--window", "rect"][..],
            extra,
        ]
        .concat();
        let npy = npy_of(dir.path(), &args, None);
        let argv = [s(&path), "cu8", s(&npy), "64", "dc", "rect", hop];
        let dc = run_python(NUMPY_DECODE, &argv, "dc");
        let centre: f64 = dc.trim().parse().expect("number");
        assert!(centre < 1e-9, "DC bin after --dc-remove: {centre}");
    }
    let npy = npy_of(dir.path(), &["--file", s(&path), "--window", "rect"], None);
    let centre: f64 = run_python(
        NUMPY_DECODE,
        &[s(&path), "cu8", s(&npy), "64", "", "rect"],
        "plain",
    )
    .trim()
    .parse()
    .expect("number");
    assert!(centre > 1.0, "the test signal has a DC spike: {centre}");
}

/// Writes SigMF recordings with the `sigmf` package: for each datatype a `<type>.sigmf-meta` and
/// `.sigmf-data` of 4 × 256 samples, two captures (100 MHz from 0, 101.5 MHz from sample 512),
/// 2 MHz; then checks fftd's npy (argv: folder, then the npy of each type) against numpy.
const SIGMF_SCRIPT: &str = r#"
import sys, json, numpy as np, scipy.signal, sigmf
from sigmf import SigMFFile
folder, mode = sys.argv[1], sys.argv[2]
types = sys.argv[3].split(',')
def dtype(t):
    size = t[2:].split('_')[0]
    kind = {'f': 'f', 'i': 'i', 'u': 'u'}[t[1]]
    order = '>' if t.endswith('_be') else '<'
    return np.dtype(order + kind + str(int(size) // 8))
def scaled(raw, t):
    bits = dtype(t).itemsize * 8
    x = raw.astype(np.float64)
    if t[1] == 'i': return x / 2.0 ** (bits - 1)
    if t[1] == 'u': m = (2.0 ** bits - 1) / 2; return (x - m) / m
    return x
rng = np.random.default_rng(7)
for t in types:
    data, meta = f'{folder}/{t}.sigmf-data', f'{folder}/{t}.sigmf-meta'
    complex_ = t[0] == 'c'
    count = 1024 * (2 if complex_ else 1)
    d = dtype(t)
    if d.kind == 'f': raw = rng.standard_normal(count).astype(d)
    else:
        info = np.iinfo(d); raw = rng.integers(info.min, info.max, count, endpoint=True).astype(d)
    if mode == 'write':
        raw.tofile(data)
        m = SigMFFile(data_file=data, global_info={
            sigmf.DATATYPE_KEY: t, sigmf.SAMPLE_RATE_KEY: 2e6, sigmf.VERSION_KEY: sigmf.__specification__})
        m.add_capture(0, metadata={sigmf.FREQUENCY_KEY: 100e6, sigmf.DATETIME_KEY: '2024-03-01T10:00:00Z'})
        m.add_capture(512, metadata={sigmf.FREQUENCY_KEY: 101.5e6})
        m.tofile(meta)
        continue
    x = scaled(raw, t)
    z = x[0::2] + 1j * x[1::2] if complex_ else x
    frames = z.reshape(-1, 256) * scipy.signal.get_window('hann', 256)
    want = np.abs(np.fft.fft(frames, axis=1) if complex_ else np.fft.rfft(frames, axis=1))
    got = np.load(f'{folder}/{t}.npy')
    assert got.shape == want.shape, (t, got.shape, want.shape)
    err = np.max(np.abs(got - want)) / np.max(want)
    assert err < 1e-12, (t, err)
"#;

const SIGMF_TYPES: &str =
    "cf32_le,cf64_be,ci8,ci16_le,ci16_be,ci32_le,cu8,cu16_be,rf32_le,ri16_be,ru8,ru32_le";

#[test]
fn sigmf_recordings_of_the_sigmf_package_equal_numpy_and_carry_their_centres() {
    if !python_has("numpy, scipy.signal, sigmf") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = s(dir.path());
    run_python(SIGMF_SCRIPT, &[folder, "write", SIGMF_TYPES], "write");
    for (i, t) in SIGMF_TYPES.split(',').enumerate() {
        // the metadata for some, the dataset beside it for the others
        let given = dir.path().join(match i % 2 {
            0 => format!("{t}.sigmf-meta"),
            _ => format!("{t}.sigmf-data"),
        });
        let npy = dir.path().join(format!("{t}.npy"));
        let out = run(&[
            "--file",
            s(&given),
            "--frame",
            "256",
            "--precision",
            "f64",
            "--format",
            "npy",
            "--output",
            s(&npy),
        ]);
        assert_silent_success(&out);
        // rows carry their capture's centre; the labels stay offsets (the captures differ)
        let out = run(&["--file", s(&given), "--frame", "256", "--format", "ndjson"]);
        assert_silent_success(&out);
        let centres: Vec<f64> = stdout_text(&out)
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).expect("json")["center_hz"]
                    .as_f64()
                    .expect("center_hz")
            })
            .collect();
        assert_eq!(centres, [100e6, 100e6, 101.5e6, 101.5e6], "{t}");
    }
    run_python(SIGMF_SCRIPT, &[folder, "check", SIGMF_TYPES], "check");
    // a retuned recording's csv: a center_hz column, bins headed by their offsets
    let meta = dir.path().join("cf32_le.sigmf-meta");
    let out = run(&[
        "--file",
        s(&meta),
        "--frame",
        "256",
        "--format",
        "csv",
        "--fftshift",
    ]);
    assert_silent_success(&out);
    let text = stdout_text(&out);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(header[..4], ["stream", "frame", "time_s", "center_hz"]);
    assert_eq!(header[4].parse::<f64>().expect("hz"), -1e6);
    let centres: Vec<&str> = lines
        .map(|l| l.split(',').nth(3).expect("centre"))
        .collect();
    // one csv header cannot suit a retuned recording and another input
    let other = tone_cu8(dir.path());
    let out = run(&["--file", s(&meta), "--file", s(&other), "--format", "csv"]);
    assert_clean_error(&out, 2, &["center_hz", "--output-dir"]);
    let both = ["--file", s(&meta), "--file", s(&other), "--format", "csv"];
    // one centre for both, and the raw input at the recording's rate: one header labels both
    let out = run(&[&both[..], &["--center-freq", "1e6", "--rate", "2e6"]].concat());
    assert_silent_success(&out);
    // at another rate its bins are not the recording's
    let out = run(&[&both[..], &["--center-freq", "1e6", "--rate", "1e6"]].concat());
    assert_clean_error(&out, 2, &["one header cannot label", "tone.cu8"]);
    assert_eq!(
        centres,
        ["100000000.0", "100000000.0", "101500000.0", "101500000.0"]
    );
}

#[test]
fn sigmf_meta_output_round_trips_through_the_sigmf_package() {
    if !python_has("numpy, sigmf") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = s(dir.path());
    run_python(SIGMF_SCRIPT, &[folder, "write", "ci16_le"], "write");
    let meta_in = dir.path().join("ci16_le.sigmf-meta");
    let meta_out = dir.path().join("spectra.sigmf-meta");
    let out = run(&[
        "--file",
        s(&meta_in),
        "--frame",
        "256",
        "--format",
        "csv",
        "--output",
        s(&dir.path().join("spectra.csv")),
        "--meta",
        s(&meta_out),
    ]);
    assert_silent_success(&out);
    let check = r#"
import sys, json, sigmf
doc = json.load(open(sys.argv[1]))
g = doc['global']
assert g['core:datatype'] == 'ci16_le' and g['core:sample_rate'] == 2e6, g
assert [c['core:frequency'] for c in doc['captures']] == [100e6, 101.5e6], doc['captures']
assert g['fftd:analysis']['frame'] == 256
assert g['fftd:analysis']['inputs'][0]['captures'][1] == {'sample_start': 512, 'center_hz': 101.5e6}
# the reference package reads it (its schema validation included) next to the input's dataset
from sigmf import sigmffile
m = sigmffile.fromfile(sys.argv[1][:-len('.sigmf-meta')])
assert m.get_global_field('core:datatype') == 'ci16_le'
"#;
    let _ = std::fs::copy(
        dir.path().join("ci16_le.sigmf-data"),
        dir.path().join("spectra.sigmf-data"),
    );
    run_python(check, &[s(&meta_out)], "sigmf meta");
}

/// `core:dataset` names the input's file, which the sigmf package finds beside the document (a
/// non-conforming dataset); stdin leaves no file: `core:metadata_only` instead (before: "-").
#[test]
fn a_sigmf_sidecar_names_its_dataset_file_and_a_stream_none() {
    if !python_has("numpy, sigmf") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = tone_cu8(dir.path());
    let meta = dir.path().join("tone.sigmf-meta");
    let args = ["--input-format", "cu8", "--rate", "2e6", "--frame", "64"];
    let out = run(&[&args[..], &["--file", s(&input), "--meta", s(&meta)]].concat());
    assert!(out.status.success(), "{}", stderr_text(&out));
    let check = r#"
import sys, json
from sigmf import sigmffile
g = json.load(open(sys.argv[1]))['global']
assert g['core:dataset'] == 'tone.cu8' and 'core:metadata_only' not in g, g
m = sigmffile.fromfile(sys.argv[1])
assert str(m.data_file).endswith('tone.cu8') and len(m.read_samples()) == 64 * 64, m.data_file
"#;
    run_python(check, &[s(&meta)], "sigmf dataset");
    let out = fftd()
        .args(args)
        .args(["--file", "-", "--meta", s(&meta)])
        .stdin(std::fs::File::open(&input).expect("open"))
        .output()
        .expect("run fftd");
    assert!(out.status.success(), "{}", stderr_text(&out));
    let doc = std::fs::read_to_string(&meta).expect("read");
    assert!(
        doc.contains("\"core:metadata_only\": true") && !doc.contains("core:dataset"),
        "{doc}"
    );
}

/// A SigMF document names its samples' datatype: an input that has none (WAV, text) is refused
/// before any output is made, naming the plain sidecar instead (helper-47: the document lacked
/// core:datatype, and sigmf and fftd itself refused it).
#[test]
fn a_sigmf_sidecar_of_an_input_with_no_datatype_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tones.wav");
    let text = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/input.txt");
    let meta = dir.path().join("spectra.sigmf-meta");
    let output = dir.path().join("spectra.csv");
    for input in [&wav, &text] {
        let args = [
            "--file",
            s(input),
            "--format",
            "csv",
            "--output",
            s(&output),
        ];
        let out = run(&[&args[..], &["--meta", s(&meta)]].concat());
        let name = input.file_name().and_then(|n| n.to_str()).expect("name");
        assert_clean_error(&out, 2, &["--meta", name, "core:datatype", "spectra.json"]);
        assert!(!meta.exists() && !output.exists(), "{name}");
    }
    // decided before any input is opened: a FIFO with no writer is not waited for
    let fifo = dir.path().join("live.txt");
    mkfifo(&fifo);
    let mut child = fftd()
        .args([
            "--file",
            s(&fifo),
            "--meta",
            s(&meta),
            "--output",
            s(&output),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = std::time::Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("fftd waited for the FIFO's writer before refusing --meta");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    assert_clean_error(&out, 2, &["--meta", "live.txt", "core:datatype"]);
    // a SigMF input that cannot be read is its own error, not one of --meta (helper-51)
    let missing = dir.path().join("missing.sigmf-meta");
    let out = run(&[
        "--file",
        s(&missing),
        "--meta",
        s(&meta),
        "--output",
        s(&output),
    ]);
    assert_clean_error(&out, 1, &["missing.sigmf-meta", "No such file"]);
}

/// A cu8 recording of a tone 250 kHz above a 100 MHz centre, 2 MHz.
fn tone_cu8(dir: &Path) -> PathBuf {
    let path = dir.join("tone.cu8");
    let bytes: Vec<u8> = (0..64 * 64)
        .flat_map(|i| {
            let phase = 2.0 * std::f64::consts::PI * 0.125 * i as f64;
            [
                (127.5 + 100.0 * phase.cos()) as u8,
                (127.5 + 100.0 * phase.sin()) as u8,
            ]
        })
        .collect();
    std::fs::write(&path, bytes).expect("write");
    path
}

const CENTRE: &[&str] = &["--center-freq", "100e6", "--rate", "2e6", "--frame", "64"];

#[test]
fn center_freq_labels_csv_ndjson_meta_and_png() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = tone_cu8(dir.path());
    let file = ["--file", s(&input)];
    // csv: the header's bins in RF Hz, fftshift order from 99 MHz
    let out = run(&[&file[..], CENTRE, &["--format", "csv", "--fftshift"]].concat());
    assert_silent_success(&out);
    let text = stdout_text(&out);
    let header: Vec<f64> = text
        .lines()
        .next()
        .expect("header")
        .split(',')
        .skip(3)
        .map(|v| v.parse().expect("hz"))
        .collect();
    assert_eq!(header.len(), 64);
    assert_eq!(header[0], 99e6);
    assert_eq!(header[32], 100e6);
    assert_eq!(header[36], 100.125e6);
    // the tone's bin is the loudest of the first row, at 100.25 MHz
    let row: Vec<f64> = text
        .lines()
        .nth(1)
        .expect("row")
        .split(',')
        .skip(3)
        .map(|v| v.parse().expect("v"))
        .collect();
    let peak = (0..64)
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .expect("peak");
    assert_eq!(header[peak], 100.25e6);
    // ndjson: center_hz in every row
    let out = run(&[&file[..], CENTRE, &["--format", "ndjson"]].concat());
    assert_silent_success(&out);
    for line in stdout_text(&out).lines() {
        let row: serde_json::Value = serde_json::from_str(line).expect("json");
        assert_eq!(row["center_hz"].as_f64(), Some(100e6), "{line}");
    }
    // --meta: the centre, the RF range; --fmin/--fmax are in RF Hz too
    let meta = dir.path().join("meta.json");
    let out = run(&[
        &file[..],
        CENTRE,
        &[
            "--format",
            "f32",
            "--output",
            s(&dir.path().join("x.f32")),
            "--meta",
            s(&meta),
            "--fmin",
            "99.5e6",
            "--fmax",
            "100.5e6",
        ],
    ]
    .concat());
    assert_silent_success(&out);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(doc["center_hz"].as_f64(), Some(100e6));
    assert_eq!(
        doc["inputs"][0]["hz_range"],
        serde_json::json!([99.5e6, 100.5e6])
    );
    let columns: Vec<f64> =
        serde_json::from_value(doc["inputs"][0]["columns_hz"].clone()).expect("columns");
    assert!(
        columns.iter().all(|hz| (99.5e6..=100.5e6).contains(hz)) && columns.len() == 33,
        "{columns:?}"
    );
    // PNG: the frequency axis (fftd:frequency-hz text chunk) spans the RF band
    let png = dir.path().join("x.png");
    let out = run(&[&file[..], CENTRE, &["--format", "png", "--output", s(&png)]].concat());
    assert_silent_success(&out);
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png).expect("png"),
    ));
    let reader = decoder.read_info().expect("png info");
    let axis = reader
        .info()
        .uncompressed_latin1_text
        .iter()
        .map(|c| (c.keyword.clone(), c.text.clone()))
        .chain(
            reader
                .info()
                .utf8_text
                .iter()
                .map(|c| (c.keyword.clone(), c.get_text().unwrap_or_default())),
        )
        .find(|(k, _)| k == "fftd:frequency-hz")
        .map(|(_, t)| t)
        .expect("fftd:frequency-hz");
    let ends: Vec<f64> = axis
        .split(' ')
        .skip(1)
        .map(|v| v.parse().expect("hz"))
        .collect();
    assert!(
        ends[0] >= 98.9e6 && ends[0] <= 99e6 && ends[1] > 100.9e6 && ends[1] <= 101.1e6,
        "{axis}"
    );
}

#[test]
fn center_freq_labels_the_live_view() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = tone_cu8(dir.path());
    let mut child = fftd()
        .args(["--file", s(&input)])
        .args(CENTRE)
        .args(["--serve", "127.0.0.1:0", "--device", "cpu", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd starts");
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut lines = stderr.lines().map_while(Result::ok);
    let addr = lines
        .find_map(|l| {
            l.split("http://")
                .nth(1)
                .and_then(|r| r.split('/').next())
                .map(str::to_string)
        })
        .expect("live view address");
    let (mut socket, _) =
        tungstenite::connect(format!("ws://{addr}/ws?width=64")).expect("websocket");
    if let tungstenite::stream::MaybeTlsStream::Plain(tcp) = socket.get_ref() {
        tcp.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
    }
    let columns_hz: Vec<f64> = loop {
        if let tungstenite::Message::Text(text) = socket.read().expect("message") {
            let json: serde_json::Value = serde_json::from_str(&text).expect("json");
            if json["type"] == "layout" {
                break serde_json::from_value(json["columns_hz"].clone()).expect("columns_hz");
            }
        }
    };
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert_eq!(columns_hz.len(), 64);
    assert_eq!((columns_hz[0], columns_hz[32]), (99e6, 100e6));
}

#[test]
fn rtl_power_rows_parse_back_to_the_averaged_db() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = tone_cu8(dir.path());
    let file = ["--file", s(&input)];
    let out = run(&[
        &file[..],
        CENTRE,
        &["--format", "rtl-power", "--average", "16"],
    ]
    .concat());
    assert_silent_success(&out);
    let text = stdout_text(&out);
    // the same analysis as ndjson: dB, averaged in power, bins in ascending frequency
    let out = run(&[
        &file[..],
        CENTRE,
        &[
            "--format",
            "ndjson",
            "--scale",
            "db",
            "--average",
            "16",
            "--fftshift",
        ],
    ]
    .concat());
    assert_silent_success(&out);
    let want: Vec<Vec<f64>> = stdout_text(&out)
        .lines()
        .map(|l| {
            serde_json::from_value(
                serde_json::from_str::<serde_json::Value>(l).expect("json")["bins"].clone(),
            )
            .expect("bins")
        })
        .collect();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(", ").collect()).collect();
    assert_eq!(rows.len(), 4, "64 frames averaged 16 at a time:\n{text}");
    for (row, want) in rows.iter().zip(&want) {
        let date: Vec<&str> = row[0].split('-').collect();
        assert!(
            date.len() == 3 && date[0].len() == 4 && row[1].split(':').count() == 3,
            "{row:?}"
        );
        // heatmap.py reads Hz low and high with int() and the step with float()
        let (low, high): (i64, i64) = (row[2].parse().expect("low"), row[3].parse().expect("high"));
        assert_eq!(
            (low, high, row[4].parse::<f64>().expect("step")),
            (99_000_000, 101_000_000, 31250.0)
        );
        assert_eq!(row[5], "16", "FFTs averaged");
        let db: Vec<f64> = row[6..].iter().map(|v| v.parse().expect("dB")).collect();
        assert_eq!(&db, want);
    }
    // heatmap.py's arithmetic: the loudest bin lies at low + i * step = the tone
    let db: Vec<f64> = rows[0][6..]
        .iter()
        .map(|v| v.parse().expect("dB"))
        .collect();
    let peak = (0..db.len())
        .max_by(|&a, &b| db[a].total_cmp(&db[b]))
        .expect("peak");
    assert_eq!(99e6 + peak as f64 * 31250.0, 100.25e6);
    // a scale that is not dB is refused
    let out = run(&[
        &file[..],
        CENTRE,
        &["--format", "rtl-power", "--scale", "power"],
    ]
    .concat());
    assert_clean_error(&out, 2, &["--format rtl-power writes dB"]);
    // and so are columns that are not bins (they were written as dB bins past Nyquist)
    for extra in [&["--peaks", "2"][..], &["--levels", "--distortion"]] {
        let rtl_power = ["--format", "rtl-power"];
        let out = run(&[&file[..], CENTRE, &rtl_power, extra].concat());
        assert_clean_error(&out, 2, &["rtl-power writes dB bins only", extra[0]]);
    }
    // edges between whole Hz (odd N: centre - 31 * rate / 63; a range) are rounded, as
    // rtl_power's %i writes them, for heatmap.py's int() (helper-47: 99500781.25 refused)
    let odd = ["--center-freq", "100e6", "--rate", "2e6", "--frame", "63"];
    let range = [CENTRE, &["--fmin", "99.51M", "--fmax", "100.49M"]].concat();
    for (flags, want) in [
        (&odd[..], (99_015_873, 101_015_873)),
        (&range, (99_531_250, 100_500_000)),
    ] {
        let out = run(&[&file[..], flags, &["--format", "rtl-power"]].concat());
        assert_silent_success(&out);
        let text = stdout_text(&out);
        let row: Vec<&str> = text.lines().next().expect("a row").split(", ").collect();
        let (low, high): (i64, i64) = (row[2].parse().expect("low"), row[3].parse().expect("high"));
        assert_eq!((low, high), want, "{flags:?}");
    }
}

#[test]
fn sigmf_rtl_power_rows_take_the_capture_time() {
    if !python_has("numpy, sigmf") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    run_python(SIGMF_SCRIPT, &[s(dir.path()), "write", "cf32_le"], "write");
    let out = run(&[
        "--file",
        s(&dir.path().join("cf32_le.sigmf-meta")),
        "--frame",
        "256",
        "--format",
        "rtl-power",
    ]);
    assert_silent_success(&out);
    let rows: Vec<Vec<String>> = stdout_text(&out)
        .lines()
        .map(|l| l.split(", ").take(6).map(str::to_string).collect())
        .collect();
    // Hz low/high of each row's own capture; one FFT per row without --average
    assert_eq!(
        rows[0][..4],
        ["2024-03-01", "10:00:00", "99000000", "101000000"]
    );
    assert_eq!(rows[0][5], "1");
    assert_eq!(
        rows[2][..4],
        ["2024-03-01", "10:00:00", "100500000", "102500000"]
    );
}

/// `core:offset` (the dataset's first sample's index: capture starts are absolute), datetimes
/// with an offset from UTC or nine digits of fraction, and `--center-freq`, which overrides the
/// centre and keeps the captures' times (helper-37 found all four wrong).
#[test]
fn sigmf_captures_are_placed_by_the_offset_and_timed_in_utc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("o.sigmf-meta");
    // 10 frames of 1000 cu8 samples at 1 kHz: dataset samples 0-4999 are at 100 MHz from
    // 10:00:00Z, 5000-9999 at 200 MHz from 10:00:05Z (written +02:00 and with its fraction)
    std::fs::write(dir.path().join("o.sigmf-data"), bytes(20_000, 3)).expect("data");
    std::fs::write(
        &meta,
        r#"{"global":{"core:datatype":"cu8","core:sample_rate":1000,"core:offset":5000},
            "captures":[
              {"core:sample_start":5000,"core:frequency":100e6,"core:datetime":"2024-03-01T10:00:00Z"},
              {"core:sample_start":10000,"core:frequency":200e6,"core:datetime":"2024-03-01T12:00:04.999999999+02:00"}]}"#,
    )
    .expect("meta");
    let rows = |extra: &[&str]| -> Vec<Vec<String>> {
        let args = [
            "--file",
            s(&meta),
            "--frame",
            "1000",
            "--format",
            "rtl-power",
        ];
        let out = run(&[&args[..], extra].concat());
        assert_silent_success(&out);
        (stdout_text(&out).lines())
            .map(|l| l.split(", ").take(4).map(str::to_string).collect())
            .collect()
    };
    let got = rows(&[]);
    assert_eq!(got.len(), 10);
    assert_eq!(got[0], ["2024-03-01", "10:00:00", "99999500", "100000500"]);
    assert_eq!(got[4], ["2024-03-01", "10:00:04", "99999500", "100000500"]);
    // 04.999999999 + 0 s: still second 4 (one f64 had rounded it into second 5)
    assert_eq!(got[5], ["2024-03-01", "10:00:04", "199999500", "200000500"]);
    assert_eq!(got[6][1], "10:00:05");
    // --center-freq: one centre, the captures' times kept
    let got = rows(&["--center-freq", "50M"]);
    assert_eq!(got[0], ["2024-03-01", "10:00:00", "49999500", "50000500"]);
    assert_eq!(got[6], ["2024-03-01", "10:00:05", "49999500", "50000500"]);
    // captures that give datetimes and no frequency still time the rows (before: the run's
    // start time), and ndjson rows get no center_hz
    let text = std::fs::read_to_string(&meta).expect("read");
    std::fs::write(
        &meta,
        text.replace(r#""core:frequency":100e6,"#, "")
            .replace(r#""core:frequency":200e6,"#, ""),
    )
    .expect("meta");
    let got = rows(&[]);
    assert_eq!(got[0], ["2024-03-01", "10:00:00", "-500", "500"]);
    assert_eq!(got[6][..2], ["2024-03-01", "10:00:05"]);
    let out = run(&["--file", s(&meta), "--frame", "1000", "--format", "ndjson"]);
    assert!(!stdout_text(&out).contains("center_hz"));
}

#[test]
fn bad_sigmf_recordings_are_one_line_errors_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("r.sigmf-meta");
    let name = s(&meta);
    let cases: &[(&str, &str)] = &[
        ("{not json", "is not SigMF metadata"),
        (r#"{"global":{}}"#, "has no core:datatype"),
        (
            r#"{"global":{"core:datatype":"cf16_le"}}"#,
            "core:datatype \"cf16_le\"",
        ),
        (r#"{"global":{"core:datatype":"cf32"}}"#, "_le or _be"),
        (
            r#"{"global":{"core:datatype":"cu8","core:sample_rate":-1}}"#,
            "core:sample_rate -1",
        ),
        (
            r#"{"global":{"core:datatype":"cu8"},"captures":[{"core:sample_start":9},{"core:sample_start":2}]}"#,
            "capture 1",
        ),
        (
            r#"{"global":{"core:datatype":"cu8"},"captures":[{"core:header_bytes":16}]}"#,
            "core:header_bytes",
        ),
        // a footer was read as samples (helper-42)
        (
            r#"{"global":{"core:datatype":"cu8","core:trailing_bytes":8}}"#,
            "core:trailing_bytes 8 (bytes after the samples) are not read: cut them from the dataset (truncate -s -8)",
        ),
        (
            r#"{"global":{"core:datatype":"cu8"},"captures":[{"core:frequency":1e300}]}"#,
            "capture 0: core:frequency 1e+300",
        ),
        // a time that is not one was taken as none (helper-37)
        (
            r#"{"global":{"core:datatype":"cu8"},"captures":[{"core:datetime":"yesterday"}]}"#,
            "capture 0: core:datetime \"yesterday\" is not an ISO 8601 time",
        ),
        (
            r#"{"global":{"core:datatype":"cu8","core:offset":100},"captures":[{"core:sample_start":50}]}"#,
            "capture 0: core:sample_start 50 is before the dataset's first sample (core:offset 100)",
        ),
        // a key given twice: serde_json kept the last one, silently (helper-40)
        (
            r#"{"global":{"core:datatype":"cu8","core:sample_rate":1000,"core:sample_rate":2000}}"#,
            "the key \"core:sample_rate\" is given twice in one object at line 1",
        ),
    ];
    std::fs::write(dir.path().join("r.sigmf-data"), [1u8, 2, 3, 4]).expect("data");
    for (doc, needle) in cases {
        std::fs::write(&meta, doc).expect("meta");
        let out = run(&["--file", name]);
        assert_clean_error(&out, 1, &[name, needle]);
    }
    // no dataset beside the metadata
    std::fs::write(&meta, r#"{"global":{"core:datatype":"cu8"}}"#).expect("meta");
    std::fs::remove_file(dir.path().join("r.sigmf-data")).expect("rm");
    let out = run(&["--file", name]);
    assert_clean_error(&out, 1, &["r.sigmf-data"]);
    // the metadata of a recording named by its dataset is an input too: never overwritten
    std::fs::write(&meta, r#"{"global":{"core:datatype":"cu8"}}"#).expect("meta");
    std::fs::write(dir.path().join("r.sigmf-data"), [1u8; 64]).expect("data");
    let data = dir.path().join("r.sigmf-data");
    let out = run(&["--file", s(&data), "--frame", "4", "--meta", name]);
    assert_clean_error(&out, 2, &["--meta", "also an input"]);
    // nor the file `core:dataset` names (helper-40: it was replaced by the spectra)
    // (r.f32: the name --output-dir gives r.sigmf-meta's rows in f32)
    let other = dir.path().join("r.f32");
    std::fs::write(&other, [1u8; 64]).expect("data");
    let doc = r#"{"global":{"core:datatype":"cu8","core:dataset":"r.f32"}}"#;
    std::fs::write(&meta, doc).expect("meta");
    for args in [
        &["--output", s(&other), "--format", "f32"][..],
        &["--output-dir", s(dir.path()), "--format", "f32"],
    ] {
        let out = run(&[&["--file", name, "--frame", "4"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
        assert!(
            stderr_text(&out).contains("also an input"),
            "{}",
            stderr_text(&out)
        );
        assert_eq!(std::fs::read(&other).expect("read"), [1u8; 64]);
    }
    // fleet workers do not apply the radio options: refused, not ignored
    let worker = [
        "--file",
        "nats://127.0.0.1:1/S/C",
        "--output",
        "nats://127.0.0.1:1/x",
    ];
    for flag in [&["--dc-remove"][..], &["--center-freq", "1e6"]] {
        let out = run(&[&worker[..], flag].concat());
        assert_clean_error(&out, 2, &["--dc-remove/--center-freq", "fleet workers"]);
    }
    // stdin cannot carry a recording
    let out = run(&["--file", "-", "--input-format", "sigmf"]);
    assert_clean_error(&out, 2, &["stdin cannot carry"]);
    // --rate with a recording that gives its rate: refused, not ignored (helper-40); taken
    // from the command line where the recording gives none
    let rated = r#"{"global":{"core:datatype":"cu8","core:sample_rate":1000}}"#;
    std::fs::write(&meta, rated).expect("meta");
    std::fs::write(dir.path().join("r.sigmf-data"), [1u8; 64]).expect("data");
    let out = run(&["--file", name, "--frame", "4", "--rate", "2000"]);
    assert_clean_error(&out, 2, &["--rate 2000", name, "gives its own rate"]);
    std::fs::write(&meta, r#"{"global":{"core:datatype":"cu8"}}"#).expect("meta");
    let out = run(&[
        "--file", name, "--frame", "4", "--rate", "2000", "--format", "csv",
    ]);
    assert!(stdout_text(&out).starts_with("stream,frame,time_s,0.0,500.0,"));
    // a capture past the dataset's end (32 samples): one warning, the samples analysed
    let past = r#"{"global":{"core:datatype":"cu8"},"captures":[{"core:sample_start":0},{"core:sample_start":40}]}"#;
    std::fs::write(&meta, past).expect("meta");
    for range_read in ["1", "0"] {
        let out = fftd()
            .env("FFTD_RANGE_READ", range_read)
            .args([
                "--file", name, "--frame", "4", "--rate", "8", "--format", "csv",
            ])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", stderr_text(&out));
        assert_eq!(
            stdout_text(&out).lines().count(),
            1 + 8,
            "every frame's row"
        );
        let warned = "capture 1 starts at sample 40, past the end of";
        let err = stderr_text(&out);
        assert_eq!(err.matches(warned).count(), 1, "one warning: {err}");
    }
    // a dataset that ends inside a sample
    std::fs::write(&meta, r#"{"global":{"core:datatype":"ci16_le"}}"#).expect("meta");
    std::fs::write(dir.path().join("r.sigmf-data"), [1u8, 2, 3]).expect("data");
    let out = run(&["--file", name]);
    assert_clean_error(&out, 1, &["r.sigmf-data", "truncated"]);
}
