//! The OpenCL engine through the whole binary, on whatever OpenCL device is present (PoCL in CI):
//! `--device gpu` equals the CPU engine (`--scale complex` .npy files too), a fault injected
//! mid-stream loses nothing, `fftd check`
//! passes and fails as it should, `fftd devices` lists the device, with no OpenCL at all `auto`
//! starts fast with identical output while `--device gpu` is one clear error, and a `gpu` run
//! shows NVIDIA's driver one GPU only as an earlier run recorded.

use crate::common;

use common::*;
use std::path::Path;

fn rows(out: &std::process::Output) -> Vec<Vec<f64>> {
    assert!(out.status.success(), "{}", stderr_text(out));
    parse_rows(&stdout_text(out))
}

#[test]
fn gpu_route_equals_cpu_route_through_the_pipeline() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("x.f32");
    write_f32(&real, &noise(50_000, 21));
    let iq = dir.path().join("x.cf32");
    write_f32(&iq, &noise(2 * 20_000, 22));
    for (input, extra) in [
        (&real, vec!["--frame", "1024", "--hop", "512"]),
        (
            &real,
            vec!["--frame", "256", "--scale", "db", "--window", "flattop"],
        ),
        (
            &real,
            vec![
                "--frame",
                "4096",
                "--precision",
                "f64",
                "--scale",
                "density",
                "--rate",
                "48000",
            ],
        ),
        (
            &iq,
            vec!["--frame", "512", "--fftshift", "--scale", "power"],
        ),
    ] {
        let p = input.to_str().expect("utf8");
        let mut cpu_args = vec!["--file", p, "--device", "cpu"];
        cpu_args.extend(&extra);
        let mut gpu_args = vec!["--file", p, "--device", "gpu", "--batch", "16"];
        gpu_args.extend(&extra);
        let (cpu, gpu) = (rows(&run(&cpu_args)), rows(&run(&gpu_args)));
        assert_eq!(cpu.len(), gpu.len(), "{extra:?}");
        let db = extra.contains(&"db");
        let tol = if extra.contains(&"f64") { 1e-10 } else { 1e-4 };
        for (c, g) in cpu.iter().zip(&gpu) {
            let lin = |r: &Vec<f64>| -> Vec<f64> {
                r.iter()
                    .map(|v| if db { 10f64.powf(v / 20.0) } else { *v })
                    .collect()
            };
            let err = max_relative_error(&lin(g), &lin(c));
            assert!(err < tol, "{extra:?}: error {err:e}");
        }
    }
}

/// re, im of a `--scale complex` f32 .npy file (after its 128-byte header).
fn complex_npy(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).expect("npy");
    let header = String::from_utf8_lossy(&bytes[..128]).into_owned();
    assert!(header.contains("'descr': '<c8'"), "{header}");
    bytes[128..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
        .collect()
}

#[test]
fn gpu_route_equals_cpu_route_with_complex_scale() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("x.f32");
    write_f32(&real, &noise(50_000, 23));
    let iq = dir.path().join("x.cf32");
    write_f32(&iq, &noise(2 * 20_000, 24));
    for (input, extra, bins) in [
        (&real, vec!["--frame", "1024", "--hop", "512"], 513),
        (&real, vec!["--frame", "16384", "--window", "flattop"], 8193),
        (&iq, vec!["--frame", "512", "--fftshift"], 512),
        // not a power of two: the OpenCL engine's mixed-radix passes
        (&iq, vec!["--frame", "1000"], 1000),
    ] {
        let p = input.to_str().expect("utf8");
        let outputs = ["cpu", "gpu"].map(|device| {
            let npy = dir.path().join(format!("{device}.npy"));
            let fixed = [
                "--file",
                p,
                "--device",
                device,
                "--batch",
                "16",
                "--scale",
                "complex",
                "--format",
                "npy",
                "--output",
                npy.to_str().expect("utf8"),
            ];
            let out = run(&[&fixed[..], &extra[..]].concat());
            assert!(out.status.success(), "{extra:?}: {}", stderr_text(&out));
            complex_npy(&npy)
        });
        let [cpu, gpu] = &outputs;
        assert_eq!(cpu.len(), gpu.len(), "{extra:?}");
        for (c, g) in cpu.chunks(2 * bins).zip(gpu.chunks(2 * bins)) {
            let peak = c
                .chunks_exact(2)
                .map(|z| z[0].hypot(z[1]))
                .fold(0.0, f64::max);
            let worst = c
                .iter()
                .zip(g)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                worst <= 1e-5 * peak,
                "{extra:?}: {worst:e} of peak {peak:e}"
            );
        }
    }
    let p = real.to_str().expect("utf8");
    let out = run(&[
        "check", "--file", p, "--frame", "2048", "--scale", "complex",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(stdout_text(&out).contains("mismatches: 0 of"));
}

#[test]
fn a_fault_mid_stream_loses_no_frame() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(64 * 200 + 13, 5));
    let p = input.to_str().expect("utf8");
    let args = [
        "--file", p, "--frame", "64", "--batch", "8", "--format", "ndjson",
    ];
    let cpu = run(&[&args[..], &["--device", "cpu"]].concat());
    let faulty = fftd()
        .args(args)
        .args(["--device", "gpu", "--stats"])
        .env("FFTD_FAULT_AFTER_BATCHES", "3")
        .env("RUST_LOG", "fftd=warn")
        .output()
        .expect("fftd");
    assert!(faulty.status.success(), "{}", stderr_text(&faulty));
    let err = stderr_text(&faulty);
    assert!(err.contains("frames in 201, frames out 201"), "{err}");
    assert!(
        err.to_lowercase().contains("cpu"),
        "a warning names the fallback: {err}"
    );
    let parse = |t: &str| -> Vec<(u64, Vec<f64>)> {
        t.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("json");
                let bins = v["bins"]
                    .as_array()
                    .expect("bins")
                    .iter()
                    .map(|b| b.as_f64().expect("f64"))
                    .collect();
                (v["frame"].as_u64().expect("frame"), bins)
            })
            .collect()
    };
    let (want, got) = (parse(&stdout_text(&cpu)), parse(&stdout_text(&faulty)));
    assert_eq!(want.len(), got.len());
    for ((fw, w), (fg, g)) in want.iter().zip(&got) {
        assert_eq!(fw, fg, "frames in order, none lost or duplicated");
        assert!(max_relative_error(g, w) < 1e-4);
    }
}

#[test]
fn check_passes_on_agreement_and_rejects_bad_use() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input.txt");
    write_text_samples(&input, &noise(3000, 6));
    let p = input.to_str().expect("utf8");
    for extra in [
        vec!["--frame", "256"],
        vec!["--frame", "whole"],
        vec!["--frame", "1024", "--precision", "f64", "--scale", "db"],
    ] {
        let out = run(&[&["check", "--file", p][..], &extra[..]].concat());
        let text = stdout_text(&out);
        assert!(
            out.status.success(),
            "{extra:?}: {text}{}",
            stderr_text(&out)
        );
        assert!(text.contains("mismatches: 0 of"), "{text}");
        assert!(
            text.contains("max abs error") && text.contains("max rel error"),
            "{text}"
        );
    }
    // an impossible tolerance makes the same comparison fail with exit 1
    let out = run(&[
        "check",
        "--file",
        p,
        "--frame",
        "256",
        "--tolerance",
        "1e-30",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_text(&out));
    assert!(stdout_text(&out).contains("mismatches: "));
    assert!(stderr_text(&out).contains("check failed"));
    // every size runs on the OpenCL engine (a size it refused would be said plainly:
    // src/fft/compare.rs `a_size_the_device_refuses_is_nothing_to_compare`)
    let out = run(&["check", "--file", p, "--frame", "1000"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(stdout_text(&out).contains("mismatches: 0 of"));
    // an input that overflows f32 in the transform: said, not reported as a mismatch of 0
    let big = dir.path().join("big.txt");
    write_text_samples(&big, &[3e38; 64]);
    let big = big.to_str().expect("utf8");
    let out = run(&["check", "--file", big, "--frame", "8", "--window", "rect"]);
    assert_clean_error(&out, 1, &["not finite", "overflows f32", "--precision f64"]);
}

#[test]
fn devices_lists_the_opencl_device() {
    if !opencl_required() {
        return;
    }
    let out = run(&["devices"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    assert!(text.contains("opencl:0:0"), "{text}");
    assert!(
        text.contains("compute units") && text.contains("fp64"),
        "{text}"
    );
}

#[test]
fn without_opencl_auto_is_fast_and_gpu_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("no-vendors");
    std::fs::create_dir(&empty).expect("mkdir");
    let input = dir.path().join("input.txt");
    write_text_samples(&input, &noise(5000, 7));
    let p = input.to_str().expect("utf8");
    let cpu = run(&["--file", p, "--frame", "256", "--device", "cpu"]);
    let (auto, elapsed) = output_timed_from_main(
        fftd()
            .args(["--file", p, "--frame", "256"])
            .env("OCL_ICD_VENDORS", &empty)
            .env("FFTD_CACHE_DIR", dir.path().join("cache"))
            .stdin(std::process::Stdio::null()),
    );
    assert!(auto.status.success(), "{}", stderr_text(&auto));
    assert_eq!(auto.stdout, cpu.stdout, "identical output on the CPU");
    // a run of 5000 samples without OpenCL takes tens of milliseconds; one that waited for a
    // platform (ocl's 5 x 2 s retries) 10 s: 5 s tells them apart, timed from fftd's main (not
    // its start)
    assert!(elapsed.as_secs_f64() < 5.0, "took {elapsed:?}");
    for device in ["gpu", "opencl:0:0"] {
        let asked = fftd()
            .args(["--file", p, "--device", device])
            .env("OCL_ICD_VENDORS", &empty)
            .output()
            .expect("fftd");
        assert_clean_error(&asked, 1, &["OpenCL"]);
    }
    let devices = fftd()
        .args(["devices"])
        .env("OCL_ICD_VENDORS", &empty)
        .output()
        .expect("fftd");
    assert!(devices.status.success());
    assert!(
        stdout_text(&devices).to_lowercase().contains("no opencl"),
        "{}",
        stdout_text(&devices)
    );
}

/// `--average` on a device opened before the run: its warm-up builds the segment kernel with
/// the transform's (`worker::warm_up`), so no program is built in the pipeline, on a batch's
/// way (the first batch waited for it); the averaged rows equal the CPU route's.
#[test]
fn an_averaging_run_builds_its_programs_before_its_first_batch() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let x = dir.path().join("x.f32");
    write_f32(&x, &noise(1 << 16, 41));
    let p = x.to_str().expect("utf8");
    let args = ["--file", p, "--input-format", "f32", "--frame", "256"];
    let args = [&args[..], &["--average", "8"]].concat();
    let gpu = run(&[&args[..], &["--device", "gpu", "--stats"]].concat());
    let log = stderr_text(&gpu);
    let devices = log.lines().find(|l| l.starts_with("fftd devices:"));
    assert!(devices.is_some_and(|l| l.contains("opencl:")), "{log}");
    let in_pipeline = log
        .lines()
        .find(|l| l.starts_with("fftd set-up in the pipeline:"))
        .unwrap_or("");
    assert!(!in_pipeline.contains("program build"), "{log}");
    let flat = |out: &std::process::Output| rows(out).concat();
    let (got, want) = (flat(&gpu), flat(&run(&args)));
    assert_eq!(got.len(), want.len());
    let err = max_relative_error(&got, &want);
    assert!(err < 1e-4, "averaged rows: error {err:e}");
}

/// A cache folder in `dir` where an earlier run recorded the OpenCL device as a GPU
/// (`device-kinds.json`), so `--device gpu` starts PoCL in the background as it would a GPU.
fn cache_with_pocl_as_gpu(dir: &Path) -> std::path::PathBuf {
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    record_device_kinds(&cache, "gpu", true);
    cache
}

/// fftd with `args`, the cache folder `cache` and a debug log; it must succeed.
fn run_with_cache(cache: &Path, args: &[&str]) -> std::process::Output {
    let out = fftd()
        .args(args)
        .env("FFTD_CACHE_DIR", cache)
        .env("RUST_LOG", "fftd=debug")
        .output()
        .expect("run fftd");
    assert!(out.status.success(), "{}", stderr_text(&out));
    out
}

/// `--device gpu` with a device an earlier run recorded as a GPU (`device-kinds.json`, here
/// seeded for PoCL): the CPU engines start at once, with batches of their own size, and the
/// device's lane joins when it is ready. A short job ends without waiting for the start-up; a
/// long one is shared with the device. Either way every row is there and equals the CPU
/// route's (exactly where the CPU engines computed it all).
#[test]
fn a_device_started_in_the_background_never_holds_the_run() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache_with_pocl_as_gpu(dir.path());
    let run_in = |args: &[&str]| run_with_cache(&cache, args);
    // a short job: the CPU engines finish it, whether or not the device came up meanwhile
    let short = dir.path().join("short.f32");
    write_f32(&short, &noise(8192, 31));
    let p = short.to_str().expect("utf8");
    let common = ["--file", p, "--input-format", "f32", "--frame", "1024"];
    let cpu = run(&[&common[..], &["--device", "cpu"]].concat());
    let gpu = run_in(&[&common[..], &["--device", "gpu", "--stats"]].concat());
    let log = stderr_text(&gpu);
    if log.contains("fftd devices: cpu: 1 batches, 8 frames (100.0%)") {
        assert_eq!(stdout_text(&gpu), stdout_text(&cpu));
    }
    assert_eq!(rows(&gpu).len(), 8, "{log}");
    // a long job: the device joins and takes batches (tried with more overlap, so more work,
    // until it does: how soon it comes up depends on the machine's load)
    let long = dir.path().join("long.f32");
    write_f32(&long, &noise(1 << 22, 32));
    let p = long.to_str().expect("utf8");
    let joined = ["256", "64", "16", "4"].iter().any(|hop| {
        let args = [
            "--file",
            p,
            "--input-format",
            "f32",
            "--frame",
            "1024",
            "--hop",
            hop,
        ];
        let (g, c) = (dir.path().join("gpu.f32"), dir.path().join("cpu.f32"));
        let (go, co) = (g.to_str().expect("utf8"), c.to_str().expect("utf8"));
        let to = |o| ["--format", "f32", "--output", o];
        let gpu = run_in(&[&args[..], &["--device", "gpu", "--stats"], &to(go)].concat());
        run(&[&args[..], &["--device", "cpu"], &to(co)].concat());
        let (g, c) = (read_f32(&g), read_f32(&c));
        assert_eq!(g.len(), c.len(), "hop {hop}");
        let err = max_relative_error(&g, &c);
        assert!(err < 1e-4, "hop {hop}: error {err:e}");
        let log = stderr_text(&gpu);
        // the CPU lane that bridged the start-up finishes what was queued to it: handed on,
        // those oldest batches waited behind new ones and the sink held every later batch
        assert!(!log.contains("batch handed off"), "hop {hop}: {log}");
        let devices = log.lines().find(|l| l.starts_with("fftd devices:"));
        devices.expect("--stats").contains("opencl:")
    });
    assert!(joined, "the device never joined, even with hop 4");
}

/// `--device gpu` on a job too short for a device to pay (seeded as a GPU, as above): its
/// start-up is held back until the first batch is analysed, then not begun at all, since a
/// device would come up with too little work left to join. The CPU engines compute every row,
/// and no OpenCL program is built (the driver is never started).
#[test]
fn a_device_start_up_that_could_not_pay_is_not_begun() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache_with_pocl_as_gpu(dir.path());
    let input = dir.path().join("short.f32");
    write_f32(&input, &noise(1 << 16, 33));
    let p = input.to_str().expect("utf8");
    let common = [
        "--file",
        p,
        "--input-format",
        "f32",
        "--frame",
        "1024",
        "--hop",
        "256",
    ];
    let cpu = run(&[&common[..], &["--device", "cpu"]].concat());
    let gpu = run_with_cache(
        &cache,
        &[&common[..], &["--device", "gpu", "--stats"]].concat(),
    );
    let log = stderr_text(&gpu);
    assert_eq!(stdout_text(&gpu), stdout_text(&cpu), "{log}");
    // (7a6731f loaded the platform here: "fftd set-up in the pipeline: platform 0.076 s")
    assert!(!log.contains("platform"), "the driver never starts: {log}");
    assert!(!log.contains("built OpenCL program"), "{log}");
    assert!(!log.contains("opencl:"), "no device lane: {log}");
    // --stats says why the device named did no work (judged too short, or ended before its
    // first batch was back to judge it by)
    let note = "fftd device start-up: not begun: ";
    assert!(log.lines().any(|l| l.starts_with(note)), "{log}");
}

/// `--device gpu` with batches of 4096 frames (seeded as a GPU, as above) on a job one CPU
/// worker needs over a second for (hop 64 on 2^25 samples; at 2^23 the CPU engine now needs
/// only 0.36–0.40 s on an idle 2-core machine, so the start-up rightly did not pay there, and
/// the test failed on a fast or idle machine): its start-up begins. Judged
/// only by what was read (the readers first fill every free batch buffer), the job looked
/// nearly done after its first job was read (29–42 ms left; 0.76–1.76 s on the CPU engines
/// alone) and the start-up was never begun; the least time the CPU engines could still need,
/// from their first batch, says otherwise (`late_join::LateJoin::least_cpu_time_left`).
#[test]
fn a_device_start_up_is_not_turned_down_by_the_readers_running_ahead() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache_with_pocl_as_gpu(dir.path());
    let input = dir.path().join("long.f32");
    write_f32(&input, &noise(1 << 25, 36));
    let p = input.to_str().expect("utf8");
    let args = [
        "--file",
        p,
        "--input-format",
        "f32",
        "--frame",
        "4096",
        "--hop",
        "64",
        "--batch",
        "4096",
        "--workers",
        "1",
        "--format",
        "f32",
        "--output",
        "/dev/null",
        "--device",
        "gpu",
        "--stats",
    ];
    let log = stderr_text(&run_with_cache(&cache, &args));
    assert!(!log.contains("could not pay"), "{log}");
    let set_up = log
        .lines()
        .find(|l| l.starts_with("fftd set-up in the pipeline:"));
    assert!(
        set_up.is_some_and(|l| l.contains("platform")),
        "begun: {log}"
    );
}

/// The key fftd files what it found on this host's OpenCL drivers under (`kinds::environment`),
/// for a child run with the test's environment less `CUDA_VISIBLE_DEVICES` and
/// `ROCR_VISIBLE_DEVICES`.
fn driver_environment() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let vars = ["OCL_ICD_VENDORS", "OCL_ICD_FILENAMES"];
    let set: Vec<String> = (vars.iter())
        .filter_map(|v| std::env::var(v).ok().map(|value| format!("{v}={value}")))
        .collect();
    format!("{} {}", host.trim(), set.join(" "))
}

/// `gpu` and `auto` runs where an earlier run recorded several alike NVIDIA GPUs of which `gpu`
/// took the first (`gpu-view.json`, seeded here) show the driver that one alone
/// (`CUDA_VISIBLE_DEVICES=0`), and run; when the device a narrowed run then opens is not on
/// NVIDIA's platform (PoCL's here), the record says so (`refused`), and later runs show the
/// driver everything. On a host with NVIDIA's kernel driver its own list of GPUs decides with
/// the record: there only that every run works is checked.
#[test]
fn gpu_runs_show_the_driver_one_gpu_only_as_recorded_and_stop_where_that_finds_no_gpu() {
    if !opencl_required() {
        return;
    }
    let nvidia_host = Path::new("/proc/driver/nvidia/gpus").exists();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    // (recorded as no GPU: the device is opened before the run, as a named OpenCL device is)
    record_device_kinds(&cache, "gpu", false);
    let view = cache.join("gpu-view.json");
    let found = r#"{"shown":2,"alike":true,"gpu_is_first":true,"name":"NVIDIA Z999"}"#;
    let record = format!("{{{:?}:{found}}}", driver_environment());
    std::fs::write(&view, &record).expect("gpu view");
    let input = dir.path().join("in.f32");
    write_f32(&input, &noise(1 << 14, 34));
    let p = input.to_str().expect("utf8");
    let args = ["--file", p, "--input-format", "f32", "--frame", "1024"];
    let device_run = |device: &str| {
        let mut command = fftd();
        command.args(args).args(["--device", device]);
        command
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env_remove("ROCR_VISIBLE_DEVICES");
        let out = command
            .env("FFTD_CACHE_DIR", &cache)
            .env("RUST_LOG", "fftd=debug");
        let out = out.output().expect("run fftd");
        assert!(out.status.success(), "{}", stderr_text(&out));
        let log = stderr_text(&out);
        (
            rows(&out).len(),
            log.contains("CUDA_VISIBLE_DEVICES=0: the driver shows"),
            log,
        )
    };
    let cpu = rows(&run(&[&args[..], &["--device", "cpu"]].concat())).len();
    let (auto_rows, auto_narrowed, log) = device_run("auto");
    assert_eq!(auto_rows, cpu);
    assert!(auto_narrowed || nvidia_host, "{log}");
    std::fs::write(&view, &record).expect("gpu view"); // (auto's run refused it)
    let (gpu_rows, gpu_narrowed, log) = device_run("gpu");
    assert_eq!(gpu_rows, cpu);
    let kept = std::fs::read_to_string(&view).expect("gpu view");
    if !nvidia_host {
        assert!(gpu_narrowed, "{log}");
        assert!(kept.contains(r#""refused":true"#), "{kept}");
    }
    let (whole_rows, whole_narrowed, log) = device_run("gpu");
    assert_eq!(whole_rows, cpu);
    assert!(!whole_narrowed || nvidia_host, "{log}");
}

/// `auto` on a file job of a new shape runs the GPU alone, its CPU engines bridging the
/// start-up, and records both figures: the run's and the CPU engines' bridge (the whole run
/// when no GPU joined, as on PoCL, a CPU device that `auto` never joins). A machine where it
/// found no GPU-type device then starts no OpenCL for file jobs: the next run is the CPU alone.
#[test]
fn auto_learns_the_cpu_from_its_bridge_and_skips_opencl_without_a_gpu() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(1 << 18, 41));
    let p = input.to_str().expect("utf8");
    let auto_run = || {
        let args = ["--file", p, "--input-format", "f32", "--frame", "1024"];
        let out = fftd()
            .args(args)
            .args(["--hop", "256", "--output", "/dev/null"])
            .env("FFTD_CACHE_DIR", &cache)
            .output()
            .expect("run fftd");
        assert!(out.status.success(), "{}", stderr_text(&out));
    };
    let record = || -> serde_json::Value {
        let text = std::fs::read_to_string(cache.join("auto-end-to-end-v3.json")).expect("record");
        let book: serde_json::Value = serde_json::from_str(&text).expect("json");
        let jobs = book["jobs"].as_object().expect("jobs").clone();
        assert_eq!(jobs.len(), 1, "{book}");
        jobs.into_iter().next().expect("a job").1
    };
    let figures = |job: &serde_json::Value, way: &str| job[way].as_array().map_or(0, Vec::len);
    auto_run();
    let first = record();
    assert_eq!(figures(&first, "gpu_only"), 1, "{first}");
    assert_eq!(figures(&first, "cpu_bridge"), 1, "{first}");
    assert_eq!(figures(&first, "cpu_only"), 0, "{first}");
    // what the start-up found is saved by its own thread, which a short run does not wait for
    let Ok(found) = std::fs::read_to_string(cache.join("auto-gpus.json")) else {
        return;
    };
    if !found.contains("[false,") {
        return; // a GPU-type device is here: what follows is for machines without one
    }
    auto_run();
    let second = record();
    assert_eq!(figures(&second, "cpu_only"), 1, "{second}");
    assert_eq!(figures(&second, "gpu_only"), 1, "{second}");
}

/// The number in `text` right after `marker` (a `--stats` figure).
fn figure_after(text: &str, marker: &str) -> u64 {
    text.split(marker)
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure after {marker:?} in {text}"))
}

/// The values of an f64 npy file (real or complex), after its 128-byte header.
fn npy_f64(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).expect("npy");
    bytes[128..]
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect()
}

/// issue 41: an f64 run with f32 output on the device moves f32 both ways (`--stats` counts the
/// batches) and writes the CPU route's bytes, which are exactly the device's own f64 values (its
/// npy output) `as f32`; to a pipe its rows go out without a copy, into a file (placed rows)
/// they are copied as they are; csv in f64 still writes the device's f64 values.
#[test]
fn f64_runs_carry_f32_over_the_bus_and_write_the_same_bytes() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("x.f32");
    write_f32(&real, &noise(50_000, 31));
    let iq = dir.path().join("x.cf32");
    write_f32(&iq, &noise(2 * 20_000, 32));
    let (npy, placed) = (dir.path().join("g.npy"), dir.path().join("g.f32"));
    let (npy_path, placed_path) = (npy.to_str().expect("utf8"), placed.to_str().expect("utf8"));
    for (input, extra) in [
        (&real, vec!["--frame", "1024", "--hop", "256"]),
        (&real, vec!["--frame", "1000", "--scale", "db"]),
        (&iq, vec!["--frame", "512", "--scale", "complex"]),
    ] {
        let p = input.to_str().expect("utf8");
        let base = [
            &["--file", p, "--precision", "f64", "--batch", "8"][..],
            &extra,
        ]
        .concat();
        let with = |more: &[&str]| {
            let out = run(&[&base[..], more].concat());
            assert!(
                out.status.success(),
                "{extra:?} {more:?}: {}",
                stderr_text(&out)
            );
            out
        };
        let cpu = with(&["--device", "cpu", "--format", "f32"]);
        let gpu = with(&["--device", "gpu", "--format", "f32", "--stats"]);
        assert!(
            gpu.stdout == cpu.stdout,
            "{extra:?}: gpu and cpu bytes differ"
        );
        let stats = stderr_text(&gpu);
        assert!(figure_after(&stats, "f32 over the bus: ") > 0, "{stats}");
        assert!(figure_after(&stats, "samples up, ") > 0, "{stats}");
        assert!(
            figure_after(&stats, "encoders; ") > 0,
            "rows without a copy: {stats}"
        );
        with(&["--device", "gpu", "--format", "npy", "--output", npy_path]);
        let values = npy_f64(&npy);
        let narrowed: Vec<u8> = values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect();
        assert!(
            gpu.stdout == narrowed,
            "{extra:?}: not the device's f64 values as f32"
        );
        let into_file = with(&[
            "--device",
            "gpu",
            "--format",
            "f32",
            "--stats",
            "--output",
            placed_path,
        ]);
        let stats = stderr_text(&into_file);
        assert!(figure_after(&stats, "samples up, ") > 0, "{stats}");
        let file = std::fs::read(&placed).expect("placed output");
        assert!(file == cpu.stdout, "{extra:?}: placed rows differ");
        if extra.contains(&"complex") {
            continue;
        }
        // csv in f64: the device's f64 values, to the last bit (shortest round-trip text)
        let csv = with(&["--device", "gpu", "--format", "csv"]);
        let text = stdout_text(&csv);
        let from_csv: Vec<f64> = (text.lines().skip(1))
            .flat_map(|l| {
                l.split(',')
                    .skip(3)
                    .map(|v| v.parse::<f64>().expect("number"))
            })
            .collect();
        assert!(
            from_csv == values,
            "{extra:?}: csv values are not the device's f64 values"
        );
    }
}

/// issue 41: a device failing mid-stream in an f64 run with f32 output: the batches after the
/// fault are widened and computed on the lane's CPU engines, and every row's bytes are the CPU
/// route's.
#[test]
fn an_f64_fault_mid_stream_loses_no_frame_nor_byte() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(64 * 200 + 13, 33));
    let p = input.to_str().expect("utf8");
    let args = [
        "--file",
        p,
        "--frame",
        "64",
        "--batch",
        "8",
        "--precision",
        "f64",
        "--format",
        "f32",
    ];
    let cpu = run(&[&args[..], &["--device", "cpu"]].concat());
    assert!(cpu.status.success(), "{}", stderr_text(&cpu));
    let faulty = fftd()
        .args(args)
        .args(["--device", "gpu", "--stats"])
        .env("FFTD_FAULT_AFTER_BATCHES", "3")
        .output()
        .expect("fftd");
    assert!(faulty.status.success(), "{}", stderr_text(&faulty));
    let err = stderr_text(&faulty);
    assert!(err.contains("frames in 201, frames out 201"), "{err}");
    // rows narrowed on the device before the fault, samples widened on the host after it
    assert!(figure_after(&err, "f32 over the bus: ") > 0, "{err}");
    assert!(figure_after(&err, "samples up, ") > 0, "{err}");
    assert!(err.contains("frames on its CPU engines"), "{err}");
    assert!(faulty.stdout == cpu.stdout, "rows differ after the fault");
}
