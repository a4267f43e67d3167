//! Issue 32: `--stats` accounts for the whole run and names its bound; `--trace FILE` writes a
//! timeline in the Chrome trace-event format. On the CPU route and on OpenCL (PoCL in CI):
//! each thread kind's shares add up to 100 %, a slow pipe consumer makes `sink` the bound, a
//! trickling input makes `read` the bound, a trace is one JSON document holding a span of every
//! stage for every batch, each thread's spans nested, and an unwritable `--trace` path fails
//! before the run.

use crate::common;

use common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const STAGES: [&str; 12] = [
    "start-up", "read", "decode", "frame", "dispatch", "upload", "device", "download", "fft",
    "encode", "sink", "teardown",
];

/// The `fftd thread` lines of a `--stats` report: (kind, sum of its shares in %).
fn thread_shares(err: &str) -> Vec<(String, f64)> {
    err.lines()
        .filter_map(|l| l.strip_prefix("fftd thread "))
        .map(|l| {
            let (kind, shares) = l.split_once("): ").expect("kind (threads): shares");
            let sum = shares
                .split(", ")
                .map(|part| {
                    let pct = part.rsplit(' ').next().expect("a share");
                    pct.trim_end_matches('%').parse::<f64>().expect("a number")
                })
                .sum();
            (kind.to_string(), sum)
        })
        .collect()
}

/// The stage named by the last line, `fftd bound: STAGE (NN% busy)`, and its share.
fn bound(err: &str) -> (String, f64) {
    let last = err.trim_end().lines().last().unwrap_or_default();
    let rest = last
        .strip_prefix("fftd bound: ")
        .unwrap_or_else(|| panic!("last line is not the bound: {err}"));
    let (stage, busy) = rest.split_once(" (").expect("STAGE (NN% busy)");
    let busy = busy.trim_end_matches("% busy)").parse().expect("a share");
    assert!(STAGES.contains(&stage), "unknown stage {stage}: {err}");
    (stage.to_string(), busy)
}

/// Asserts a `--stats` report accounts for every thread kind (shares 100 % ± 5 %) and the wall.
fn assert_accounted(err: &str, kinds: &[&str]) {
    let shares = thread_shares(err);
    for kind in kinds {
        assert!(
            shares.iter().any(|(k, _)| k.starts_with(kind)),
            "no line for {kind}: {err}"
        );
    }
    for (kind, sum) in &shares {
        assert!((sum - 100.0).abs() <= 5.0, "{kind} sums to {sum}%: {err}");
    }
    let time = err
        .lines()
        .find(|l| l.starts_with("fftd time: wall "))
        .unwrap_or_else(|| panic!("no time line: {err}"));
    assert!(
        time.contains("start-up") && time.contains("teardown"),
        "{time}"
    );
    bound(err);
}

fn input(dir: &Path, samples: usize) -> std::path::PathBuf {
    let path = dir.join("x.f32");
    write_f32(&path, &noise(samples, 32));
    path
}

#[test]
fn every_thread_kinds_time_adds_up_on_the_cpu_route() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = input(dir.path(), 200_000);
    let x = x.to_str().expect("utf-8");
    let out_file = dir.path().join("out.f32");
    let out_file = out_file.to_str().expect("utf-8");
    let base = ["--input-format", "f32", "--rate", "8000", "--frame", "512"];
    // a seekable file (range readers) and the same through stdin (reader, batcher)
    let ranged = run(&[&["--file", x, "--stats", "--output", out_file][..], &base].concat());
    assert!(ranged.status.success(), "{}", stderr_text(&ranged));
    let kinds = ["readers", "fft workers", "encoders", "sink"];
    assert_accounted(&stderr_text(&ranged), &kinds);
    let piped = fftd()
        .args([
            "--file", "-", "--stats", "--device", "cpu", "--output", out_file,
        ])
        .args(base)
        .stdin(std::fs::File::open(x).expect("input"))
        .output()
        .expect("fftd runs");
    assert!(piped.status.success(), "{}", stderr_text(&piped));
    let err = stderr_text(&piped);
    assert_accounted(
        &err,
        &["readers", "dispatch", "fft workers", "encoders", "sink"],
    );
    // the lines tests and benches read before are still there, first
    assert!(err.starts_with("fftd stats: frames in "), "{err}");
    assert!(err.contains("\nfftd stages: readers waited"), "{err}");
}

#[test]
fn a_slow_pipe_consumer_makes_the_sink_the_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = input(dir.path(), 150_000); // about 600 kB of spectra
    let mut run = fftd()
        .args([
            "--file",
            x.to_str().expect("utf-8"),
            "--input-format",
            "f32",
        ])
        .args(["--rate", "8000", "--frame", "512", "--format", "f32"])
        .args(["--stats", "--device", "cpu"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd starts");
    let spectra = run.stdout.take().expect("stdout");
    // 32 kB every 50 ms: about 1 s for the whole output
    let slow = "import sys, time\nwhile sys.stdin.buffer.read(32768): time.sleep(0.05)\n";
    let consumer = Command::new(python())
        .args(["-c", slow])
        .stdin(Stdio::from(spectra))
        .status()
        .expect("python runs");
    assert!(consumer.success());
    let out = run.wait_with_output().expect("fftd ends");
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert_accounted(&err, &["sink"]);
    let (stage, busy) = bound(&err);
    assert_eq!(stage, "sink", "{err}");
    assert!(busy >= 50.0, "{err}");
}

#[test]
fn a_trickling_input_makes_read_the_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_file = dir.path().join("out.f32");
    let mut run = fftd()
        .args(["--file", "-", "--input-format", "f32", "--rate", "8000"])
        .args(["--frame", "256", "--stats", "--device", "cpu", "--output"])
        .arg(&out_file)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd starts");
    let mut stdin = run.stdin.take().expect("stdin");
    let bytes = f32_bytes(&noise(40_000, 7));
    for chunk in bytes.chunks(8_000) {
        stdin.write_all(chunk).expect("fftd reads");
        stdin.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(30));
    }
    drop(stdin);
    let out = run.wait_with_output().expect("fftd ends");
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert_accounted(&err, &["readers", "dispatch"]);
    let (stage, busy) = bound(&err);
    assert_eq!(stage, "read", "{err}");
    assert!(busy >= 50.0, "{err}");
}

/// Reads a trace with `json.load` and checks it: every batch id has a span of every stage in
/// argv[2] (comma-separated), start-up and teardown are there, and the spans of each thread
/// nest (two spans of one thread either do not overlap or one holds the other). Prints the batch
/// count.
const CHECK_TRACE: &str = r#"
import json, sys
from collections import defaultdict
with open(sys.argv[1]) as f:
    trace = json.load(f)
stages = sys.argv[2].split(",")
spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
names = {e["name"] for e in spans}
assert {"start-up", "engines", "teardown"} <= names, names
by_batch = defaultdict(set)
for e in spans:
    assert e["dur"] >= 0 and e["ts"] >= 0, e
    if "batch" in e["args"]:
        by_batch[e["args"]["batch"]].add(e["name"])
        assert "stream" in e["args"], e
batches = sorted(by_batch)
assert batches == list(range(len(batches))), batches
for b in batches:
    missing = [s for s in stages if s not in by_batch[b]]
    assert not missing, (b, missing)
tracks = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
by_tid = defaultdict(list)
for e in spans:
    assert e["tid"] in tracks, e
    by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
eps = 0.002  # µs, rounding
for tid, ss in by_tid.items():
    ss.sort(key=lambda s: (s[0], -s[1]))
    open_ = []
    for s in ss:
        while open_ and open_[-1][1] <= s[0] + eps:
            open_.pop()
        if open_:
            assert s[1] <= open_[-1][1] + eps, ("overlap on", tid, open_[-1], s)
        open_.append(s)
assert trace["otherData"]["spans_not_kept"] == 0
print(len(batches))
"#;

fn check_trace(path: &Path, stages: &str) -> usize {
    let printed = run_python(
        CHECK_TRACE,
        &[path.to_str().expect("utf-8"), stages],
        "trace check",
    );
    printed.trim().parse().expect("a batch count")
}

#[test]
fn a_trace_holds_every_stage_of_every_batch_nested_per_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = input(dir.path(), 100_000);
    let trace = dir.path().join("run.json");
    let out_file = dir.path().join("out.csv");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "--input-format",
            "f32",
            "--rate",
            "8000",
            "--frame",
            "512",
            "--hop",
            "256",
            "--batch",
            "32",
            "--format",
            "csv",
            "--trace",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(trace.to_str().expect("utf-8").into());
        args.push("--output".into());
        args.push(out_file.to_str().expect("utf-8").into());
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    // range-read: each batch is read, framed, transformed, encoded and written
    let ranged = args(&["--file", x.to_str().expect("utf-8")]);
    let out = run(&ranged.iter().map(String::as_str).collect::<Vec<_>>());
    assert_silent_success(&out);
    let batches = check_trace(&trace, "read,decode,frame,fft,encode,write");
    assert!(batches >= 10, "{batches} batches");
    // stdin: blocks are read and framed per stream, batches start at the batcher
    let piped = fftd()
        .args(args(&["--file", "-", "--device", "cpu"]))
        .stdin(std::fs::File::open(&x).expect("input"))
        .output()
        .expect("fftd runs");
    assert_silent_success(&piped);
    let batches = check_trace(&trace, "batch,fft,encode,write");
    assert!(batches >= 10, "{batches} batches");
    // --average: the averaging thread has a track with a span per batch it averaged
    let averaged = run(
        &args(&["--file", x.to_str().expect("utf-8"), "--average", "8"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_silent_success(&averaged);
    let batches = check_trace(&trace, "fft,average");
    assert!(batches >= 10, "{batches} batches");
}

#[test]
fn trace_to_an_unwritable_path_fails_before_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = input(dir.path(), 10_000);
    let out_file = dir.path().join("out.f32");
    let trace = dir.path().join("no-such-dir").join("run.json");
    let out = run(&[
        "--file",
        x.to_str().expect("utf-8"),
        "--input-format",
        "f32",
        "--rate",
        "8000",
        "--trace",
        trace.to_str().expect("utf-8"),
        "--output",
        out_file.to_str().expect("utf-8"),
    ]);
    assert_clean_error(&out, 2, &["--trace", "no-such-dir"]);
    assert!(!out_file.exists(), "the run started");
}

#[test]
fn stats_and_trace_on_the_opencl_route() {
    if !opencl_required() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let x = input(dir.path(), 100_000);
    let trace = dir.path().join("gpu.json");
    let out_file = dir.path().join("out.f32");
    let out = run(&[
        "--file",
        x.to_str().expect("utf-8"),
        "--input-format",
        "f32",
        "--rate",
        "8000",
        "--frame",
        "1024",
        "--batch",
        "16",
        "--device",
        "gpu",
        "--stats",
        "--trace",
        trace.to_str().expect("utf-8"),
        "--output",
        out_file.to_str().expect("utf-8"),
    ]);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert_accounted(&err, &["readers", "fft workers", "encoders", "sink"]);
    // the device's own times, from event profiling, split out of the workers' engine time
    let workers = err
        .lines()
        .find(|l| l.starts_with("fftd thread fft workers"))
        .unwrap_or_default();
    for phase in ["upload ", "device kernels ", "download "] {
        assert!(workers.contains(phase), "no {phase}in {workers}");
    }
    let batches = check_trace(&trace, "read,fft,encode,write");
    assert!(batches >= 4, "{batches} batches");
    let device_batches = run_python(
        CHECK_DEVICE_SPANS,
        &[trace.to_str().expect("utf-8")],
        "device spans",
    );
    assert_eq!(
        device_batches.trim(),
        batches.to_string(),
        "{device_batches}"
    );
    // the device set-up, per device, in the time accounting
    let line = |head: &str| {
        err.lines()
            .filter(|l| l.starts_with(head))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let startup = line("fftd start-up: ");
    for entry in ["opencl:0:", "context ", "engines "] {
        assert!(startup.contains(entry), "no {entry}in {startup}: {err}");
    }
    let setup = [line("fftd start-up: "), line("fftd set-up in ")].join("\n");
    for entry in ["program build ", "pinned alloc "] {
        assert!(setup.contains(entry), "no {entry}: {err}");
    }
}

/// Checks a trace of an OpenCL run: every batch with an `fft` span has `upload`, `kernels` and
/// `download` spans on its engine's queue tracks ("opencl:P:D engine K upload", ...), each inside
/// the run's wall (start-up's start to teardown's end) and inside the worker's `fft` span of its
/// batch (after the host enqueued it, ended before the host's wait for it returned); the
/// device clocks are in `otherData`, and the set-up spans are there. Prints the batch count.
const CHECK_DEVICE_SPANS: &str = r#"
import json, re, sys
from collections import defaultdict
with open(sys.argv[1]) as f:
    trace = json.load(f)
events = trace["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
spans = [e for e in events if e["ph"] == "X"]
end = max(e["ts"] + e["dur"] for e in spans if e["name"] == "teardown")
fft = defaultdict(list)
for e in spans:
    if e["name"] == "fft":
        fft[e["args"]["batch"]].append(e)
queue = re.compile(r"opencl:\d+:\d+ engine \d+ (upload|kernels|download)$")
device = defaultdict(set)
eps = 0.002  # µs, rounding
for e in spans:
    m = queue.match(names[e["tid"]])
    if not m:
        assert e["name"] not in ("upload", "kernels", "download"), (names[e["tid"]], e)
        continue
    assert e["name"] == m.group(1), (names[e["tid"]], e)
    b = e["args"]["batch"]
    assert "stream" in e["args"], e
    assert 0 <= e["ts"] and e["ts"] + e["dur"] <= end + eps, (e, end)
    host = [f for f in fft[b] if f["ts"] <= e["ts"] + eps and e["ts"] + e["dur"] <= f["ts"] + f["dur"] + eps]
    assert host, ("device span outside its batch's fft span", e, fft[b])
    device[b].add(e["name"])
for b in fft:
    assert device[b] == {"upload", "kernels", "download"}, (b, device[b])
clocks = trace["otherData"]["device_clocks"]
assert clocks and all(c["samples"] > 0 for c in clocks), clocks
setup = {e["name"] for e in spans}
assert {"context", "engines", "program build", "pinned alloc"} <= setup, setup
print(len(fft))
"#;
