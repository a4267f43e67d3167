//! The range readers (several threads per seekable input) give byte-identical output to the
//! sequential reader (`FFTD_RANGE_READ=0`) for every seekable input format (raw f32, s16, cf32;
//! WAV 16-bit, 24-bit, float), hop below, equal to and above the frame size, both tail rules,
//! every channel choice, `--duration`, `--max-frames`, batch lengths that split streams anywhere,
//! and f32 and f64 precision. Each stream goes to its own file (`--output-dir`), so the comparison
//! is per stream and exact.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

/// A WAV file: `channels` interleaved, `bits` 16 or 24 integer PCM, or 32 float.
fn write_wav(path: &Path, channels: u16, bits: u16, samples: &[f64]) {
    let float = bits == 32;
    let data: Vec<u8> = samples
        .iter()
        .flat_map(|&v| match bits {
            16 => ((v * 32767.0) as i16).to_le_bytes().to_vec(),
            24 => ((v * 8_388_607.0) as i32).to_le_bytes()[..3].to_vec(),
            _ => (v as f32).to_le_bytes().to_vec(),
        })
        .collect();
    let block = channels * bits / 8;
    let mut bytes = b"RIFF".to_vec();
    bytes.extend((36 + data.len() as u32).to_le_bytes());
    bytes.extend(b"WAVEfmt ");
    bytes.extend(16u32.to_le_bytes());
    bytes.extend((if float { 3u16 } else { 1u16 }).to_le_bytes());
    bytes.extend(channels.to_le_bytes());
    bytes.extend(16000u32.to_le_bytes());
    bytes.extend((16000 * block as u32).to_le_bytes());
    bytes.extend(block.to_le_bytes());
    bytes.extend(bits.to_le_bytes());
    bytes.extend(b"data");
    bytes.extend((data.len() as u32).to_le_bytes());
    bytes.extend(data);
    std::fs::write(path, bytes).expect("write wav");
}

fn write_s16(path: &Path, samples: &[f64]) {
    let bytes: Vec<u8> = samples
        .iter()
        .flat_map(|v| ((v * 32767.0) as i16).to_le_bytes())
        .collect();
    std::fs::write(path, bytes).expect("write s16");
}

/// The inputs, with the flags each needs.
fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<&'static str>)> {
    let mono = noise(20_011, 1);
    let three = noise(3 * 7_001, 2);
    let stereo = noise(2 * 9_003, 3);
    let files: [(&str, Vec<&'static str>); 7] = [
        ("mono.f32", vec![]),
        ("three.f32", vec!["--channels", "3"]),
        ("mono.s16", vec![]),
        ("iq.cf32", vec![]),
        ("stereo16.wav", vec![]),
        ("three24.wav", vec![]),
        ("stereo_float.wav", vec![]),
    ];
    write_f32(&dir.join("mono.f32"), &mono);
    write_f32(&dir.join("three.f32"), &three);
    write_s16(&dir.join("mono.s16"), &mono);
    write_f32(&dir.join("iq.cf32"), &stereo);
    write_wav(&dir.join("stereo16.wav"), 2, 16, &stereo);
    write_wav(&dir.join("three24.wav"), 3, 24, &three);
    write_wav(&dir.join("stereo_float.wav"), 2, 32, &stereo);
    files
        .into_iter()
        .map(|(name, flags)| (dir.join(name), flags))
        .collect()
}

/// Runs fftd with each stream into its own file under a fresh folder; returns the files' bytes
/// by name.
fn outputs(dir: &Path, tag: &str, range: bool, args: &[&str]) -> Vec<(String, Vec<u8>)> {
    let out = dir.join(tag);
    std::fs::create_dir_all(&out).expect("mkdir");
    let result = fftd()
        .env("FFTD_RANGE_READ", if range { "1" } else { "0" })
        .args([
            "--device",
            "cpu",
            "--output-dir",
            out.to_str().expect("utf8"),
        ])
        .args(args)
        .output()
        .expect("fftd runs");
    assert!(
        result.status.success(),
        "{args:?}: {}",
        stderr_text(&result)
    );
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&out)
        .expect("read dir")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read output"))
        })
        .collect();
    files.sort();
    std::fs::remove_dir_all(&out).expect("clean");
    files
}

#[test]
fn range_readers_give_the_sequential_readers_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let framings: &[&[&str]] = &[
        &["--frame", "1024"],
        &["--frame", "1000", "--hop", "333", "--batch", "7"],
        &["--frame", "256", "--hop", "700", "--tail", "drop"],
        &["--frame", "256", "--hop", "700", "--batch", "1"],
        &[
            "--frame", "512", "--hop", "100", "--tail", "drop", "--batch", "3",
        ],
        &["--frame", "4096", "--hop", "4096", "--max-frames", "3"],
        &[
            "--frame",
            "300",
            "--hop",
            "150",
            "--duration",
            "0.37",
            "--rate",
            "8000",
        ],
        &[
            "--frame",
            "64",
            "--hop",
            "64",
            "--precision",
            "f64",
            "--batch",
            "5",
        ],
        &["--frame", "30000"],
        // f64 frames that overlap: raw f32 samples widened in place (issue 23)
        &[
            "--frame",
            "256",
            "--hop",
            "100",
            "--precision",
            "f64",
            "--batch",
            "4",
        ],
    ];
    let channels: &[&[&str]] = &[&[], &["--channel", "all"], &["--channel", "1"]];
    let mut compared = 0;
    for (path, flags) in inputs(d) {
        for framing in framings {
            for channel in channels {
                let multi = flags.contains(&"3") || !path.to_string_lossy().contains("mono");
                let complex = path.extension().is_some_and(|e| e == "cf32");
                if !channel.is_empty() && (!multi || complex) {
                    continue; // channel choices need several channels
                }
                let mut args = vec!["--file", path.to_str().expect("utf8"), "--format", "f32"];
                args.extend(flags.iter().copied());
                // (a WAV's header gives its rate: --rate is for the raw files)
                let wav = path.extension().is_some_and(|e| e == "wav");
                let rate_at = framing.iter().position(|a| *a == "--rate");
                let own_rate = |i: &usize| wav && rate_at.is_some_and(|r| *i == r || *i == r + 1);
                let kept = framing.iter().enumerate().filter(|(i, _)| !own_rate(i));
                args.extend(kept.map(|(_, a)| *a));
                args.extend(channel.iter().copied());
                let sequential = outputs(d, "seq", false, &args);
                let ranged = outputs(d, "range", true, &args);
                assert!(!sequential.is_empty());
                assert_eq!(sequential.len(), ranged.len(), "{args:?}");
                for (a, b) in sequential.iter().zip(&ranged) {
                    assert_eq!(a.0, b.0, "{args:?}");
                    assert!(!a.1.is_empty(), "{args:?}: {} is empty", a.0);
                    assert!(a.1 == b.1, "{args:?}: {} differs", a.0);
                }
                compared += 1;
            }
        }
    }
    assert!(compared > 80, "only {compared} cases compared");
}

/// Several inputs at once, some range-read and some sequential (text), each stream to its own
/// file: every stream's output equals the sequential run's.
#[test]
fn mixed_inputs_keep_every_stream_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut args: Vec<String> = Vec::new();
    for i in 0..12 {
        let x = noise(9_000 + 101 * i, 10 + i as u64);
        let path = if i % 3 == 0 {
            let p = d.join(format!("in{i}.txt"));
            write_text_samples(&p, &x);
            p
        } else {
            let p = d.join(format!("in{i}.f32"));
            write_f32(&p, &x);
            p
        };
        args.extend(["--file".to_string(), path.to_string_lossy().into_owned()]);
    }
    args.extend(
        [
            "--frame",
            "512",
            "--hop",
            "128",
            "--batch",
            "3",
            "--format",
            "f32",
            "--workers",
            "4",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sequential = outputs(d, "seq", false, &args);
    let ranged = outputs(d, "range", true, &args);
    assert_eq!(sequential.len(), 12);
    assert!(sequential == ranged, "per-stream outputs differ");
}

/// A NaN in a range-read file (in place or converted) is the same one-line error as sequentially.
#[test]
fn a_bad_value_is_named_as_the_sequential_reader_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut x = noise(50_000, 7);
    x[31_337] = f64::NAN;
    let path = dir.path().join("nan.f32");
    write_f32(&path, &x);
    let p = path.to_str().expect("utf8");
    for framing in [
        &["--frame", "1000"][..],
        &["--frame", "1000", "--hop", "250"],
    ] {
        let args = [&["--device", "cpu", "--file", p][..], framing].concat();
        let ranged = fftd().args(&args).output().expect("runs");
        let sequential = fftd()
            .env("FFTD_RANGE_READ", "0")
            .args(&args)
            .output()
            .expect("runs");
        assert_clean_error(&ranged, 1, &["nan.f32", "byte offset 125348", "NaN"]);
        assert_eq!(stderr_text(&ranged), stderr_text(&sequential));
    }
}
