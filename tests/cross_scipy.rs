//! `--cross A,B` through the whole binary against scipy: csd, coherence and H1 (B/A, as
//! Pxy/Pxx from `scipy.signal.csd` and `welch`) equal scipy's with the same window, segment and
//! overlap (`detrend=False`) to 1e-6 relative, per `--average` group and over the whole input;
//! where coherence is above 0.99, H1 is a known filter's response (`scipy.signal.freqz`); csv
//! carries the same numbers under `csd_re_<Hz>` … headers.

use crate::common;

use common::*;

const CROSS_CHECK: &str = r#"
import sys, json, subprocess, numpy as np, scipy.signal as ss, scipy.io.wavfile as wf
fftd, wav = sys.argv[1], sys.argv[2]
fs, n, hop, group = 8000, 512, 256, 8
rng = np.random.default_rng(1)
x = rng.standard_normal(fs * 2) * 0.3
b, a = ss.butter(2, 1000, fs=fs)
y = ss.lfilter(b, a, x) + 1e-4 * rng.standard_normal(len(x))
data = np.stack([np.zeros(len(x)), x, y], axis=1).astype(np.float32)
wf.write(wav, fs, data)
x, y = data[:, 1].astype(float), data[:, 2].astype(float)
kw = dict(fs=fs, window='hann', nperseg=n, noverlap=n - hop, detrend=False)

def run(*extra):
    out = subprocess.run([fftd, '--file', wav, '--cross', '1,2', '--frame', str(n), '--hop', str(hop),
                          '--tail', 'drop', '--precision', 'f64', '--device', 'cpu', *extra],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout

def check(row, seg_x, seg_y, what):
    f, pxy = ss.csd(seg_x, seg_y, **kw)
    _, coh = ss.coherence(seg_x, seg_y, **kw)
    _, pxx = ss.welch(seg_x, **kw)
    h1 = pxy / pxx
    csd = np.array(row['csd'])
    got = csd[:, 0] + 1j * csd[:, 1]
    assert np.max(np.abs(got - pxy)) <= 1e-6 * np.max(np.abs(pxy)), what
    assert np.max(np.abs(np.array(row['coherence']) - coh)) <= 1e-6, what
    got_h1 = 10 ** (np.array(row['h1_db']) / 20) * np.exp(1j * np.radians(row['h1_deg']))
    assert np.max(np.abs(got_h1 - h1) / np.abs(h1)) <= 1e-6, what
    return f, coh, got_h1

frames = (len(x) - n) // hop + 1
rows = [json.loads(l) for l in run('--format', 'ndjson', '--average', str(group)).splitlines()]
assert len(rows) == -(-frames // group), (len(rows), frames)
for r, row in enumerate(rows):
    assert row['stream'] == 1 and row['frame'] == r, row['stream']
    last = min(frames, (r + 1) * group) - 1
    seg = slice(r * group * hop, last * hop + n)
    check(row, x[seg], y[seg], f'row {r}')
whole = [json.loads(l) for l in run('--format', 'ndjson').splitlines()]
assert len(whole) == 1
f, coh, h1 = check(whole[0], x[:(frames - 1) * hop + n], y[:(frames - 1) * hop + n], 'whole')
_, resp = ss.freqz(b, a, worN=f, fs=fs)
good = coh > 0.99
assert good.sum() > len(f) // 2, good.sum()
err_db = np.max(np.abs(20 * np.log10(np.abs(h1[good]) / np.abs(resp[good]))))
err_deg = np.max(np.abs(np.degrees(np.angle(h1[good] / resp[good]))))
assert err_db < 0.1 and err_deg < 1.0, (err_db, err_deg)
# csv: the same numbers, headed csd_re_<Hz>, csd_im_<Hz>, ..., coherence_<Hz>, h1_db_<Hz>, h1_deg_<Hz>
lines = run('--format', 'csv').splitlines()
header = lines[0].split(',')
bins = n // 2 + 1
assert header[:5] == ['stream', 'frame', 'time_s', 'csd_re_0.0', 'csd_im_0.0'], header[:5]
assert header[3 + 2 * bins] == 'coherence_0.0' and header[-1] == 'h1_deg_4000.0', header[-1]
values = np.array([float(v) for v in lines[1].split(',')[3:]])
assert len(values) == 5 * bins
assert np.allclose(values[2 * bins:3 * bins], whole[0]['coherence'], rtol=1e-12, atol=1e-15)
print('ok', len(rows), good.sum(), err_db, err_deg)
"#;

#[test]
fn csd_coherence_and_h1_equal_scipy_and_a_known_filter() {
    if !python_has("numpy, scipy.signal, scipy.io.wavfile") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("three.wav");
    let fftd = env!("CARGO_BIN_EXE_fftd");
    let said = run_python(
        CROSS_CHECK,
        &[fftd, wav.to_str().expect("utf-8")],
        "--cross",
    );
    assert!(said.starts_with("ok"), "{said}");
}

#[test]
fn cross_errors_name_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mono = dir.path().join("mono.f32");
    write_f32(&mono, &noise(4096, 3));
    let base = [
        "--file",
        mono.to_str().expect("utf-8"),
        "--input-format",
        "f32",
        "--frame",
        "256",
    ];
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--cross", "0,1"], &["--cross 0,1", "has no channel"]),
        // taken and doing nothing: refused before the input is read
        (
            &["--cross", "0,1", "--scale", "db"],
            &["--scale db with --cross 0,1", "own units"],
        ),
        (
            &["--cross", "0,1", "--average", "4", "--average-mode", "max"],
            &["--average-mode max with --cross 0,1"],
        ),
        (&["--cross", "0,0"], &["--cross 0,0"]),
        (
            &["--cross", "0,1", "--channel", "mix"],
            &["--cross 0,1", "--channel"],
        ),
        (
            &["--cross", "0,1", "--levels"],
            &["--cross 0,1", "--levels"],
        ),
    ];
    for (extra, needles) in cases {
        let mut args = base.to_vec();
        args.extend(extra);
        assert_clean_error(&run(&args), 2, needles);
    }
    // I/Q input: the message names the flag given, not every measurement flag
    let iq = [
        "--input-format",
        "cf32",
        "--channels",
        "2",
        "--cross",
        "0,1",
    ];
    let out = run(&[&base[..2], &iq[..]].concat());
    assert_clean_error(&out, 2, &["--cross:", "complex (I/Q)"]);
    assert!(
        !stderr_text(&out).contains("--levels"),
        "{}",
        stderr_text(&out)
    );
}

#[test]
fn the_pairs_rows_go_to_one_output_in_every_format_as_ndjson_gives_them() {
    // only channel A's stream writes rows (docs/measure.md): one output needs no --output-dir
    let dir = tempfile::tempdir().expect("tempdir");
    let stereo = dir.path().join("st.f32");
    write_f32(&stereo, &noise(6000, 5));
    let args = |format: &str, out: &std::path::Path| {
        let out = out.to_str().expect("utf-8").to_string();
        let file = stereo.to_str().expect("utf-8").to_string();
        [
            "--file",
            &file,
            "--input-format",
            "f32",
            "--channels",
            "2",
            "--frame",
            "64",
            "--cross",
            "0,1",
            "--device",
            "cpu",
            "--format",
            format,
            "--output",
            &out,
        ]
        .map(String::from)
    };
    let json = dir.path().join("c.ndjson");
    let done = run(&args("ndjson", &json).each_ref().map(String::as_str));
    assert!(done.status.success(), "{}", stderr_text(&done));
    let text = std::fs::read_to_string(&json).expect("ndjson");
    let row: serde_json::Value = serde_json::from_str(text.trim()).expect("one row");
    let number = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let mut want: Vec<f64> = (row["csd"].as_array().expect("csd").iter())
        .flat_map(|pair| pair.as_array().expect("re, im").iter().map(number))
        .collect();
    for key in ["coherence", "h1_db", "h1_deg"] {
        want.extend(row[key].as_array().expect(key).iter().map(number));
    }
    assert_eq!(want.len(), 5 * 33);
    let raw = dir.path().join("c.f32");
    let done = run(&args("f32", &raw).each_ref().map(String::as_str));
    assert!(done.status.success(), "f32: {}", stderr_text(&done));
    let got: Vec<f64> = (std::fs::read(&raw).expect("f32").chunks_exact(4))
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
        .collect();
    assert_eq!(got.len(), want.len(), "one row of 5 x 33 values");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1e-12),
            "value {k}: {g} against {w}"
        );
    }
    for format in ["text", "npy"] {
        let out = dir.path().join(format!("c.{format}"));
        let done = run(&args(format, &out).each_ref().map(String::as_str));
        assert!(done.status.success(), "{format}: {}", stderr_text(&done));
    }
    // --meta sizes the rows as they are: bins x 5 values (helper-54: it said 1 value per bin
    // of magnitude, and a reader reshaped the f32/npy rows wrongly)
    let meta = dir.path().join("c.json");
    let mut with_meta = args("f32", &raw).to_vec();
    with_meta.extend(["--meta".to_string(), meta.display().to_string()]);
    let done = run(&with_meta.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(done.status.success(), "meta: {}", stderr_text(&done));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    let per_row = doc["bins"].as_u64().expect("bins") * doc["values_per_bin"].as_u64().expect("n")
        + doc["row_measurements"].as_array().expect("names").len() as u64;
    assert_eq!(per_row as usize, want.len(), "{doc}");
    assert!(doc["scale"].is_null(), "{}", doc["scale"]);
    assert!(doc["row_layout"]
        .as_str()
        .expect("layout")
        .starts_with("csd re, im"));
}
