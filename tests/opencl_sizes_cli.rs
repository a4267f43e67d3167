//! Frame sizes that are not powers of two through the whole binary on the OpenCL device (PoCL
//! in CI): `fftd check` finds no mismatch against the CPU engine at mixed-radix, odd and prime
//! sizes (f32 and f64, real and complex, several scales); `--device gpu` runs such frames on the
//! device itself (`--stats` names the device with all the frames) with the CPU engine's values;
//! mel bands and `--average` at such sizes equal the CPU engine's; `fftd bench --sizes` times them.

use crate::common;

use common::*;

#[test]
fn check_finds_no_mismatch_at_other_sizes() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("x.f32");
    write_f32(&real, &noise(100_000, 31));
    let iq = dir.path().join("x.cf32");
    write_f32(&iq, &noise(2 * 30_000, 32));
    let (real, iq) = (real.to_str().expect("utf8"), iq.to_str().expect("utf8"));
    for (input, extra) in [
        (real, vec!["--frame", "1000"]),
        (real, vec!["--frame", "44100", "--scale", "db"]),
        (
            real,
            vec![
                "--frame", "105", "--scale", "spectrum", "--window", "blackman",
            ],
        ),
        (real, vec!["--frame", "1009", "--precision", "f64"]),
        (
            real,
            vec!["--frame", "2400", "--hop", "600", "--scale", "complex"],
        ),
        (iq, vec!["--frame", "960", "--scale", "power"]),
        (
            iq,
            vec![
                "--frame",
                "2018",
                "--precision",
                "f64",
                "--scale",
                "density",
            ],
        ),
        (
            iq,
            vec!["--frame", "97", "--window", "flattop", "--scale", "complex"],
        ),
    ] {
        let out = run(&[&["check", "--file", input][..], &extra[..]].concat());
        assert!(out.status.success(), "{extra:?}: {}", stderr_text(&out));
        let text = stdout_text(&out);
        assert!(text.contains("mismatches: 0 of"), "{extra:?}: {text}");
        assert!(text.contains("opencl:"), "{extra:?}: {text}");
    }
}

#[test]
fn gpu_device_runs_other_sizes_itself() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("x.f32");
    write_f32(&real, &noise(48_000, 33));
    let p = real.to_str().expect("utf8");
    for frame in ["2400", "1009", "7"] {
        let args = |device| vec!["--file", p, "--frame", frame, "--device", device];
        let cpu = run(&args("cpu"));
        let gpu = run(&[&args("gpu")[..], &["--stats"]].concat());
        assert!(gpu.status.success(), "{frame}: {}", stderr_text(&gpu));
        let stats = stderr_text(&gpu);
        let device_line = stats
            .lines()
            .find(|l| l.starts_with("fftd devices:"))
            .unwrap_or_else(|| panic!("{frame}: no devices line in {stats}"));
        assert!(
            device_line.contains("opencl:") && device_line.contains("(100.0%)"),
            "{frame}: {device_line}"
        );
        let (c, g) = (
            parse_rows(&stdout_text(&cpu)),
            parse_rows(&stdout_text(&gpu)),
        );
        assert_eq!(c.len(), g.len(), "{frame}");
        for (c, g) in c.iter().zip(&g) {
            let err = max_relative_error(g, c);
            assert!(err < 1e-4, "{frame}: error {err:e}");
        }
    }
}

#[test]
fn bench_times_other_sizes_on_the_device() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("b.csv");
    let out = run(&[
        "bench",
        "--device",
        "gpu",
        "--sizes",
        "1000,1009,105",
        "--batch",
        "8",
        "--reps",
        "1",
        "--csv",
        csv.to_str().expect("utf8"),
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let text = std::fs::read_to_string(&csv).expect("csv");
    for n in ["1000", "1009", "105"] {
        let row = text
            .lines()
            .find(|l| l.split(',').next() == Some(n))
            .unwrap_or_else(|| panic!("no row for {n}: {text}"));
        // n, frames, precision, kind, cpu µs, opencl µs, ...: the device timed every size
        let opencl_us: f64 = row
            .split(',')
            .nth(5)
            .and_then(|v| v.parse().ok())
            .expect("µs");
        assert!(opencl_us > 0.0, "{row}");
    }
}

#[test]
fn bands_and_average_at_other_sizes_equal_the_cpu() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("x.f32");
    write_f32(&real, &noise(60_000, 34));
    let p = real.to_str().expect("utf8");
    // 4410 = 2·3²·5·7² (mixed radix), 2018 = 2·1009 (Bluestein): mel bands summed and runs of
    // four frames averaged on the device, overlapping frames formed there
    for (frame, hop) in [("4410", "2205"), ("2018", "1009")] {
        let args = |device| {
            vec![
                "--file",
                p,
                "--frame",
                frame,
                "--hop",
                hop,
                "--rate",
                "44100",
                "--bands",
                "mel:40",
                "--average",
                "4",
                "--device",
                device,
            ]
        };
        let (cpu, gpu) = (run(&args("cpu")), run(&args("gpu")));
        assert!(gpu.status.success(), "{frame}: {}", stderr_text(&gpu));
        let (c, g) = (
            parse_rows(&stdout_text(&cpu)),
            parse_rows(&stdout_text(&gpu)),
        );
        assert!(!c.is_empty() && c.len() == g.len(), "{frame}");
        for (c, g) in c.iter().zip(&g) {
            let err = max_relative_error(g, c);
            assert!(err < 1e-4, "{frame}: error {err:e}");
        }
    }
}
