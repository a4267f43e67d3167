//! Thousands of inputs with bounded resources: 3,000 files (raw, WAV and text) under a limit of
//! 64 open files are all analysed, and the run's peak memory and thread count stay bounded.
//! (One test per binary: the peak RSS of waited-for children is per process.)

mod common;

use common::*;
use std::path::Path;

fn write_inputs(dir: &Path, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let x = noise(2_000 + i % 7, i as u64 + 1);
            let path = match i % 3 {
                0 => dir.join(format!("f{i:05}.f32")),
                1 => dir.join(format!("f{i:05}.s16")),
                _ => dir.join(format!("f{i:05}.txt")),
            };
            match i % 3 {
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

#[test]
fn three_thousand_inputs_under_a_64_file_limit_with_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write_inputs(dir.path(), 3_000);
    let list = dir.path().join("args");
    let args: String = files.iter().map(|f| format!("--file\n{f}\n")).collect();
    std::fs::write(&list, args).expect("write args");
    // every frame of every input, as csv on stdout; the open-file limit set for fftd alone
    let script = format!(
        "ulimit -n 64 && tr '\\n' '\\0' < {} | xargs -0 {} --device cpu --frame 512 --hop 512 --format csv --stats",
        list.display(),
        env!("CARGO_BIN_EXE_fftd")
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("RUST_LOG", "fftd=warn")
        .output()
        .expect("sh runs");
    assert!(out.status.success(), "{}", stderr_text(&out));
    let rows = stdout_text(&out).lines().count() - 1; // the csv header
                                                      // 2000..2006 samples in frames of 512, the tail padded: 4 frames each
    assert_eq!(rows, 3_000 * 4, "{}", stderr_text(&out));
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
    assert!(peak_mib < 400, "peak RSS {peak_mib} MiB for 3,000 inputs");
    eprintln!("3,000 inputs: peak RSS {peak_mib} MiB");
}
