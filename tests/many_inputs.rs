//! Thousands of inputs with bounded resources: 10,000 small files (16-bit WAV, raw f32 and s16,
//! text) under a limit of 256 open files are all analysed, and the run's peak memory and thread
//! count stay bounded (issue 10: a dataset of 10,000 WAV files is an everyday job).
//! (One test per binary: the peak RSS of waited-for children is per process.)

mod common;

use common::*;
use std::path::Path;

fn write_inputs(dir: &Path, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let x = noise(2_000 + i % 7, i as u64 + 1);
            let path = match i % 4 {
                0 => dir.join(format!("f{i:05}.f32")),
                1 => dir.join(format!("f{i:05}.s16")),
                2 => dir.join(format!("f{i:05}.wav")),
                _ => dir.join(format!("f{i:05}.txt")),
            };
            match i % 4 {
                0 => std::fs::write(
                    &path,
                    x.iter()
                        .flat_map(|v| (*v as f32).to_le_bytes())
                        .collect::<Vec<u8>>(),
                ),
                1 => std::fs::write(
                    &path,
                    x.iter()
                        .flat_map(|v| ((v * 3e4) as i16).to_le_bytes())
                        .collect::<Vec<u8>>(),
                ),
                2 => write_wav_s16(&path, &x),
                _ => {
                    write_text_samples(&path, &x);
                    Ok(())
                }
            }
            .expect("write input");
            path.to_string_lossy().into_owned()
        })
        .collect()
}

/// A mono 16-bit PCM WAV file at 8 kHz (written by hand: 44 bytes of header, then the samples).
fn write_wav_s16(path: &Path, x: &[f64]) -> std::io::Result<()> {
    let data = (2 * x.len()) as u32;
    let mut bytes = Vec::with_capacity(44 + data as usize);
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + data).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    bytes.extend_from_slice(&16u32.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes()); // PCM
    bytes.extend_from_slice(&1u16.to_le_bytes()); // mono
    bytes.extend_from_slice(&8000u32.to_le_bytes());
    bytes.extend_from_slice(&16000u32.to_le_bytes()); // bytes per second
    bytes.extend_from_slice(&2u16.to_le_bytes()); // block align
    bytes.extend_from_slice(&16u16.to_le_bytes());
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&data.to_le_bytes());
    bytes.extend(x.iter().flat_map(|v| ((v * 3e4) as i16).to_le_bytes()));
    std::fs::write(path, bytes)
}

const INPUTS: usize = 10_000;

#[test]
fn ten_thousand_inputs_under_a_256_file_limit_with_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write_inputs(dir.path(), INPUTS);
    // every frame of every input, as csv on stdout, from one fftd process (its arguments passed
    // straight to exec, not through xargs, which would split them); the open-file limit for it alone
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_fftd"))
        .args([
            "--device", "cpu", "--frame", "512", "--hop", "512", "--format", "csv", "--stats",
            // (the raw and text inputs at the WAVs' rate: one csv header labels every stream)
            "--rate", "8000",
        ])
        .args(files.iter().flat_map(|f| ["--file", f.as_str()]))
        .env("RUST_LOG", "fftd=warn")
        .output()
        .expect("sh runs");
    assert!(out.status.success(), "{}", stderr_text(&out));
    let rows = stdout_text(&out).lines().count() - 1; // the csv header
                                                      // 2000..2006 samples in frames of 512, the tail padded: 4 frames each
    assert_eq!(rows, INPUTS * 4, "{}", stderr_text(&out));
    // a fixed pool of readers, not one thread per input
    let stages = stderr_text(&out);
    let readers: usize = stages
        .split(" readers)")
        .next()
        .and_then(|t| t.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .expect("--stats names the reader count");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(readers <= 2 * cores, "{readers} reader threads: {stages}");
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the zeroed, properly aligned buffer.
    let usage = unsafe {
        assert_eq!(
            libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()),
            0
        );
        usage.assume_init()
    };
    let peak_mib = usage.ru_maxrss / 1024; // KiB on Linux
    assert!(
        peak_mib < 400,
        "peak RSS {peak_mib} MiB for {INPUTS} inputs"
    );
    eprintln!("{INPUTS} inputs: peak RSS {peak_mib} MiB");
}
