//! Inputs and outputs that are not regular files: FIFOs, process substitution (`/dev/fd/N`),
//! several of them at once, and one SIGINT/SIGTERM ending a run whatever it waits on.
//!
//! Every input format through a FIFO, many times in a row and with several framings, must give
//! exactly the rows of the same bytes read from a regular file: partial analysis is never silent.

use crate::common;

use common::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn s(path: &Path) -> &str {
    path.to_str().expect("utf8 path")
}

/// Writes `bytes` into the FIFO at `path` from a thread, in uneven chunks with pauses, as a slow
/// producer would (a reader that stops at the first short read loses the rest).
fn feed(path: PathBuf, bytes: Vec<u8>, seed: usize) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut fifo = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open FIFO for writing");
        let mut at = 0;
        let mut k = seed;
        while at < bytes.len() {
            k = k
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (1 + (k >> 33) % 3000).min(bytes.len() - at);
            // a reader gone early (a failed run) is reported by the comparison, not here
            if fifo.write_all(&bytes[at..at + len]).is_err() {
                return;
            }
            at += len;
            if (k >> 20) % 7 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
}

/// The csv rows of a run, header left out (it names the input), in stream then frame order
/// (streams of one output interleave in the order their batches finished).
fn sorted_rows(out: &Output) -> Vec<String> {
    let mut rows: Vec<String> = stdout_text(out).lines().skip(1).map(String::from).collect();
    let key = |row: &String| -> (u64, u64) {
        let mut fields = row.split(',').map(|f| f.parse::<u64>().unwrap_or(u64::MAX));
        (fields.next().unwrap_or(0), fields.next().unwrap_or(0))
    };
    rows.sort_by_key(key);
    rows
}

/// Rows equal field for field; averaged rows (whose sums depend on how frames fell into batches,
/// which a pipe's timing changes) to a few units in the last place of f32.
fn assert_same_rows(got: &[String], want: &[String], context: &str) {
    assert_eq!(got.len(), want.len(), "{context}: row count");
    for (g, w) in got.iter().zip(want) {
        let parse = |row: &str| -> Vec<f64> {
            row.split(',')
                .map(|f| f.parse().unwrap_or(f64::NAN))
                .collect()
        };
        let (g, w) = (parse(g), parse(w));
        let peak = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let close =
            g.len() == w.len() && g.iter().zip(&w).all(|(a, b)| (a - b).abs() <= 1e-6 * peak);
        assert!(close, "{context}: rows differ");
    }
}

fn run_with(args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--device", "cpu"]);
    fftd()
        .args(&all)
        .stdin(Stdio::null())
        .output()
        .expect("fftd runs")
}

/// The input files of every format, one signal each (wav with two channels).
fn inputs(dir: &Path) -> Vec<(&'static str, PathBuf, Vec<&'static str>)> {
    let signal = noise(5000, 3);
    let text = dir.join("in.txt");
    write_text_samples(&text, &signal);
    let f32_path = dir.join("in.f32");
    write_f32(&f32_path, &signal);
    let s16_path = dir.join("in.s16");
    let s16: Vec<u8> = signal
        .iter()
        .flat_map(|v| ((v * 20000.0) as i16).to_le_bytes())
        .collect();
    std::fs::write(&s16_path, s16).expect("write s16");
    let cf32 = dir.join("in.cf32");
    write_f32(&cf32, &signal); // 2500 complex samples
    let wav = dir.join("in.wav");
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 8000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&wav, spec).expect("wav");
    for v in &signal {
        w.write_sample((v * 20000.0) as i16).expect("sample");
    }
    w.finalize().expect("finalize");
    vec![
        ("text", text, vec![]),
        ("f32", f32_path, vec![]),
        ("s16", s16_path, vec![]),
        ("cf32", cf32, vec![]),
        ("wav", wav, vec!["--channel", "all"]),
    ]
}

#[test]
fn every_format_through_a_fifo_many_times_equals_the_regular_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let framings: [&[&str]; 4] = [
        &["--frame", "256"],
        &["--frame", "256", "--hop", "100"],
        &["--frame", "128", "--tail", "drop", "--average", "4"],
        &["--frame", "whole"],
    ];
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    for (format, file, extra) in inputs(dir.path()) {
        let bytes = std::fs::read(&file).expect("read input");
        for (round, framing) in framings.iter().cycle().take(20).enumerate() {
            let mut args = vec!["--input-format", format, "--format", "csv"];
            args.extend(framing.iter().copied());
            args.extend(extra.iter().copied());
            let want = run_with(&[&["--file", s(&file)], &args[..]].concat());
            assert!(want.status.success(), "{}", stderr_text(&want));
            let writer = feed(fifo.clone(), bytes.clone(), round);
            let got = run_with(&[&["--file", s(&fifo)], &args[..]].concat());
            writer.join().expect("writer");
            let context = format!("{format} {framing:?} round {round}: {}", stderr_text(&got));
            assert!(got.status.success(), "{context}");
            let (got_rows, want_rows) = (sorted_rows(&got), sorted_rows(&want));
            assert!(!got_rows.is_empty(), "{context}");
            assert_same_rows(&got_rows, &want_rows, &context);
        }
    }
}

#[test]
fn process_substitution_is_read_once_to_its_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("in.txt");
    write_text_samples(&text, &noise(10 * 1024, 5));
    let bin = env!("CARGO_BIN_EXE_fftd");
    let script = format!(
        "'{bin}' --device cpu --file <(cat '{}') --frame 1024 --format csv",
        s(&text)
    );
    let got = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash");
    assert!(got.status.success(), "{}", stderr_text(&got));
    let want = run_with(&["--file", s(&text), "--frame", "1024", "--format", "csv"]);
    assert_eq!(sorted_rows(&got).len(), 10);
    assert!(sorted_rows(&got) == sorted_rows(&want));
}

#[test]
fn several_fifos_fed_in_turn_by_one_writer_are_read_at_once() {
    // tee writes each block to the first FIFO, then the second: a reader that finished one input
    // before opening the next would wait for ever
    let dir = tempfile::tempdir().expect("tempdir");
    let f32_path = dir.path().join("in.f32");
    write_f32(&f32_path, &noise(1 << 18, 9));
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    mkfifo(&a);
    mkfifo(&b);
    let bin = env!("CARGO_BIN_EXE_fftd");
    let script = format!(
        "tee '{a}' < '{f}' > '{b}' & '{bin}' --device cpu --file '{a}' --file '{b}' --input-format f32 --frame 4096 --format csv; wait",
        a = s(&a),
        b = s(&b),
        f = s(&f32_path)
    );
    let got = Command::new("timeout")
        .args(["60", "bash", "-c", &script])
        .output()
        .expect("bash");
    assert!(got.status.success(), "{}", stderr_text(&got));
    let rows = stdout_text(&got);
    let per_stream = |id: &str| rows.lines().filter(|l| l.starts_with(id)).count();
    assert_eq!(
        (per_stream("0,"), per_stream("1,")),
        (64, 64),
        "{}",
        stderr_text(&got)
    );
}

#[test]
fn output_to_a_fifo_is_opened_once_and_gets_every_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("in.txt");
    write_text_samples(&text, &noise(64 * 100, 2));
    let out = dir.path().join("out");
    mkfifo(&out);
    let reader_path = out.clone();
    let reader = std::thread::spawn(move || {
        let mut got = String::new();
        std::fs::File::open(reader_path)
            .expect("open FIFO")
            .read_to_string(&mut got)
            .expect("read FIFO");
        got
    });
    let run = run_with(&["--file", s(&text), "--frame", "64", "--output", s(&out)]);
    assert!(run.status.success(), "{}", stderr_text(&run));
    let want = run_with(&["--file", s(&text), "--frame", "64"]);
    assert_eq!(reader.join().expect("reader"), stdout_text(&want));

    // npy rewrites its header at the end: a FIFO cannot take it, said before anything is read
    let npy = run_with(&["--file", s(&text), "--format", "npy", "--output", s(&out)]);
    assert_clean_error(&npy, 2, &["npy", "FIFO"]);
}

/// Starts fftd with `args` (stdin as given), lets it reach what it waits on, sends `signal`,
/// and returns its output and how long it took to end after the signal.
fn signalled(args: &[&str], stdin: Stdio, signal: &str) -> (Output, Duration) {
    let child = fftd()
        .args(args)
        .args(["--device", "cpu"])
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_until_signals_caught(child.id());
    // time to reach the wait (a verdict that holds also when the signal comes before it)
    std::thread::sleep(Duration::from_millis(400));
    send(&child, signal);
    let sent = Instant::now();
    let out = wait_at_most(child, Duration::from_secs(30));
    (out, sent.elapsed())
}

fn send(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

/// The child's output once it ends; kills it (and fails) if it has not ended in `limit`.
fn wait_at_most(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("fftd did not end within {limit:?} of one signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// A run that one signal ended before any input arrived: exit 0, promptly, no "is empty" for an
/// input that had sent nothing yet, and one line saying nothing was analysed.
fn assert_ended_quietly(out: &std::process::Output, took: Duration, signal: &str) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(out));
    assert!(took < PROMPT, "{signal}: {took:?}");
    let err = stderr_text(out);
    assert!(!err.contains("empty"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("stopped before any input arrived; nothing was analysed"),
        "{err}"
    );
}

#[test]
fn one_signal_ends_a_run_waiting_for_a_fifo_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("in");
    mkfifo(&fifo);
    for signal in ["INT", "TERM"] {
        let (out, took) = signalled(
            &["--file", s(&fifo), "--frame", "64"],
            Stdio::null(),
            signal,
        );
        assert_ended_quietly(&out, took, signal);
    }
}

#[test]
fn one_signal_ends_a_run_waiting_for_a_fifo_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("in.txt");
    write_text_samples(&text, &noise(1000, 1));
    let fifo = dir.path().join("out");
    mkfifo(&fifo);
    for (signal, flag) in [("INT", "--output"), ("TERM", "--meta"), ("INT", "--events")] {
        let mut args = vec!["--file", s(&text), "--frame", "64", flag, s(&fifo)];
        if flag == "--events" {
            args.extend([
                "--output",
                "/dev/null",
                "--alert",
                "name=a,band=0-0.5,above=-300",
            ]);
        }
        let (out, took) = signalled(&args, Stdio::null(), signal);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
        assert!(took < PROMPT, "{signal}: {took:?}");
        assert!(stderr_text(&out).contains("waiting for a reader"));
    }
}

/// A FIFO `in.f32` in a new folder, held open both ways by the test: a writer that sends
/// nothing while the handle lives.
fn held_fifo() -> (tempfile::TempDir, std::path::PathBuf, std::fs::File) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("in.f32");
    mkfifo(&fifo);
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .expect("open the FIFO both ways");
    (dir, fifo, held)
}

#[test]
fn a_signal_before_a_fifo_input_sent_anything_is_an_interrupted_run() {
    // a FIFO with a writer (this test, holding both ends) that sends nothing, read as raw f32
    let (_dir, fifo, _held) = held_fifo();
    let args = ["--file", s(&fifo), "--input-format", "f32", "--frame", "64"];
    let (out, took) = signalled(&args, Stdio::null(), "INT");
    assert_ended_quietly(&out, took, "");
}

/// Ctrl-C stops an input that has not ended: the samples after its last whole frame are no
/// tail, so no frame padded with zeros is written for them (helper-50: the last row of an
/// interrupted live run was that padded frame, and an alert's `run_end` read it).
#[test]
fn a_signal_writes_the_whole_frames_and_no_padded_one() {
    let (dir, fifo, mut held) = held_fifo();
    let samples: Vec<f32> = noise(64 * 10 + 32, 17).iter().map(|&v| v as f32).collect();
    let bytes: Vec<u8> = samples.iter().flat_map(|v| v.to_le_bytes()).collect();
    let csv = dir.path().join("rows.csv");
    let args = [
        "--input-format",
        "f32",
        "--frame",
        "64",
        "--format",
        "csv",
        "--device",
        "cpu",
    ];
    let mut child = fftd()
        .args(["--file", s(&fifo), "--output", s(&csv)])
        .args(args)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    held.write_all(&bytes).expect("send 10.5 frames");
    let rows = |path: &Path| std::fs::read_to_string(path).map_or(0, |t| t.lines().count());
    let started = Instant::now();
    while rows(&csv) < 11 {
        // (a header and 10 rows: the half frame after them is held while the input is open)
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} lines",
            rows(&csv)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    send(&child, "INT");
    assert!(child.wait().expect("wait").success());
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(text.lines().count(), 11, "no padded 11th row: {text}");
    // the same rows as the whole frames of a file that holds these samples and ends there
    let file = dir.path().join("whole.f32");
    std::fs::write(&file, &bytes[..64 * 10 * 4]).expect("write");
    let out = run(&[&["--file", s(&file)][..], &args].concat());
    assert_eq!(
        stdout_text(&out).replace("whole.f32", ""),
        text.replace("in.f32", "")
    );
}

/// An output that got no rows is headed as its rows would have been (helper-47: npy (0, 0), a
/// csv with no header): npy (0, bins) as `--meta` says, the csv header of the run's columns.
#[test]
fn a_run_stopped_before_any_input_heads_its_outputs_as_their_rows() {
    let (dir, fifo, _held) = held_fifo();
    let base = ["--file", s(&fifo), "--input-format", "f32", "--frame", "64"];
    for (extra, bins) in [
        (&[][..], 33),
        (&["--bands", "mel:10", "--rate", "8000"][..], 10),
    ] {
        let npy = dir.path().join("rows.npy");
        let meta = dir.path().join("rows.json");
        let to = ["--format", "npy", "--output", s(&npy), "--meta", s(&meta)];
        let (out, took) = signalled(&[&base[..], extra, &to].concat(), Stdio::null(), "INT");
        assert_ended_quietly(&out, took, "");
        let header = std::fs::read(&npy).expect("npy");
        let header = String::from_utf8_lossy(&header);
        assert!(
            header.contains(&format!("'shape': (0, {bins})")),
            "{header}"
        );
        let meta = std::fs::read_to_string(&meta).expect("meta");
        assert!(meta.contains(&format!("\"bins\": {bins}")), "{meta}");
    }
    let csv = dir.path().join("rows.csv");
    let to = ["--format", "csv", "--output", s(&csv), "--rate", "64"];
    let (out, took) = signalled(&[&base[..], &to].concat(), Stdio::null(), "INT");
    assert_ended_quietly(&out, took, "");
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert!(
        text.starts_with("stream,frame,time_s,0.0,1.0,2.0,"),
        "{text}"
    );
    assert!(
        text.ends_with(",32.0\n") && text.lines().count() == 1,
        "{text}"
    );
}

#[test]
fn sigterm_before_stdin_sent_anything_is_an_interrupted_run() {
    // stdin is a pipe held open (in the child's handle) with nothing sent
    let (out, took) = signalled(&["--file", "-", "--frame", "64"], Stdio::piped(), "TERM");
    assert_ended_quietly(&out, took, "");
}

/// fftd on 2^16 samples at hop 1 with `extra` flags and `env`, its stdout a pipe the test never
/// reads (fftd fills it and blocks writing), once its signal handlers are in and it has had
/// time to fill the pipe; the input's folder and the child.
fn stdout_never_read(extra: &[&str], env: &[(&str, &str)]) -> (tempfile::TempDir, Child) {
    let dir = tempfile::tempdir().expect("tempdir");
    let f32_path = dir.path().join("in.f32");
    write_f32(&f32_path, &noise(1 << 16, 4));
    let child = fftd()
        .args([
            "--file",
            s(&f32_path),
            "--frame",
            "64",
            "--hop",
            "1",
            "--device",
            "cpu",
        ])
        .args(extra)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_until_signals_caught(child.id());
    std::thread::sleep(Duration::from_millis(500));
    (dir, child)
}

#[test]
fn a_second_signal_while_stdout_is_not_read_exits_130() {
    // the second Ctrl-C comes before the stuck write's second is up, so it is the signal that
    // ends the run, not the stuck-write watch
    let (_dir, child) =
        stdout_never_read(&["--format", "f32"], &[("FFTD_STUCK_WRITE_SECONDS", "30")]);
    send(&child, "INT");
    std::thread::sleep(Duration::from_millis(200));
    send(&child, "INT");
    let out = wait_at_most(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "{}", stderr_text(&out));
}

#[test]
fn one_signal_ends_a_run_whose_stdout_is_not_read_with_exit_130() {
    let (_dir, child) = stdout_never_read(&[], &[]);
    send(&child, "INT");
    let sent = Instant::now();
    let out = wait_at_most(child, Duration::from_secs(30));
    // rows were left unwritten: the run did not finish, so not success (issue 39)
    assert_eq!(out.status.code(), Some(130), "{}", stderr_text(&out));
    // a write nobody takes is given up a second after the signal (stuck_write), then PROMPT
    assert!(
        sent.elapsed() < Duration::from_secs(1) + PROMPT,
        "{:?}",
        sent.elapsed()
    );
    assert!(
        stderr_text(&out).contains("took nothing"),
        "{}",
        stderr_text(&out)
    );
}

/// fftd run by `sh` with `redirect` applied (`>&-` closes stdout, `<&-` stdin).
fn run_redirected(redirect: &str, args: &[&str]) -> Output {
    let line = format!("exec \"$0\" \"$@\" {redirect}");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &line, env!("CARGO_BIN_EXE_fftd")])
        .args(args);
    cmd.env("RUST_LOG", "fftd=warn").env(
        "FFTD_CACHE_DIR",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/fftd-cache"),
    );
    cmd.stdin(Stdio::null()).output().expect("sh runs")
}

/// A closed stdout is not a place to write spectra or events (Rust's runtime puts /dev/null on
/// it, and the rows vanished with exit 0); a closed stdin is not an empty input. Where nothing
/// goes to stdout, a closed one is no matter.
#[test]
fn a_closed_stdout_or_stdin_is_refused_where_the_run_uses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(4096, 3));
    let args = [
        "--file",
        s(&input),
        "--rate",
        "8000",
        "--frame",
        "256",
        "--device",
        "cpu",
    ];
    let out = run_redirected(">&-", &args);
    assert_clean_error(&out, 2, &["stdout is closed", "the spectra", "--output"]);
    let named = [&args[..], &["--output", "/dev/stdout"]].concat();
    assert_clean_error(&run_redirected(">&-", &named), 2, &["stdout is closed"]);
    // refused before any input is opened: a FIFO no one writes to is not waited for
    let fifo = dir.path().join("never");
    mkfifo(&fifo);
    let waiting = ["--file", s(&fifo), "--rate", "8000", "--device", "cpu"];
    let out = run_redirected(">&-", &waiting);
    assert_clean_error(&out, 2, &["stdout is closed", "the spectra"]);
    let events = [
        &args[..],
        &[
            "--alert",
            "name=any,band=100-1000,above=-300",
            "--events",
            "-",
            "--output",
            "/dev/null",
        ],
    ]
    .concat();
    let out = run_redirected(">&-", &events);
    assert_clean_error(&out, 2, &["stdout is closed", "the events", "--events"]);
    let rows = dir.path().join("rows.txt");
    let out = run_redirected(">&-", &[&args[..], &["--output", s(&rows)]].concat());
    assert_silent_success(&out);
    assert!(std::fs::metadata(&rows).expect("rows").len() > 0);
    let stdin = [
        "--file",
        "-",
        "--input-format",
        "f32",
        "--rate",
        "8000",
        "--frame",
        "256",
    ];
    let publish = [
        "publish",
        "--to",
        "nats://127.0.0.1:9/frames.x",
        "--file",
        "-",
    ];
    let out = run_redirected("<&-", &[&publish[..], &["--input-format", "f32"]].concat());
    assert_clean_error(&out, 2, &["--file -", "stdin is closed"]);
    let out = run_redirected("<&- >/dev/null", &stdin);
    assert_clean_error(&out, 2, &["--file -", "stdin is closed"]);
}
