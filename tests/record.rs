//! `--record-on-alert DIR --pre --post` (issue 27): each recording equals the input's slice from
//! `pre` before the alert's start to `post` after its end, sample for sample; an alert that starts
//! again inside the post-roll extends the same file; I/Q input is recorded as SigMF; a recording
//! the disk cannot take keeps the whole frames that fit.

use crate::common;

use common::{assert_clean_error, run, write_f32};
use std::path::{Path, PathBuf};

const RATE: f64 = 8000.0;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn recordings(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    v.sort();
    v
}

/// The float samples of a 32-bit float WAV written by fftd (44-byte header), and its rate.
fn read_wav(path: &Path) -> (u32, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..4], b"RIFF");
    assert_eq!(&bytes[8..16], b"WAVEfmt ");
    assert_eq!(u16::from_le_bytes([bytes[20], bytes[21]]), 3, "IEEE float");
    let rate = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
    let data = u32::from_le_bytes(bytes[40..44].try_into().unwrap()) as usize;
    assert_eq!(bytes.len(), 44 + data);
    let samples = bytes[44..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (rate, samples)
}

fn signal(bursts: &[(f64, f64)], seconds: f64) -> Vec<f64> {
    let mut state = 12345u64;
    (0..(RATE * seconds) as usize)
        .map(|i| {
            let t = i as f64 / RATE;
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = ((state >> 40) as f64 / (1u64 << 24) as f64 - 0.5) * 1e-3;
            let on = bursts.iter().any(|&(a, b)| t >= a && t < b);
            noise
                + if on {
                    (2.0 * std::f64::consts::PI * 1000.0 * t).sin()
                } else {
                    0.0
                }
        })
        .collect()
}

/// Runs `x` (at `RATE`, frame 400) with a rule on 900–1100 Hz recording into a new folder, 250
/// ms before and 750 ms after each alert: the scratch folder, the recordings' folder and the run.
fn record_hum(x: &[f64]) -> (tempfile::TempDir, PathBuf, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, x);
    let rec = dir.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    let rate = RATE.to_string();
    let out = run(&[
        "--file",
        s(&input),
        "--rate",
        &rate,
        "--frame",
        "400",
        "--output",
        "/dev/null",
        "--alert",
        "name=hum,band=900-1100,above=-20",
        "--record-on-alert",
        s(&rec),
        "--pre",
        "250ms",
        "--post",
        "750ms",
    ]);
    assert!(out.status.success(), "{out:?}");
    (dir, rec, out)
}

#[test]
fn recordings_equal_the_input_slices_and_a_retrigger_extends_the_file() {
    // bursts on whole frames (frame 400 = 50 ms): alerts start and end on those rows
    let x = signal(&[(1.0, 1.5), (2.0, 2.5), (4.0, 4.5)], 6.0);
    let (_dir, rec, _) = record_hum(&x);
    let files = recordings(&rec, ".wav");
    // the second burst starts inside the first's post-roll (1.5 s + 0.75 s): one file for both
    assert_eq!(files.len(), 2, "{files:?}");
    let as_f32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    for (file, (from, to)) in files.iter().zip([(0.75, 3.25), (3.75, 5.25)]) {
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(name.ends_with("_hum_s0.wav"), "{name}");
        let (rate, got) = read_wav(file);
        assert_eq!(rate, 8000);
        let (a, b) = ((from * RATE) as usize, (to * RATE) as usize);
        assert_eq!(got.len(), b - a, "{name}");
        assert!(
            got == as_f32[a..b],
            "{name} is the input's samples {a}..{b}"
        );
    }
}

#[test]
fn a_file_read_far_ahead_of_the_alerts_is_recorded_whole_to_its_end() {
    // a reader of a file runs ahead of the alerts by what the pipeline holds in flight (far more
    // than --pre, --post and ten seconds at 8 kHz): the pre-roll must still be there, and an alert
    // still on when the input ends is recorded to the input's last sample
    let seconds = 60.0;
    let x = signal(&[(40.0, 40.5), (55.0, seconds)], seconds);
    let (_dir, rec, out) = record_hum(&x);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("WARN"), "{err}");
    let files = recordings(&rec, ".wav");
    assert_eq!(files.len(), 2, "{files:?}");
    let as_f32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    for (file, (from, to)) in files.iter().zip([(39.75, 41.25), (54.75, seconds)]) {
        let (_, got) = read_wav(file);
        let (a, b) = ((from * RATE) as usize, (to * RATE) as usize);
        assert_eq!(got.len(), b - a, "{}", file.display());
        assert!(
            got == as_f32[a..b],
            "{} is samples {a}..{b}",
            file.display()
        );
    }
}

#[test]
fn a_recording_that_cannot_be_written_fails_the_run_in_one_line() {
    // files limited in size (SIGXFSZ ignored, so a write past it fails with EFBIG): the
    // recording of an alert on all run long outgrows it, on the reader's side of the ring (60 s
    // into 512 KiB), or at its last flush (2 s into 60 KiB: helper-43, the header was left zero)
    for (seconds, limit_kib) in [(60.0, 512), (2.0, 60)] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("x.f32");
        let x = signal(&[(0.0, seconds)], seconds);
        write_f32(&input, &x);
        let rec = dir.path().join("rec");
        std::fs::create_dir(&rec).unwrap();
        let fftd = common::fftd().get_program().to_owned();
        let limit = format!("ulimit -f {limit_kib}; trap '' XFSZ; exec \"$0\" \"$@\"");
        let out = std::process::Command::new("bash")
            .env("RUST_LOG", "fftd=warn")
            .args(["-c", &limit])
            .arg(fftd)
            .args(["--file", s(&input), "--rate", "8000", "--frame", "400"])
            .args(["--output", "/dev/null"])
            .args(["--alert", "name=hum,band=900-1100,above=-20"])
            .args(["--record-on-alert", s(&rec)])
            .output()
            .expect("bash runs");
        let needles = [
            "cannot write to --record-on-alert",
            "_hum_s0.wav",
            "File too large",
        ];
        assert_clean_error(&out, 1, &needles);
        // the recording keeps the whole sample frames that fit, with a header that counts them
        let files = recordings(&rec, ".wav");
        assert_eq!(files.len(), 1, "{files:?}");
        let (rate, got) = read_wav(&files[0]);
        assert_eq!(rate, 8000);
        assert_eq!(
            got.len(),
            (limit_kib * 1024 - 44) / 4,
            "every whole frame that fits"
        );
        assert!(got.iter().zip(&x).all(|(g, w)| *g == *w as f32));
    }
}

#[test]
fn iq_input_is_recorded_as_sigmf() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.cf32");
    let n = (RATE * 2.0) as usize;
    let mut iq = Vec::with_capacity(2 * n);
    for i in 0..n {
        let t = i as f64 / RATE;
        let on = (0.5..1.0).contains(&t);
        let phase = 2.0 * std::f64::consts::PI * 1000.0 * t;
        iq.extend_from_slice(&if on {
            [phase.cos(), phase.sin()]
        } else {
            [0.0, 0.0]
        });
    }
    write_f32(&input, &iq);
    let rec = dir.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    let out = run(&[
        "--file",
        s(&input),
        "--rate",
        "8000",
        "--frame",
        "400",
        "--output",
        "/dev/null",
        "--alert",
        "name=carrier,band=900-1100,above=-20",
        "--record-on-alert",
        s(&rec),
        "--pre",
        "100ms",
        "--post",
        "100ms",
    ]);
    assert!(out.status.success(), "{out:?}");
    let data = recordings(&rec, ".sigmf-data");
    assert_eq!(data.len(), 1, "{data:?}");
    let meta_path = PathBuf::from(
        data[0]
            .to_string_lossy()
            .replace("sigmf-data", "sigmf-meta"),
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(meta_path).unwrap()).unwrap();
    assert_eq!(meta["global"]["core:datatype"], "cf32_le");
    assert_eq!(meta["global"]["core:sample_rate"], 8000.0);
    let got = std::fs::read(&data[0]).unwrap();
    let want: Vec<u8> = iq[(0.4 * RATE) as usize * 2..(1.1 * RATE) as usize * 2]
        .iter()
        .flat_map(|&v| (v as f32).to_le_bytes())
        .collect();
    assert!(got == want, "{} bytes, {} expected", got.len(), want.len());
}

#[test]
fn recording_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &[0.0; 1024]);
    let base = ["--file", s(&input), "--output", "/dev/null"];
    let rule = ["--alert", "name=a,band=1-2,above=0"];
    let out = run(&[&base[..], &["--record-on-alert", s(dir.path())]].concat());
    assert_clean_error(&out, 2, &["--record-on-alert", "--alert"]);
    let out = run(&[&base[..], &rule, &["--record-on-alert", "/no/such/dir"]].concat());
    assert_clean_error(&out, 2, &["/no/such/dir", "no such directory"]);
    let out = run(&[&base[..], &rule, &["--record-on-alert", s(&input)]].concat());
    assert_clean_error(&out, 2, &["x.f32: not a directory"]);
    // a folder that takes no files is found before the run (helper-39: at the first alert),
    // naming --record-on-alert
    let always = ["--rate", "8000", "--alert", "name=a,band=0-4000,below=0"];
    let out = run(&[&base[..], &always, &["--record-on-alert", "/proc"]].concat());
    assert_clean_error(
        &out,
        2,
        &["--record-on-alert /proc: cannot create files there"],
    );
    let out = run(&[
        &base[..],
        &rule,
        &["--record-on-alert", s(dir.path()), "--pre", "3"],
    ]
    .concat());
    assert_clean_error(&out, 2, &["--pre 3", "duration"]);
    let out = run(&[&base[..], &["--post", "1s"]].concat());
    assert_clean_error(&out, 2, &["--record-on-alert"]);
    // a pre-roll no machine holds: two hours at 1 GHz
    let wide = ["--alert", "name=a,band=0-1e8,above=0", "--rate", "1e9"];
    let roll = [
        "--record-on-alert",
        s(dir.path()),
        "--pre",
        "1h",
        "--post",
        "1h",
    ];
    let out = run(&[&base[..], &wide, &roll].concat());
    assert_clean_error(&out, 2, &["--pre 3600 s", "GiB of memory", "shorten"]);
    // a rate a WAV header cannot hold (helper-42: 0.4 Hz was written as 0, 8000.5 as 8001)
    for rate in ["0.4", "8000.5"] {
        let odd = ["--rate", rate, "--alert", "name=a,band=0-0.1,below=0"];
        let out = run(&[&base[..], &odd, &["--record-on-alert", s(dir.path())]].concat());
        let needle = format!("x.f32 at {rate} Hz, 1 channel(s): a WAV recording holds");
        assert_clean_error(&out, 2, &[&needle]);
    }
}
