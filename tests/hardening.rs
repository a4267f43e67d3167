//! Hostile and careless use of the `fftd` binary: an output that is an input is refused before
//! anything is opened for writing (the input's bytes stay as they were), absurd and negative sizes
//! are usage errors naming the flag and its range, a text file with a byte-order mark reads,
//! control bytes of input are escaped in errors (one line, `\0`, `\x1b`), and the examples that
//! `--help` and the README's first command show run as printed.

use crate::common;

use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A raw f32 input of 4096 samples (a tone), whose bytes the tests check are never changed.
fn tone_f32(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let bytes: Vec<u8> = (0..4096)
        .flat_map(|i| ((i as f32 * 0.1).sin()).to_le_bytes())
        .collect();
    std::fs::write(&path, bytes).expect("write input");
    path
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// Runs `args` and asserts a usage error naming `needles`, with every file in `kept` unchanged.
fn refused(args: &[&str], needles: &[&str], kept: &[&Path]) {
    let before: Vec<Vec<u8>> = kept
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect();
    assert_clean_error(&run(args), 2, needles);
    for (path, bytes) in kept.iter().zip(before) {
        assert_eq!(
            std::fs::read(path).expect("read"),
            bytes,
            "{path:?} changed"
        );
    }
}

/// Stdout and stdin by their `/dev` names are the streams themselves, and a FIFO is never both
/// read and written by one run (helper-39: `--rotate` and SIGHUP made /dev/stdout-000001, events
/// went in among the rows, a FIFO fed the run its own rows, `/dev/stdin` and `-` split one pipe,
/// `>>` was truncated).
#[test]
fn stdout_and_stdin_by_name_are_the_streams_and_no_fifo_is_read_and_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let x = tone_f32(d, "x.f32");
    let fifo = d.join("loop");
    mkfifo(&fifo);
    // (held open both ways, so that no open of it waits)
    let _held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .expect("open the FIFO");
    let looped = [
        "--file",
        s(&fifo),
        "--input-format",
        "f32",
        "--rate",
        "8000",
    ];
    let args = [&looped[..], &["--format", "f32", "--output", s(&fifo)]].concat();
    assert_clean_error(&run(&args), 2, &["--output", "also an input"]);
    let twice = [
        "--file",
        "/dev/stdin",
        "--file",
        "-",
        "--input-format",
        "f32",
    ];
    assert_clean_error(&run(&twice), 2, &["stdin", "only once"]);
    let split = [
        "--file",
        s(&x),
        "--rotate",
        "10KB",
        "--output",
        "/dev/stdout",
    ];
    assert_clean_error(&run(&split), 2, &["--rotate", "stdout"]);
    let alert = ["--alert", "name=a,band=0-0.4,above=-300"];
    for output in ["-", "/dev/stdout"] {
        let mixed = [
            "--file",
            s(&x),
            "--events",
            "/dev/stdout",
            "--output",
            output,
        ];
        let out = run(&[&mixed[..], &alert].concat());
        assert_clean_error(&out, 2, &["--events /dev/stdout", "stdout already"]);
    }
    // `>>` through /dev/stdout appends, as through stdout itself
    let kept = d.join("kept.txt");
    std::fs::write(&kept, "kept\n").expect("write");
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(&kept)
        .expect("open");
    let out = fftd()
        .args(["--file", s(&x), "--frame", "256", "--output", "/dev/stdout"])
        .stdout(appended)
        .output()
        .expect("run fftd");
    assert!(out.status.success(), "{}", stderr_text(&out));
    let text = std::fs::read_to_string(&kept).expect("read");
    assert!(
        text.starts_with("kept\n") && text.lines().count() > 2,
        "{text:.80}"
    );
    // npy, whose header is rewritten in place, is refused through a descriptor's name: opened
    // to append, every rewrite landed at the end (helper-51: nine headers in one file)
    let npy = d.join("c.npy");
    std::fs::write(&npy, "").expect("write");
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(&npy)
        .expect("open");
    let out = fftd()
        .args(["--file", s(&x), "--frame", "256", "--format", "npy"])
        .args(["--output", "/dev/stdout"])
        .stdout(appended)
        .output()
        .expect("run fftd");
    assert_clean_error(&out, 2, &["/dev/stdout", "npy", "the file's own path"]);
    assert_eq!(std::fs::metadata(&npy).expect("stat").len(), 0);
}

/// npy into a FIFO is refused before `--meta` and `--trace` are opened: they keep what they held
/// (helper-43: both were left empty).
#[test]
fn npy_into_a_fifo_is_refused_before_any_file_is_opened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let x = tone_f32(d, "x.f32");
    let fifo = d.join("rows");
    mkfifo(&fifo);
    let (meta, trace) = (d.join("meta.json"), d.join("trace.json"));
    std::fs::write(&meta, "the user's").expect("write");
    std::fs::write(&trace, "the user's").expect("write");
    let args = [
        ["--file", s(&x), "--input-format", "f32", "--rate", "8000"],
        ["--format", "npy", "--output", s(&fifo), "--meta", s(&meta)],
    ]
    .concat();
    let args = [&args[..], &["--trace", s(&trace)]].concat();
    refused(&args, &["npy output", "not a FIFO"], &[&meta, &trace]);
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let x = tone_f32(d, "x.f32");
    let y = tone_f32(d, "y.f32");
    let (x_s, y_s) = (s(&x), s(&y));
    let link = d.join("link.f32");
    std::os::unix::fs::symlink(&x, &link).expect("symlink");
    let hard = d.join("hard.f32");
    std::fs::hard_link(&x, &hard).expect("hard link");
    let config = d.join("fftd.toml");
    std::fs::write(&config, "frame = 256\n").expect("write config");
    let dotted = format!("{}/./x.f32", s(d));
    let f32_out = ["--format", "f32", "--output"];

    // the issue's case, then the same file through another name
    for same in [x_s, &dotted, s(&link), s(&hard)] {
        let args = [&["--file", x_s][..], &f32_out, &[same]].concat();
        refused(&args, &["--output", "also an input", "--file"], &[&x]);
    }
    // --meta, --output-dir and --config
    refused(
        &["--file", x_s, "--meta", x_s],
        &["--meta", "also an input"],
        &[&x],
    );
    refused(
        &[
            "--file",
            x_s,
            "--file",
            y_s,
            "--format",
            "f32",
            "--output-dir",
            s(d),
        ],
        &["--output-dir", "x.f32", "also an input"],
        &[&x, &y],
    );
    let config_out = [x_s, "--config", s(&config), "--output", s(&config)];
    refused(
        &[&["--file"][..], &config_out].concat(),
        &["--config", "also an input"],
        &[&config],
    );
    // --events (appended to), and the files other flags read
    let alert = ["--alert", "name=a,band=0-0.4,above=-300"];
    refused(
        &[&["--file", x_s, "--events", x_s][..], &alert].concat(),
        &["--events", "also an input"],
        &[&x],
    );
    let cal = d.join("cal.txt");
    std::fs::write(&cal, "10 0\n").expect("write calibration");
    let calibrated = ["--calibration", "94", "--calibration-file", s(&cal)];
    refused(
        &[&["--file", x_s, "--meta", s(&cal)][..], &calibrated].concat(),
        &["--meta", "also an input", "--calibration-file"],
        &[&cal],
    );
    let token = d.join("token.txt");
    std::fs::write(&token, "secret\n").expect("write token");
    let served = ["--serve", "0", "--serve-token-file", s(&token)];
    refused(
        &[&["--file", x_s, "--output", s(&token)][..], &served].concat(),
        &["--output", "also an input", "--serve-token-file"],
        &[&token],
    );
    let creds = d.join("fleet.creds");
    std::fs::write(&creds, "-----BEGIN NATS USER JWT-----\n").expect("write creds");
    refused(
        &[
            "--file",
            x_s,
            "--alert",
            "name=a,band=0.1-0.2,above=0",
            "--events",
            "nats://127.0.0.1:9/EVENTS",
            "--meta",
            s(&creds),
            "--nats-creds",
            s(&creds),
        ],
        &["--meta", "also an input", "--nats-creds"],
        &[&creds],
    );
    // a fleet worker's --meta too, before it connects
    let worker = ["--file", "nats://127.0.0.1:9/FRAMES/w", "--output"];
    let worker = [
        &worker[..],
        &["nats://127.0.0.1:9/SPECTRA.x", "--nats-creds", s(&creds)],
    ];
    refused(
        &[&worker.concat()[..], &["--meta", s(&creds)]].concat(),
        &["--meta", "also an input", "--nats-creds"],
        &[&creds],
    );
    // a --rotate pattern whose first name is an input: refused as that file would begin
    let first = d.join("spec-000000.f32");
    std::fs::copy(&x, &first).expect("copy");
    let before = std::fs::read(&first).expect("read");
    let pattern = d.join("spec.f32");
    let rotated = [&["--file", s(&first)][..], &f32_out, &[s(&pattern)]].concat();
    let out = run(&[&rotated[..], &["--rotate", "1h"]].concat());
    assert_clean_error(&out, 1, &["spec-000000.f32", "also an input"]);
    assert_eq!(
        std::fs::read(&first).expect("read"),
        before,
        "the input changed"
    );
    // two outputs naming one file
    let out = d.join("out.txt");
    let two = ["--file", x_s, "--output", s(&out), "--meta", s(&out)];
    assert_clean_error(&run(&two), 2, &["same file"]);
    let events = [
        &["--file", x_s, "--output", s(&out), "--events", s(&out)][..],
        &alert,
    ]
    .concat();
    assert_clean_error(&run(&events), 2, &["--events", "same file"]);
    assert!(!out.exists(), "nothing is written when refused");
    // a distinct output still works
    let ok = run(&[&["--file", x_s][..], &f32_out, &[s(&d.join("ok.f32"))]].concat());
    assert!(ok.status.success(), "{}", stderr_text(&ok));
}

/// Stdin redirected from the output file, and stdout appended to an input, are inputs too.
#[test]
fn redirected_stdin_and_stdout_are_checked_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = tone_f32(dir.path(), "x.f32");
    let before = std::fs::read(&x).expect("read");
    let from_stdin = fftd()
        .args(["--device", "cpu", "--file", "-", "--input-format", "f32"])
        .args(["--format", "f32", "--output", s(&x)])
        .stdin(std::fs::File::open(&x).expect("open"))
        .output()
        .expect("runs");
    assert_clean_error(&from_stdin, 2, &["also an input", "stdin"]);
    let append = std::fs::OpenOptions::new()
        .append(true)
        .open(&x)
        .expect("open for append");
    let to_stdout = fftd()
        .args(["--device", "cpu", "--file", s(&x)])
        .stdout(append)
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    assert_clean_error(&to_stdout, 2, &["stdout", "also an input"]);
    assert_eq!(std::fs::read(&x).expect("read"), before);
}

#[test]
fn absurd_and_negative_sizes_name_the_flag_and_the_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = tone_f32(dir.path(), "x.f32");
    let base = ["--file", s(&x)];
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--batch", "1000000000000"],
            &["--batch 1000000000000", "from 0 to"],
        ),
        (&["--batch", "-3"], &["--batch -3", "from 0 to"]),
        (
            &["--workers", "1000000"],
            &["--workers 1000000", "from 0 to"],
        ),
        (
            &["--duration", "-1"],
            &["--duration -1", "must be a duration above 0"],
        ),
        (
            &["--max-latency", "-1"],
            &["--max-latency -1", "from 0 to 60000"],
        ),
        (
            &["--max-latency", "1e300"],
            &["--max-latency 1e300", "from 0 to 60000"],
        ),
        (&["--frame", "-5"], &["--frame", "-5", ">= 2"]),
        (&["--hop", "-1"], &["--hop -1", "at least 1"]),
        (&["--hop", "ten"], &["--hop", "whole number"]),
        (
            &["--frame", "whole", "--tail", "drop"],
            &["--tail", "--frame whole"],
        ),
        (&["--channels", "-2"], &["--channels -2", "from 1 to 65535"]),
        (&["--max-frames", "-7"], &["--max-frames -7", "at least 1"]),
        (
            &["--max-frames", "99999999999999999999"],
            &["--max-frames", "too large"],
        ),
        (&["--rate", "-8000"], &["--rate -8000", "from 1e-6 to 1e12"]),
        // (a pace, or a time axis, computed from such a rate leaves what a Duration holds)
        (
            &["--rate", "1e-20", "--realtime"],
            &["--rate", "from 1e-6 to 1e12"],
        ),
        (&["--rate", "1e13"], &["--rate", "from 1e-6 to 1e12"]),
        (
            &["--idle-exit", "1e300"],
            &["--idle-exit", "at most 604800"],
        ),
        (&["--meta", "-"], &["--meta -", "a file's path"]),
        (&["--trace", "-"], &["--trace -", "a file's path"]),
    ];
    for (flags, needles) in cases {
        let started = std::time::Instant::now();
        assert_clean_error(&run(&[&base[..], flags].concat()), 2, needles);
        assert!(started.elapsed().as_secs() < 10, "{flags:?} must not hang");
    }
    // the largest batch the message names is accepted
    let max = stderr_text(&run(&[&base[..], &["--batch", "1000000000000"]].concat()));
    let largest = max
        .split("from 0 to ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .expect("largest batch in the message");
    let ok = run(&[
        &base[..],
        &["--batch", largest, "--format", "f32", "--max-frames", "1"],
    ]
    .concat());
    assert!(ok.status.success(), "{}", stderr_text(&ok));
    // a config file gets the same range check, placed in the file
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "hop = -1\n").expect("write");
    assert_clean_error(
        &run(&[&base[..], &["--config", s(&config)]].concat()),
        2,
        &["c.toml:1: hop = -1", "at least 1"],
    );
}

#[test]
fn a_text_file_with_a_byte_order_mark_or_latin1_comments_reads_like_one_without() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = dir.path().join("plain.txt");
    let bom = dir.path().join("bom.txt");
    let samples: String = noise(300, 4).iter().map(|v| format!("{v}\r\n")).collect();
    std::fs::write(&plain, &samples).expect("write");
    std::fs::write(&bom, format!("\u{feff}{samples}")).expect("write");
    let read = |p: &Path| run(&["--file", s(p), "--frame", "64"]);
    let (a, b) = (read(&plain), read(&bom));
    assert!(b.status.success(), "{}", stderr_text(&b));
    assert_eq!(a.stdout, b.stdout);
    assert!(!a.stdout.is_empty());
    // a comment line in Latin-1 (or any bytes) is still a comment (helper-40: it was fatal);
    // a sample line that is not UTF-8 stays an error naming its line
    let latin = dir.path().join("latin.txt");
    let mut bytes = b"# r\xe9glages du capteur\n  #\xff\n".to_vec();
    bytes.extend(samples.as_bytes());
    std::fs::write(&latin, &bytes).expect("write");
    let c = read(&latin);
    assert!(c.status.success(), "{}", stderr_text(&c));
    assert_eq!(a.stdout, c.stdout);
    bytes.extend(b"0.5 \xe9\n");
    std::fs::write(&latin, &bytes).expect("write");
    assert_clean_error(
        &read(&latin),
        1,
        &["latin.txt: line 303", "not valid UTF-8"],
    );
}

#[test]
fn one_csv_header_for_streams_with_other_bins_is_refused_before_writing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.f32"), dir.path().join("b.f32"));
    write_f32(&a, &noise(64, 1));
    write_f32(&b, &noise(64, 2));
    let wav = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tones.wav");
    let out_csv = dir.path().join("out.csv");
    let csv = [
        "--format",
        "csv",
        "--frame",
        "8",
        "--rate",
        "1000",
        "--output",
        s(&out_csv),
    ];
    // the same rate: one header labels both
    let out = run(&[&["--file", s(&a), "--file", s(&b)][..], &csv].concat());
    assert!(out.status.success(), "{}", stderr_text(&out));
    // the WAV's own 16 kHz against 1 kHz: refused before a byte is written
    std::fs::remove_file(&out_csv).expect("rm");
    let out = run(&[&["--file", s(&a), "--file", s(&wav)][..], &csv].concat());
    assert_clean_error(
        &out,
        2,
        &["one header cannot label", "tones.wav", "--output-dir"],
    );
    assert!(!out_csv.exists());
}

#[test]
fn text_with_no_line_end_is_refused_not_read_into_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = dir.path().join("long.txt");
    std::fs::write(&long, "1".repeat(100 << 10)).expect("write");
    for input in [s(&long), "/dev/zero"] {
        let out = run(&[
            "--file",
            input,
            "--input-format",
            "text",
            "--max-frames",
            "1",
        ]);
        assert_clean_error(&out, 1, &[input, "line 1", "no line end within 64 KiB"]);
    }
    // a long comment is still a comment
    let commented = dir.path().join("commented.txt");
    let text = format!("# {}\n1\n2\n3\n4\n", "c".repeat(60 << 10));
    std::fs::write(&commented, text).expect("write");
    let out = run(&["--file", s(&commented), "--frame", "4"]);
    assert!(out.status.success(), "{}", stderr_text(&out));
}

/// Asserts `out` is a one-line error (exit `code`) holding `needles` and no control byte but
/// its closing newline.
fn escaped_error(out: &std::process::Output, code: i32, needles: &[&str]) {
    assert_clean_error(out, code, needles);
    let err = stderr_text(out);
    let raw = err.trim_end_matches('\n').chars().find(|c| c.is_control());
    assert!(raw.is_none(), "raw control {raw:?} in: {err:?}");
}

#[test]
fn control_bytes_of_input_are_escaped_in_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    // a text line holding a NUL and an ESC (a terminal's clear-screen): issue 39
    let text = dir.path().join("in.txt");
    std::fs::write(&text, "0.5\n0.25\0x\x1b[2Jy\n0.75\n").expect("write");
    let out = run(&["--file", s(&text), "--frame", "2"]);
    escaped_error(&out, 1, &["line 2", "'0.25\\0x\\x1b[2Jy'"]);
    // a config file's value and a flag's value (usage errors), a SigMF datatype
    let config = dir.path().join("c.toml");
    // (raw in the file: TOML refuses it, and the error quotes the line's value)
    std::fs::write(&config, "window = \"hann\x1b[2J\tx\"\n").expect("write");
    let out = run(&["--file", s(&text), "--config", s(&config)]);
    escaped_error(&out, 2, &["c.toml:1", "window = \\x1b"]);
    let out = run(&["--file", s(&text), "--frame", "64\x1b[2J\t"]);
    escaped_error(&out, 2, &["--frame", "64\\x1b[2J\\t"]);
    // a parser that names its flag and value is not echoed twice
    let out = run(&["--file", s(&text), "--bands", "mel:4\n"]);
    escaped_error(&out, 2, &["--bands mel:4\\n: '4\\n' is not a number"]);
    assert_eq!(stderr_text(&out).matches("--bands").count(), 1);
    // a value that is none of a flag's choices, as typed (clap's message read 'hann' here)
    let out = run(&["--file", s(&text), "--window", "ha\x1b[2Jnn"]);
    escaped_error(
        &out,
        2,
        &[
            "--window ha\\x1b[2Jnn: expected one of rect, hann,",
            "did you mean hann?",
        ],
    );
    let meta = dir.path().join("r.sigmf-meta");
    let doc = r#"{"global": {"core:datatype": "cf32\u001b\u0085"}, "captures": []}"#;
    std::fs::write(&meta, doc).expect("write");
    std::fs::write(dir.path().join("r.sigmf-data"), [0u8; 64]).expect("write");
    let out = run(&["--file", s(&meta)]);
    escaped_error(&out, 1, &["core:datatype", "cf32\\x1b\\x85"]);
}

/// Every `fftd ...` example line of `--help` runs from the repository root as printed.
#[test]
fn help_examples_run_as_printed() {
    let help = stdout_text(&run(&["--help"]));
    let examples: Vec<&str> = help
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("fftd --file examples/"))
        .collect();
    assert!(examples.len() >= 2, "examples in --help: {help}");
    for line in examples {
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        let out = fftd()
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        assert!(out.status.success(), "{line}: {}", stderr_text(&out));
        assert!(!out.stdout.is_empty(), "{line}: no output");
    }
}

/// The README's first command ends with examples/consume.py; it must run with the standard
/// library alone (`python3 -S`: no site-packages, so no numpy), as on a fresh machine.
#[test]
fn consume_example_needs_only_the_standard_library() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spectra = run(&[
        "--file",
        s(&root.join("examples/tones.wav")),
        "--frame",
        "4096",
        "--hop",
        "1024",
        "--format",
        "f32",
    ]);
    assert!(spectra.status.success(), "{}", stderr_text(&spectra));
    let mut child = match Command::new("python3")
        .args(["-S", s(&root.join("examples/consume.py")), "2049", "16000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if std::env::var("CI").is_err() => {
            eprintln!("skipped: no python3 ({e})");
            return;
        }
        Err(e) => panic!("python3 is needed in CI: {e}"),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&spectra.stdout)
        .expect("feed");
    let out = child.wait_with_output().expect("consume.py ends");
    assert!(out.status.success(), "{}", stderr_text(&out));
    // tones.wav: 440 Hz is the strongest tone; bin 113 of 4096 at 16 kHz is 441.4 Hz
    assert!(
        stdout_text(&out).contains("bin 113 = 441.4 Hz"),
        "{}",
        stdout_text(&out)
    );
}

/// Files that flags name are read with a bound (a device or a recording named by mistake
/// would fill the memory): just past it, each is a one-line error naming the flag.
#[test]
fn files_flags_name_are_read_only_up_to_a_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let x = tone_f32(d, "x.f32");
    let big = |name: &str, bytes: usize| {
        let path = d.join(name);
        std::fs::write(&path, vec![b'#'; bytes]).expect("write");
        path
    };
    let (token, config) = (big("token", (64 << 10) + 1), big("c.toml", (16 << 20) + 1));
    let (cal, creds) = (
        big("cal.txt", (16 << 20) + 1),
        big("u.creds", (1 << 20) + 1),
    );
    let pem = big("cert.pem", (1 << 20) + 1);
    let base = ["--file", s(&x)];
    // (every one a usage error, exit 2: files a flag names, read before the run)
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &["--serve", "0", "--serve-token-file", s(&token)],
            2,
            "--serve-token-file",
        ),
        (&["--config", s(&config)], 2, "--config"),
        (
            &["--calibration", "94", "--calibration-file", s(&cal)],
            2,
            "--calibration-file",
        ),
        (
            &[
                "--serve",
                "0",
                "--serve-tls-cert",
                s(&pem),
                "--serve-tls-key",
                s(&pem),
            ],
            2,
            "--serve-tls-cert",
        ),
        (
            &[
                "--output",
                "nats://127.0.0.1:1/rows",
                "--nats-creds",
                s(&creds),
            ],
            2,
            "--nats-creds",
        ),
    ];
    for (flags, code, flag) in cases {
        let out = run(&[&base[..], flags].concat());
        assert_clean_error(&out, code, &[flag, "larger than"]);
    }
}

/// A WAV header's 65535 channels under `--channel all` would make 65535 streams and files
/// (90 s of set-up deaf to Ctrl-C, audit of session 41): more than
/// `limits::MAX_CHANNEL_STREAMS` are refused before any is made, naming the input.
#[test]
fn a_header_with_more_channels_than_a_run_takes_is_refused_before_any_file_is_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let channels: u32 = 65535;
    let data = vec![0u8; 2 * channels as usize * 2];
    let mut wav = b"RIFF".to_vec();
    wav.extend((36 + data.len() as u32).to_le_bytes());
    wav.extend(b"WAVEfmt ");
    wav.extend(16u32.to_le_bytes());
    wav.extend(1u16.to_le_bytes());
    wav.extend((channels as u16).to_le_bytes());
    wav.extend(8000u32.to_le_bytes());
    wav.extend((8000 * 2 * channels).to_le_bytes());
    wav.extend(((2 * channels) as u16).to_le_bytes()); // (block align overflows u16, as in the audit)
    wav.extend(16u16.to_le_bytes());
    wav.extend(b"data");
    wav.extend((data.len() as u32).to_le_bytes());
    wav.extend(&data);
    let input = dir.path().join("wide.wav");
    std::fs::write(&input, wav).expect("write wav");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let args = ["--file", s(&input), "--frame", "2", "--channel", "all"];
    let out = run(&[&args[..], &["--output-dir", s(&out_dir)]].concat());
    assert_clean_error(&out, 1, &["wide.wav", "65535 channels", "at most 4096"]);
    let made = std::fs::read_dir(&out_dir).expect("ls").count();
    assert_eq!(made, 0, "no file made");
}
