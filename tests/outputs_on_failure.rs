//! What the outputs hold when something fails: a bad input among good ones ends only its own
//! streams (the good ones are analysed in full, the run exits 1 naming the bad one); every
//! destination is checked before any input is read; names for inputs of the same stem; frame
//! sizes past the limit refused up front.

use crate::common;

use common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn s(path: &Path) -> &str {
    path.to_str().expect("utf8 path")
}

#[test]
fn a_bad_input_among_good_ones_ends_only_its_own_streams() {
    let dir = tempfile::tempdir().expect("tempdir");
    let signal = noise(100_000, 11);
    let good_text = dir.path().join("good1.txt");
    write_text_samples(&good_text, &signal);
    // 5000 good samples (4 whole frames of 1024), then a bad line, then more samples
    let bad_text = dir.path().join("bad.txt");
    let mut text: String = signal[..5000].iter().map(|v| format!("{v}\n")).collect();
    text.push_str("foo\n1.0\n");
    std::fs::write(&bad_text, text).expect("write");
    let good_f32 = dir.path().join("good2.f32");
    write_f32(&good_f32, &noise(1 << 20, 12));
    // range-read: NaN at sample 600 000 ends the stream at the start of the job holding it
    let mut nan_signal = noise(1 << 20, 13);
    nan_signal[600_000] = f64::NAN;
    let bad_f32 = dir.path().join("badnan.f32");
    write_f32(&bad_f32, &nan_signal);

    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let meta = dir.path().join("meta.json");
    let inputs = [&good_text, &bad_text, &good_f32, &bad_f32];
    let mut args = vec![
        "--frame",
        "1024",
        "--format",
        "f32",
        "--output-dir",
        s(&out_dir),
    ];
    args.extend(["--meta", s(&meta)]);
    for input in inputs {
        args.extend(["--file", s(input)]);
    }
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let err = stderr_text(&out);
    assert!(
        err.contains("bad.txt") && err.contains("line 5001"),
        "{err}"
    );

    // the good inputs: exactly what a run of each alone writes
    for good in [&good_text, &good_f32] {
        let alone = dir.path().join("alone.f32");
        let solo = run(&[
            "--file",
            s(good),
            "--frame",
            "1024",
            "--format",
            "f32",
            "--output",
            s(&alone),
        ]);
        assert!(solo.status.success(), "{}", stderr_text(&solo));
        let name = format!(
            "{}.f32",
            good.file_stem().and_then(|f| f.to_str()).expect("stem")
        );
        let got = std::fs::read(out_dir.join(&name)).expect("good output");
        assert!(
            got == std::fs::read(&alone).expect("alone"),
            "{name} differs from a run of it alone"
        );
    }
    // the bad ones: the whole frames before the error, nothing after it
    let row = 513 * 4;
    let bad_rows = std::fs::read(out_dir.join("bad.f32"))
        .expect("bad output")
        .len()
        / row;
    assert_eq!(bad_rows, 4);
    let nan_rows = std::fs::read(out_dir.join("badnan.f32"))
        .expect("nan output")
        .len()
        / row;
    assert!(
        nan_rows <= 600_000 / 1024,
        "{nan_rows} rows reach past the NaN"
    );

    // --meta says what was written, and why the run failed
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert!(
        doc["error"].as_str().is_some_and(|e| e.contains("bad")),
        "{doc}"
    );
    assert_eq!(doc["inputs"][1]["frames"], 4);
    assert_eq!(doc["inputs"][3]["frames"].as_u64(), Some(nan_rows as u64));
}

/// Read in sequence (a pipe, a raw file with range reading off, a WAV on stdin), a bad value's
/// block still gives every whole frame before it (helper-40: none of 58, or a block's worth
/// of 3515 lost).
#[test]
fn a_bad_value_read_in_sequence_keeps_every_whole_frame_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut x = noise(20_000, 14);
    x[15_000] = f64::NAN;
    let raw = dir.path().join("nan.f32");
    write_f32(&raw, &x);
    let wav = dir.path().join("nan.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 8000,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut writer = hound::WavWriter::create(&wav, spec).expect("wav");
    for v in &x {
        writer.write_sample(*v as f32).expect("sample");
    }
    writer.finalize().expect("finalize");
    let rows = |input: &Path, args: &[&str], range_read: &str| {
        let out = fftd()
            .args(args)
            .args(["--frame", "256", "--format", "csv", "--device", "cpu"])
            .env("FFTD_RANGE_READ", range_read)
            .stdin(std::fs::File::open(input).expect("open"))
            .output()
            .expect("run fftd");
        assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
        assert!(stderr_text(&out).contains("NaN"), "{}", stderr_text(&out));
        stdout_text(&out).lines().count() - 1
    };
    let whole = 15_000 / 256;
    let piped = ["--file", "-", "--input-format", "f32", "--rate", "8000"];
    assert_eq!(rows(&raw, &piped, "1"), whole, "stdin");
    let named = ["--file", s(&raw), "--rate", "8000"];
    assert_eq!(rows(&raw, &named, "0"), whole, "FFTD_RANGE_READ=0");
    assert_eq!(rows(&wav, &["--file", "-"], "1"), whole, "a WAV on stdin");
}

/// Runs fftd on a stdin pipe that stays open and sends nothing: only a check made before any
/// input is read can end it.
fn fails_before_reading(extra: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let mut child = fftd()
        .args(["--device", "cpu", "--file", "-", "--frame", "64"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    while child.try_wait().expect("try_wait").is_none() {
        // (the bug waits for input for ever, the design refuses at once: the limit only
        // bounds a failure, so it is generous)
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{extra:?}: fftd waited for input instead of refusing its destination");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().expect("output"), started.elapsed())
}

#[test]
fn every_destination_is_checked_before_any_input_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no/such/folder/meta.json");
    let folder = dir.path().to_str().expect("utf8");
    let new_folder = format!("{folder}/new/");
    let dangling = dir.path().join("dangling.csv");
    std::os::unix::fs::symlink(&missing, &dangling).expect("symlink");
    for (flag, path, needle, code) in [
        // a link to a folder that is not there (before: "dangling.csv: No such file", exit 1)
        ("--output", s(&dangling), "whose folder is not there", 2),
        ("--meta", "/dev/full", "No space left", 1),
        ("--meta", s(&missing), "no such directory", 2),
        ("--output", "/dev/full", "No space left", 1),
        ("--output", s(&missing), "no such directory", 2),
        (
            "--output",
            folder,
            "is a directory, not a file (--output-dir",
            2,
        ),
        ("--trace", folder, "is a directory, not a file", 2),
        ("--events", folder, "is a directory, not a file", 2),
        ("--events", s(&missing), "no such directory", 2),
        // a folder's name that is no folder (helper-39: "newdir/: Is a directory", exit 1)
        (
            "--output",
            &new_folder,
            "ends in /, a folder's name: give a file (--output-dir",
            2,
        ),
        (
            "--meta",
            &new_folder,
            "ends in /, a folder's name: give a file",
            2,
        ),
    ] {
        let mut args = vec![flag, path];
        if flag == "--events" {
            args.extend(["--alert", "name=hum,band=900-1100,above=-20"]);
        }
        let (out, _) = fails_before_reading(&args);
        // (the message names the flag with its path)
        assert_clean_error(&out, code, &[&format!("{flag} {path}"), needle]);
    }
}

/// The names of the files `inputs` give in a new folder `out` under `dir` (`--output-dir`, csv).
fn output_dir_names(dir: &Path, out: &str, inputs: &[&Path]) -> Vec<String> {
    let out_dir = dir.join(out);
    std::fs::create_dir(&out_dir).expect("mkdir");
    let mut args: Vec<&str> = inputs.iter().flat_map(|p| ["--file", s(p)]).collect();
    args.extend([
        "--frame",
        "64",
        "--format",
        "csv",
        "--output-dir",
        s(&out_dir),
    ]);
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let mut names: Vec<String> = std::fs::read_dir(&out_dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn inputs_of_the_same_stem_are_told_apart_by_stream_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["a", "b"] {
        std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        write_text_samples(&dir.path().join(sub).join("x.txt"), &noise(256, 1));
    }
    let (a, b) = (dir.path().join("a/x.txt"), dir.path().join("b/x.txt"));
    let names = output_dir_names(dir.path(), "out", &[&a, &b]);
    assert_eq!(names, ["x-0.csv", "x-1.csv"]);
    // an input whose own stem is what the second x would get (helper-34: "the same file")
    let own = dir.path().join("x-1.txt");
    write_text_samples(&own, &noise(256, 2));
    let names = output_dir_names(dir.path(), "out2", &[&own, &a, &b]);
    assert_eq!(names, ["x-1-2.csv", "x-1.csv", "x-2.csv"]);
}

/// An input with no samples, or too few bytes for one, is found while planning, before the
/// output is created: a file the output names is left as it was (helper-34: it was emptied by
/// a run that wrote nothing).
#[test]
fn an_input_with_no_samples_leaves_an_existing_output_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("empty.f32"), b"").expect("write");
    std::fs::write(d.join("empty.cu8"), b"").expect("write");
    // a WAV header (16-bit mono, 8 kHz) whose data chunk holds nothing
    let mut wav =
        b"RIFF\x24\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\x40\x1f\0\0\x80\x3e\0\0\x02\0\x10\0"
            .to_vec();
    wav.extend_from_slice(b"data\0\0\0\0");
    std::fs::write(d.join("nodata.wav"), &wav).expect("write");
    // shorter than one sample frame (session 48's audit: refused after the output was emptied)
    std::fs::write(d.join("short.f32"), b"ab").expect("write");
    std::fs::write(d.join("short.cs16"), b"abc").expect("write");
    let mut one_byte = wav[..wav.len() - 4].to_vec();
    one_byte.extend_from_slice(b"\x01\0\0\0\x07");
    std::fs::write(d.join("onebyte.wav"), &one_byte).expect("write");
    let mut cut = wav[..wav.len() - 4].to_vec();
    cut.extend_from_slice(b"\x64\0\0\0\x07"); // 100 bytes said, 1 there
    std::fs::write(d.join("cut.wav"), &cut).expect("write");
    // a SigMF dataset too short for one sample of its own type (helper-44: checked at f32's)
    let sigmf = |name: &str, datatype: &str, data: &[u8]| {
        let meta = format!(
            r#"{{"global":{{"core:datatype":"{datatype}","core:sample_rate":8000,"core:version":"1.2.0"}},"captures":[{{"core:sample_start":0}}],"annotations":[]}}"#
        );
        std::fs::write(d.join(format!("{name}.sigmf-meta")), meta).expect("write");
        std::fs::write(d.join(format!("{name}.sigmf-data")), data).expect("write");
    };
    sigmf("c32", "cf32_le", b"abcde");
    sigmf("c8", "ci8", b"a");
    for (input, needle) in [
        (
            "c32.sigmf-data",
            "holds 5 byte(s), less than one 8-byte sample frame",
        ),
        (
            "c8.sigmf-data",
            "holds 1 byte(s), less than one 2-byte sample frame",
        ),
        ("empty.f32", "is empty"),
        ("empty.cu8", "is empty"),
        ("nodata.wav", "WAV file contains no samples"),
        (
            "short.f32",
            "holds 2 byte(s), less than one 4-byte sample frame",
        ),
        (
            "short.cs16",
            "holds 3 byte(s), less than one 4-byte sample frame",
        ),
        (
            "onebyte.wav",
            "samples are 1 byte(s), less than one 2-byte sample frame",
        ),
        (
            "cut.wav",
            "samples are 1 byte(s), less than one 2-byte sample frame",
        ),
    ] {
        for format in ["csv", "npy", "f32"] {
            let keep = d.join(format!("keep.{format}"));
            std::fs::write(&keep, b"precious").expect("write");
            let out = run(&[
                "--file",
                s(&d.join(input)),
                "--format",
                format,
                "--output",
                s(&keep),
            ]);
            assert_clean_error(&out, 1, &[input, needle]);
            let kept = std::fs::read(&keep).expect("read");
            assert_eq!(kept, b"precious", "{input} {format}");
        }
    }
}

/// An input that fails while it is read, before its first whole frame (empty raw stdin, a bad
/// line of text), leaves an output file that holds bytes as it was, in every format (helper-47:
/// emptied, or an npy of no rows); a run that ends well with no rows still empties it.
#[test]
fn an_input_failing_before_its_first_row_leaves_an_existing_output_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let bad_text = d.join("bad.txt");
    std::fs::write(&bad_text, "0.5\n0.25\nabc\n").expect("write");
    for format in ["csv", "npy", "f32", "png"] {
        let keep = d.join(format!("keep.{format}"));
        std::fs::write(&keep, b"precious").expect("write");
        let out = fftd()
            .args(["--file", "-", "--input-format", "f32", "--frame", "64"])
            .args(["--format", format, "--output", s(&keep)])
            .stdin(Stdio::null())
            .output()
            .expect("run fftd");
        assert_clean_error(&out, 1, &["-: is empty"]);
        assert_eq!(std::fs::read(&keep).expect("read"), b"precious", "{format}");
        let out = run(&[
            "--file",
            s(&bad_text),
            "--format",
            format,
            "--output",
            s(&keep),
        ]);
        assert_clean_error(&out, 1, &["bad.txt: line 3"]);
        assert_eq!(std::fs::read(&keep).expect("read"), b"precious", "{format}");
    }
    // nor is a new file or stdout given a header of rows that never came (review of session
    // 51: a new npy said (0, 2049), stdout got the csv header, after exit 1)
    let new = d.join("new.npy");
    let out = run(&[
        "--file",
        s(&bad_text),
        "--format",
        "npy",
        "--output",
        s(&new),
    ]);
    assert_clean_error(&out, 1, &["bad.txt: line 3"]);
    assert_eq!(std::fs::read(&new).map_or(0, |b| b.len()), 0);
    let out = run(&["--file", s(&bad_text), "--format", "csv"]);
    assert_clean_error(&out, 1, &["bad.txt: line 3"]);
    assert!(out.stdout.is_empty(), "{}", stdout_text(&out));
    // a run that ends well writes its output over the file
    let keep = d.join("keep.csv");
    let short = d.join("short.txt");
    std::fs::write(&short, "0.5\n").expect("write");
    let args = ["--file", s(&short), "--frame", "64", "--tail", "drop"];
    let out = run(&[&args[..], &["--format", "csv", "--output", s(&keep)]].concat());
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_ne!(std::fs::read(&keep).expect("read"), b"precious");
}

/// A placed output (a range-read input's f32/npy rows written into a mapped file) fills a part
/// file renamed over the output at the end: a first value that fails leaves an earlier run's
/// file as it was, with its mode, and no part file; a symlink stays a link to the new rows
/// (before: the output was created at full size at set-up, and emptied by the failure).
#[test]
fn a_placed_output_failing_at_its_first_value_leaves_an_existing_file_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut signal = noise(1 << 20, 21); // 4 MiB of rows at --frame 1024: placed
    let good = d.join("good.f32");
    write_f32(&good, &signal);
    signal[0] = f64::NAN;
    let bad = d.join("nan0.f32");
    write_f32(&bad, &signal);
    let expected = d.join("expected.npy");
    let args = |input: &Path, output: &Path| {
        let (i, o) = (s(input).to_string(), s(output).to_string());
        [
            &["--file", &i, "--frame", "1024", "--format", "npy"][..],
            &["--output", &o],
        ]
        .concat()
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
    };
    let ordinary = fftd()
        .args(args(&good, &expected))
        .env("FFTD_PLACED_OUTPUT", "0")
        .output()
        .expect("run");
    assert!(ordinary.status.success(), "{}", stderr_text(&ordinary));
    let keep = d.join("keep.npy");
    std::fs::write(&keep, b"precious").expect("write");
    std::fs::set_permissions(&keep, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let placed = |input: &Path, output: &Path| {
        let out = fftd()
            .args(args(input, output))
            .env("RUST_LOG", "fftd=debug")
            .output()
            .expect("run");
        assert!(
            stderr_text(&out).contains("rows placed by the encoders"),
            "{}",
            stderr_text(&out)
        );
        out
    };
    assert_eq!(placed(&bad, &keep).status.code(), Some(1));
    assert_eq!(std::fs::read(&keep).expect("read"), b"precious");
    let left: Vec<_> = std::fs::read_dir(d)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        !left.iter().any(|n| n.to_string_lossy().ends_with(".part")),
        "{left:?}"
    );
    assert!(placed(&good, &keep).status.success());
    assert_eq!(
        std::fs::read(&keep).expect("read"),
        std::fs::read(&expected).expect("read")
    );
    let mode = std::fs::metadata(&keep).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
    let link = d.join("link.npy");
    std::os::unix::fs::symlink(&keep, &link).expect("symlink");
    std::fs::write(&keep, b"precious").expect("write");
    assert!(placed(&good, &link).status.success());
    assert!(std::fs::symlink_metadata(&link)
        .expect("lstat")
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(&keep).expect("read"),
        std::fs::read(&expected).expect("read")
    );
}

/// A stream that sent nothing (an empty stdin: an error, the sidecar written all the same)
/// still used the frame the run asked for: `--meta` names it and its bins (helper-36: "frame":
/// 0, "bins": 1).
#[test]
fn the_meta_of_an_input_that_sent_nothing_names_the_frame_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("m.json");
    let args = ["--file", "-", "--input-format", "f32", "--frame", "800"];
    let out = run(&[&args[..], &["--output", "/dev/null", "--meta", s(&meta)]].concat());
    assert_clean_error(&out, 1, &["-: is empty"]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(
        (doc["frame"].as_u64(), doc["bins"].as_u64()),
        (Some(800), Some(401))
    );
    assert_eq!(doc["inputs"][0]["frames"], 0);
    assert_eq!(doc["inputs"][0]["bins"], 401);
    assert_eq!(doc["inputs"][0]["hz_per_bin"].as_f64(), Some(1.0 / 800.0));
}

#[test]
fn a_frame_past_the_limit_is_refused_naming_it() {
    let out = run(&["--file", "examples/input.txt", "--frame", "268435456"]);
    assert_clean_error(&out, 2, &["--frame 268435456", "67108864"]);
}

/// Runs fftd with `args` under a file-size limit of 600 KiB (`ulimit -f`, SIGXFSZ ignored): a
/// write past it fails as on a full disk, with EFBIG for ENOSPC.
/// When the output fails first (a full disk, here a file-size limit) and `--meta` then fails too,
/// the error is the output's, the sidecar's a warning before it (helper-47: the message named
/// only the meta file).
#[test]
fn an_output_that_fails_first_is_the_error_named_before_the_meta() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("n.f32");
    write_f32(&input, &noise(4096, 5));
    let (output, meta) = (dir.path().join("o.csv"), dir.path().join("m.json"));
    let mut args = vec!["--frame", "64", "--format", "csv"];
    args.extend(["--output", s(&output), "--meta", s(&meta)]);
    for _ in 0..3 {
        args.extend(["--file", s(&input)]); // (a sidecar past 1 KiB)
    }
    let out = std::process::Command::new("bash")
        .args(["-c", "ulimit -f 1; trap '' XFSZ; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_fftd"))
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_text(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("o.csv") && last.contains("File too large"),
        "{err}"
    );
    assert!(
        err.contains("cannot write --meta") && err.contains("m.json"),
        "{err}"
    );
}

/// The rows an npy file's header counts ('shape': (N, bins)), if it has one yet.
fn npy_rows(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let head = String::from_utf8_lossy(bytes.get(..128)?).into_owned();
    let (_, after) = head.split_once("'shape': (")?;
    after.split(',').next()?.trim().parse().ok()
}

/// A live npy output's header counts the rows flushed so far: a process ended at once (SIGKILL,
/// a second Ctrl-C) leaves a file numpy loads with them (helper-50: 69 rows under a header of
/// (0, 0), so np.load gave an empty array).
#[test]
fn an_npy_of_a_process_killed_mid_run_counts_the_rows_it_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("long.f32");
    write_f32(&input, &noise(8000 * 60, 8)); // a minute at 8 kHz, paced by --realtime
    let npy = dir.path().join("live.npy");
    let mut child = fftd()
        .args([
            "--file",
            s(&input),
            "--rate",
            "8000",
            "--realtime",
            "--frame",
            "256",
        ])
        .args(["--format", "npy", "--output", s(&npy)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    while npy_rows(&npy).unwrap_or(0) < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(50),
            "no rows counted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill");
    child.wait().expect("wait");
    let rows = npy_rows(&npy).expect("a header");
    let len = std::fs::metadata(&npy).expect("stat").len();
    assert!(
        rows >= 3 && 128 + rows * 129 * 4 <= len,
        "{rows} rows in {len} bytes"
    );
}

/// An npy file closed to keep within the open-file limit (`--output-dir` with more outputs than
/// descriptors) counts its rows in its header as it closes: a process killed before it is
/// reopened leaves it loadable (helper-51: a header of (0, 0) over 40 rows). Six channels of
/// stdin under `ulimit -n 20`, killed once every file's header counts its 40 rows.
#[test]
fn an_npy_closed_for_room_counts_its_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("od");
    std::fs::create_dir(&out).expect("mkdir");
    let mut child = std::process::Command::new("bash")
        .args(["-c", "ulimit -n 20; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_fftd"))
        .args(["--file", "-", "--input-format", "f32", "--channels", "6"])
        .args(["--channel", "all", "--frame", "256", "--format", "npy"])
        .args(["--output-dir", s(&out), "--device", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut stdin, &f32_bytes(&noise(6 * 256 * 40, 9))).expect("feed");
    let names: Vec<_> = (0..6)
        .map(|c| out.join(format!("stdin-ch{c}.npy")))
        .collect();
    let started = Instant::now();
    while !names.iter().all(|n| npy_rows(n) == Some(40)) {
        let counted: Vec<_> = names.iter().map(|n| npy_rows(n)).collect();
        assert!(started.elapsed() < Duration::from_secs(60), "{counted:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill");
    child.wait().expect("wait");
    drop(stdin);
    for name in &names {
        let len = std::fs::metadata(name).expect("stat").len();
        assert_eq!(len, 128 + 40 * 129 * 4, "{name:?}");
    }
}

/// `--meta` and `--trace` are written at the end: an earlier run's files there are only
/// checked at set-up, so a run stopped before its end (here while its `--events` FIFO waits
/// for a reader: exit 0, nothing analysed) leaves them as they were (helper-51: both emptied).
/// The signal may come before or during that wait: either way the run stops there.
#[test]
fn a_run_stopped_before_its_end_leaves_the_meta_and_trace_as_they_were() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let input = d.join("x.f32");
    write_f32(&input, &noise(8000, 10));
    let fifo = d.join("ev.fifo");
    mkfifo(&fifo);
    let (meta, trace) = (d.join("m.json"), d.join("t.json"));
    std::fs::write(&meta, "{\"old\":1}\n").expect("write");
    std::fs::write(&trace, "old trace\n").expect("write");
    let child = fftd()
        .args(["--file", s(&input), "--rate", "8000", "--frame", "256"])
        .args([
            "--meta",
            s(&meta),
            "--trace",
            s(&trace),
            "--output",
            "/dev/null",
        ])
        .args([
            "--alert",
            "name=a,band=100-200,above=0",
            "--events",
            s(&fifo),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_until_signals_caught(child.id());
    let ok = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(
        std::fs::read_to_string(&meta).expect("read"),
        "{\"old\":1}\n"
    );
    assert_eq!(
        std::fs::read_to_string(&trace).expect("read"),
        "old trace\n"
    );
}

fn past_a_size_limit(args: &[&str]) -> std::process::Output {
    std::process::Command::new("bash")
        .args(["-c", "ulimit -f 600; trap '' XFSZ; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_fftd"))
        .args(args)
        .env("RUST_LOG", "fftd=warn")
        .stdin(Stdio::null())
        .output()
        .expect("bash")
}

/// A disk that fills while an npy is written (here a file-size limit): the file holds the whole
/// rows that fit, its header counting them, numpy-readable (before: the header said (0, 0) over
/// 299 rows).
#[test]
fn an_npy_cut_by_a_full_disk_counts_the_rows_it_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("n.f32");
    write_f32(&input, &noise(1 << 20, 3));
    let args = [
        "--file",
        s(&input),
        "--frame",
        "1024",
        "--format",
        "npy",
        "--device",
        "cpu",
    ];
    let whole = dir.path().join("whole.npy");
    let full_run = run(&[&args[..], &["--output", s(&whole)]].concat());
    assert_silent_success(&full_run);
    let whole = std::fs::read(&whole).expect("read");
    let cut = dir.path().join("o.npy");
    let out = past_a_size_limit(&[&args[..], &["--output", s(&cut)]].concat());
    assert_clean_error(&out, 1, &["o.npy", "File too large"]);
    let cut = std::fs::read(&cut).expect("read");
    let (header, row) = (128, 513 * 4);
    let rows = (cut.len() - header) / row;
    assert!(rows > 100 && rows < 1024, "{rows} rows");
    assert_eq!(cut.len(), header + rows * row, "whole rows only");
    let text = String::from_utf8_lossy(&cut[..header]);
    assert!(text.contains(&format!("'shape': ({rows}, 513)")), "{text}");
    assert_eq!(cut[header..], whole[header..header + rows * row]);
}
