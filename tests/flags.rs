//! Flags, config files and subcommands say what is wrong (issue 22, section 4): every flag that
//! takes a number, given -1, names itself and what it takes (never clap's "unexpected argument
//! '-1'"); config-file errors are usage errors in plain words with long values cut; each
//! subcommand takes only the flags it uses; `fftd bench` checks its whole sweep before timing
//! anything and prints each row once.

use crate::common;

use common::*;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// A text input of 4096 samples.
fn samples(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("x.txt");
    write_text_samples(&path, &noise(4096, 22));
    path
}

/// Value names of flags that take a number: `fftd::app::cli::NUMERIC_VALUE_NAMES` but `DB|auto`
/// (`--gain -1` without an rtl_tcp:// input is refused for the missing input, not the value).
const NUMERIC: &[&str] = &[
    "N",
    "H",
    "B",
    "C",
    "HZ",
    "MS",
    "SECONDS",
    "REL",
    "WxH",
    "MIN:MAX",
    "N|DURATION",
    "N|whole",
    "mix|N|all",
    "A..B|LIST",
    "FRACTION",
    "DURATION",
    "DURATION|SIZE",
    "forever|N|DURATION",
    "N|max",
    "A,B",
    "LOW:HIGH:BIN",
    "ADDR",
];

/// The flags `fftd ARGS --help` lists whose value is a number.
fn numeric_flags(args: &[&str]) -> Vec<String> {
    let out = run(&[args, &["--help"]].concat());
    assert!(out.status.success(), "{args:?} --help");
    let mut flags = Vec::new();
    for full in stdout_text(&out).lines() {
        // flags are indented at most 6 spaces, their descriptions 10
        let line = full.trim_start();
        if full.len() - line.len() > 6 {
            continue;
        }
        let line = line.split_once(", ").map_or(
            line,
            |(short, long)| {
                if short.len() == 2 {
                    long
                } else {
                    line
                }
            },
        );
        let mut words = line.split_whitespace();
        let (Some(flag), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        let value = value.trim_start_matches('[').trim_end_matches(']');
        let value = value.trim_start_matches('<').trim_end_matches('>');
        if flag.starts_with("--") && NUMERIC.contains(&value) && !flags.iter().any(|f| f == flag) {
            flags.push(flag.to_string());
        }
    }
    flags
}

#[test]
fn every_numeric_flag_given_minus_one_names_itself_and_what_it_takes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    // each subcommand with a valid command line the flag is added to
    let commands: [(&[&str], Vec<&str>, usize); 5] = [
        (&[], vec!["--file", s(&x)], 15),
        (&["check"], vec!["check", "--file", s(&x)], 9),
        (&["bench"], vec!["bench", "--device", "cpu"], 7),
        (
            &["publish"],
            vec![
                "publish",
                "--to",
                "nats://127.0.0.1:9/frames.x",
                "--file",
                s(&x),
            ],
            7,
        ),
        (
            &["fleet", "setup"],
            vec!["fleet", "setup", "--server", "nats://127.0.0.1:9"],
            5,
        ),
    ];
    // what the issue named, and a few more: the range each message gives (subcommand, flag)
    let ranges: &[(&str, &str, &str)] = &[
        ("", "--average", "frames >= 1"),
        ("", "--channel", "0-based channel number"),
        ("", "--png-size", "320x240"),
        ("", "--connect-timeout", "above 0 and at most 3600 s"),
        ("", "--hop", "at least 1"),
        ("", "--idle-exit", "above 0 and at most 604800 s"),
        ("check", "--tolerance", "above 0"),
        ("bench", "--reps", "from 1 to"),
        ("bench", "--average", "from 1 to"),
        ("publish", "--block-frames", "from 1 to 65536"),
        ("fleet", "--replicas", "from 1 to 5"),
    ];
    let mut named = Vec::new();
    for (sub, base, at_least) in &commands {
        let flags = numeric_flags(sub);
        assert!(flags.len() >= *at_least, "{sub:?}: {flags:?}");
        for flag in flags {
            let out = run(&[&base[..], &[flag.as_str(), "-1"]].concat());
            let err = stderr_text(&out);
            assert!(
                !err.contains("unexpected argument"),
                "{sub:?} {flag}: {err}"
            );
            if flag == "--fmin" || flag == "--fmax" {
                // negative frequencies are bins of complex input: taken, and a range with no bin
                // of this real input in it is an error naming both flags
                assert!(
                    out.status.success() || err.contains("--fmin/--fmax"),
                    "{flag}: {err}"
                );
                continue;
            }
            if flag == "--calibration" {
                // a full-scale sine may read below 0 dB in the calibrated unit (dB re 1 g, ...)
                assert!(out.status.success(), "{flag}: {err}");
                continue;
            }
            let mut needles = vec![format!("{flag} -1: ")];
            let sub = sub.first().copied().unwrap_or_default();
            if let Some((_, _, range)) = ranges.iter().find(|(c, f, _)| (*c, *f) == (sub, &flag)) {
                needles.push(range.to_string());
            }
            let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
            assert_clean_error(&out, 2, &needles);
            named.push((sub, flag));
        }
    }
    for (sub, flag, _) in ranges {
        assert!(
            named.iter().any(|n| n == &(*sub, flag.to_string())),
            "{sub} {flag} not tried"
        );
    }
    // a value that only starts like a number
    let out = run(&["--file", s(&x), "--png-size", "-1x-1"]);
    assert_clean_error(&out, 2, &["--png-size -1x-1: ", "320x240", "16384"]);
    let out = run(&["--file", s(&x), "--average", "-250ms"]);
    assert_clean_error(&out, 2, &["--average -250ms: ", "frames >= 1"]);
    // a microphone's index goes to the device lookup, which names it
    let out = run(&["--mic", "-1", "--max-frames", "1"]);
    let err = stderr_text(&out);
    assert!(
        !out.status.success() && !err.contains("unexpected argument"),
        "{err}"
    );
}

#[test]
fn png_size_help_gives_the_pixel_cap() {
    let help = stdout_text(&run(&["--help"]));
    assert!(help.contains("64 megapixels"), "{help}");
}

#[test]
fn a_config_file_that_is_not_utf8_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let config = dir.path().join("latin1.toml");
    std::fs::write(&config, b"frame = 64\n# r\xe9glages\n").expect("write");
    for args in [
        vec!["--file", s(&x), "--config", s(&config)],
        vec!["check", "--file", s(&x), "--config", s(&config)],
    ] {
        assert_clean_error(&run(&args), 2, &["latin1.toml:2", "not UTF-8"]);
    }
    // one that cannot be read is a usage error too
    let missing = dir.path().join("none.toml");
    assert_clean_error(
        &run(&["--file", s(&x), "--config", s(&missing)]),
        2,
        &["--config", "none.toml"],
    );
}

/// The input is one choice: a config file's `mic` (or `file`) gives way to a command line that
/// names an input (helper-40: `mic` in the file and `--file` gave "use either --file or --mic").
#[test]
fn a_command_line_input_replaces_the_config_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let config = dir.path().join("mic.toml");
    std::fs::write(&config, "mic = \"hw:99\"\nframe = 64\n").expect("write");
    let alone = run(&["--file", s(&x), "--frame", "64"]);
    let with_config = run(&["--file", s(&x), "--config", s(&config)]);
    assert_silent_success(&with_config);
    assert_eq!(with_config.stdout, alone.stdout);
    let other = dir.path().join("other.txt");
    std::fs::write(&other, "1\n2\n").expect("write");
    std::fs::write(&config, format!("file = [{:?}]\nframe = 64\n", s(&other))).expect("write");
    let with_config = run(&["--file", s(&x), "--config", s(&config)]);
    assert_eq!(
        with_config.stdout, alone.stdout,
        "the command line's file alone"
    );
}

/// One config file serves runs of every kind (README "Config file"): a key that only shapes a
/// mode the run does not use waits for a run that does, where the same flag on the command line
/// is still refused with its reason (helper-47: `png-size` in a file refused every text run).
#[test]
fn a_shared_config_files_mode_keys_wait_for_the_runs_that_use_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let config = dir.path().join("shared.toml");
    let keys = [
        "frame = 64",
        "png-size = \"800x600\"",
        "png-db = \"-100:0\"",
        "rotate = \"1h\"",
        "record-on-alert = \"recordings\"",
        "pre = \"2s\"",
        "post = \"5s\"",
        "events = \"events.ndjson\"",
        "tone = 1000.0",
        "unit = \"dB SPL\"",
        "average-mode = \"max\"",
        "idle-exit = \"30s\"",
        "rows-per-message = \"max\"",
        "serve-max-connections = 4",
        "serve-token = \"s3cret\"",
        "serve-allow-host = [\"spectra.example.org\"]",
        "gain = \"auto\"",
        "sweep = \"88M:108M:10k\"",
        "crop = 0.2",
        "settle = \"150ms\"",
        "sweeps = 1",
    ];
    std::fs::write(&config, keys.join("\n")).expect("write");
    let alone = run(&["--file", s(&x), "--frame", "64"]);
    let with_config = run(&["--file", s(&x), "--config", s(&config)]);
    assert_silent_success(&with_config);
    assert_eq!(with_config.stdout, alone.stdout);
    assert!(!dir.path().join("events.ndjson").exists());
    // an uncalibrated levels run leaves the file's unit out: its levels are dBFS
    let levels = ["--levels", "--format", "ndjson"];
    let out = run(&[&["--file", s(&x), "--config", s(&config)][..], &levels].concat());
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(stdout_text(&out).contains("\"unit\":\"dBFS\""));
    // the command line's flag is the user asking for it: refused with the reason
    let out = run(&["--file", s(&x), "--config", s(&config), "--tone", "1000"]);
    assert_clean_error(&out, 2, &["--tone HZ picks --distortion's fundamental"]);
    // a run that uses the mode takes the file's key, and judges its value
    std::fs::write(&config, "frame = 64\ndistortion = true\ntone = -5.0\n").expect("write");
    let out = run(&["--file", s(&x), "--config", s(&config)]);
    assert_clean_error(&out, 2, &["shared.toml:3: tone = -5", "above 0 Hz"]);
    std::fs::write(&config, "frame = 64\ncrop = 1.5\n").expect("write");
    let out = run(&["--file", s(&x), "--config", s(&config)]);
    assert_clean_error(
        &out,
        2,
        &["shared.toml:2: crop = 1.5", "a fraction from 0 up to 1"],
    );
}

#[test]
fn a_long_config_value_is_echoed_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let config = dir.path().join("long.toml");
    // (a MiB: within the bound a config file is read to, 16 MiB, `types::small_file`)
    let long = "7".repeat(1 << 20);
    for (key, value) in [
        ("frame", format!("\"{long}\"")),
        ("device", format!("\"{long}\"")),
        ("hop", format!("\"{long}\"")),
        ("average", format!("\"{long}s\"")),
    ] {
        std::fs::write(&config, format!("{key} = {value}\n")).expect("write");
        let out = run(&["--file", s(&x), "--config", s(&config)]);
        let err = stderr_text(&out);
        assert!(
            err.len() < 1000,
            "{key}: {} bytes: {}…",
            err.len(),
            &err[..300]
        );
        assert_clean_error(&out, 2, &["long.toml:1", key, "…"]);
    }
}

#[test]
fn config_messages_name_the_key_and_what_it_takes_without_internal_type_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let config = dir.path().join("c.toml");
    let cases: &[(&str, &[&str])] = &[
        (
            "frame = 1.5",
            &["frame = 1.5", "number of samples", "\"whole\""],
        ),
        ("frame = [64]", &["frame = [64]", "number of samples"]),
        ("hop = \"many\"", &["hop = \"many\"", "a whole number"]),
        ("rate = \"fast\"", &["rate = \"fast\"", "a number"]),
        ("window = 3", &["window = 3", "one of rect, hann"]),
        ("channel = -1", &["channel = -1", "channel number"]),
        ("png-size = true", &["png-size = true", "WxH"]),
        ("average = 1.5", &["average = 1.5", "number of frames"]),
        ("stats = \"no\"", &["stats = \"no\"", "true or false"]),
        (
            "file = \"a.wav\"",
            &["file = \"a.wav\"", "a list of strings"],
        ),
        (
            "max-frames = 99999999999999999999",
            &["max-frames", "a whole number"],
        ),
        ("fram = 64", &["unknown key 'fram'", "frame"]),
    ];
    let internal = [
        "FrameSize",
        "ChannelSelect",
        "PngSize",
        "AverageSpec",
        "i64",
        "f64",
        "i128",
        "u64",
        "sequence",
        "variant",
        "field",
        "wanted",
    ];
    for (text, needles) in cases {
        std::fs::write(&config, format!("{text}\n")).expect("write");
        let out = run(&["--file", s(&x), "--config", s(&config)]);
        assert_clean_error(&out, 2, &[&["c.toml:1: "][..], needles].concat());
        let err = stderr_text(&out);
        for name in internal {
            assert!(!err.contains(name), "{text}: '{name}' in {err}");
        }
    }
    // a key given twice is named, at its second line
    std::fs::write(&config, "hop = 256\nframe = 1024\nhop = 512\n").expect("write");
    let out = run(&["--file", s(&x), "--config", s(&config)]);
    assert_clean_error(&out, 2, &["c.toml:3: ", "hop is given twice"]);
}

#[test]
fn devices_takes_no_config_file_and_check_checks_every_key_of_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "frame = 64\nwindoww = \"hann\"\n").expect("write");
    // devices reads no config: a file given to it is refused, not ignored
    assert_clean_error(&run(&["devices", "--config", s(&bad)]), 2, &["--config"]);
    // check reads a run's config file: an unknown key is the same error as in a run
    for args in [
        vec!["--file", s(&x), "--config", s(&bad)],
        vec!["check", "--file", s(&x), "--config", s(&bad)],
    ] {
        assert_clean_error(&run(&args), 2, &["bad.toml:2", "unknown key 'windoww'"]);
    }
    // a wrong type in a key check does not use is still an error
    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "frame = 64\noutput = 5\n").expect("write");
    let out = run(&["check", "--file", s(&x), "--config", s(&typo)]);
    assert_clean_error(&out, 2, &["typo.toml:2", "output = 5"]);
    // nor a value a run would refuse in a key check does not use
    let serve = dir.path().join("serve.toml");
    std::fs::write(&serve, "frame = 64\n\nserve = \"notanaddr\"\n").expect("write");
    let out = run(&["check", "--file", s(&x), "--config", s(&serve)]);
    assert_clean_error(&out, 2, &["serve.toml:3: serve = notanaddr: no port"]);
    // and a run's output keys, well formed, are left to the run (a run's microphone too)
    let shared = dir.path().join("shared.toml");
    let text = "frame = 64\nformat = \"npy\"\noutput = \"never-written.npy\"\nmeta = \"m.json\"\nmic = \"\"\n";
    std::fs::write(&shared, text).expect("write");
    if std::env::var("FFTD_SKIP_OPENCL_TESTS").is_ok_and(|v| v == "1") {
        return;
    }
    let out = run(&["check", "--file", s(&x), "--config", s(&shared)]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(stdout_text(&out).contains("mismatches: 0 of"));
    assert!(!Path::new("never-written.npy").exists() && !dir.path().join("m.json").exists());
}

#[test]
fn each_subcommand_takes_and_lists_only_its_own_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    for (flag, value) in [
        ("--output", Some("o.txt")),
        ("--serve", Some("8080")),
        ("--meta", Some("m.json")),
        ("--realtime", None),
        ("--format", Some("csv")),
        ("--average", Some("4")),
    ] {
        let mut args = vec!["check", "--file", s(&x), flag];
        args.extend(value);
        let out = run(&args);
        // (clap's tip named a check flag that looks like it: --format, "did you mean --frame")
        let said = format!("{flag} is a flag of a run");
        assert_clean_error(&out, 2, &[&said, "not of fftd check; fftd check --help"]);
    }
    let help = stdout_text(&run(&["check", "--help"]));
    for flag in [
        "--output ",
        "--serve ",
        "--meta ",
        "--realtime",
        "--format ",
        "--mic [<DEVICE>]",
    ] {
        assert!(!help.contains(flag), "check --help lists {flag}: {help}");
    }
    for flag in [
        "--tolerance",
        "--config",
        "--file",
        "--frame",
        "--hop",
        "--window",
        "--device",
    ] {
        assert!(help.contains(flag), "check --help lacks {flag}: {help}");
    }
    // subcommands that read no config file take no --config
    for sub in [
        &["devices"][..],
        &["bench"],
        &["publish"],
        &["fleet", "setup"],
    ] {
        let help = stdout_text(&run(&[sub, &["--help"]].concat()));
        assert!(!help.contains("--config"), "{sub:?} --help lists --config");
    }
}

#[test]
fn fleet_setup_refuses_bad_names_before_connecting() {
    let setup = ["fleet", "setup", "--server", "nats://127.0.0.1:9"];
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--work-stream", "W", "--spectra-stream", "W"],
            &["both 'W'", "a stream each"],
        ),
        (
            &["--work-stream", "a b"],
            &["--work-stream 'a b'", "spaces"],
        ),
        (&["--spectra-stream", "a.b"], &["--spectra-stream 'a.b'"]),
        (&["--consumer", ""], &["--consumer ''"]),
        (&["--work-subject", ""], &["--work-subject ''"]),
        (
            &["--work-subject", ">.a"],
            &["--work-subject '>.a'", "only the last"],
        ),
        (
            &["--spectra-subject", "a.b*"],
            &["--spectra-subject 'a.b*'", "whole token"],
        ),
        (
            &["--work-subject", "spectra.>"],
            &["'spectra.>'", "overlap"],
        ),
        (
            &["--work-subject", "a.*.b", "--spectra-subject", "a.x.b"],
            &["'a.*.b'", "'a.x.b'", "overlap"],
        ),
    ];
    for (extra, needles) in cases {
        assert_clean_error(&run(&[&setup[..], extra].concat()), 2, needles);
    }
    let out = run(&["fleet", "setup", "--server", "nats://127.0.0.1:9/frames"]);
    assert_clean_error(&out, 2, &["--server", "no path ('frames')"]);
    // subjects that share no subject are taken (the connection then fails: nothing listens)
    let apart = ["--work-subject", "a.*.b", "--spectra-subject", "a.x.c"];
    let out = run(&[&setup[..], &apart].concat());
    assert_clean_error(&out, 1, &["cannot connect"]);
}

#[test]
fn an_empty_file_name_is_a_usage_error() {
    assert_clean_error(&run(&["--file", ""]), 2, &["--file ''", "path"]);
}

#[test]
fn an_argument_that_is_not_utf8_is_named_with_its_flag() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let name = OsStr::from_bytes(b"a\xff.txt");
    let with = |args: &[&OsStr]| fftd().args(args).output().expect("run fftd");
    let cases: [(Vec<&OsStr>, &[&str]); 3] = [
        (
            vec![OsStr::new("--file"), name],
            &["--file 'a\\xff.txt'", "not UTF-8", "--file - < NAME"],
        ),
        (
            vec![
                OsStr::new("--file=a\u{e9}"),
                OsStr::new("--frame"),
                OsStr::from_bytes(b"\xfe"),
            ],
            &["--frame '\\xfe': not UTF-8 text"],
        ),
        (
            vec![OsStr::new("bench"), OsStr::new("--sizes"), name],
            &["--sizes 'a\\xff.txt': not UTF-8 text"],
        ),
    ];
    for (args, needles) in cases {
        assert_clean_error(&with(&args), 2, needles);
    }
    // a path flag takes such a name; its messages show the byte (U+FFFD would name no file)
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("x.txt");
    std::fs::write(&input, "1\n2\n").expect("write");
    let missing = OsStr::from_bytes(b"/nonexistent\xff/c.toml");
    for (flag, code) in [("--config", 2), ("--output", 2)] {
        let out = with(&[
            OsStr::new("--file"),
            input.as_os_str(),
            OsStr::new(flag),
            missing,
        ]);
        assert_clean_error(&out, code, &["/nonexistent\\xff/c.toml"]);
    }
}

#[test]
fn bench_refuses_a_bad_sweep_before_timing_anything() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["--reps", "0"], &["--reps 0: ", "from 1 to"]),
        (
            &["--sizes", "2..2^40"],
            &["--sizes 2..2^40", "2^40", "2^26"],
        ),
        (
            &["--sizes", "1024,2^30"],
            &["--sizes 1024,2^30", "2^30", "2^26"],
        ),
        (
            &["--sizes", "2^20", "--batch", "1000"],
            &["--batch 1000", "2^26"],
        ),
        (
            &["--sizes", "4..8", "--bands", "mel:40"],
            &["--bands mel:40"],
        ),
        (
            &["--sizes", "1024", "--no-cpu"],
            &["--no-cpu", "nothing would be measured"],
        ),
        // taken and doing nothing: refused
        (&["--rate", "16000"], &["--rate 16000", "--bands"]),
        (&["--run-ms", "50"], &["--run-ms 50", "several devices"]),
        // what a run refuses (helper-42: bench summed power without a word)
        (
            &["--scale", "complex", "--bands", "mel:4"],
            &["--scale complex keeps re and im"],
        ),
        (
            &["--scale", "complex", "--average", "2"],
            &["--scale complex keeps re and im"],
        ),
    ];
    for (args, needles) in cases {
        let out = run(&[&["bench", "--device", "cpu"][..], args].concat());
        assert_clean_error(&out, 2, needles);
        assert!(out.stdout.is_empty(), "{args:?}: {}", stdout_text(&out));
    }
    // a --csv it cannot write is found before the timing, not after
    let csv = ["--csv", "/nonexistent/x.csv", "--sizes", "2..8"];
    let out = run(&[&["bench", "--device", "cpu"][..], &csv].concat());
    assert_clean_error(&out, 1, &["/nonexistent/x.csv"]);
    assert!(out.stdout.is_empty(), "{}", stdout_text(&out));
}

#[test]
fn bench_prints_each_row_once() {
    let out = run(&["bench", "--device", "cpu", "--sizes", "2..8", "--reps", "1"]);
    assert_silent_success(&out);
    let text = stdout_text(&out);
    for n in ["2", "4", "8"] {
        let rows = text
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(n))
            .count();
        assert_eq!(rows, 1, "n = {n}: {text}");
    }
    assert!(text.contains("break-even"), "{text}");
    // the heading says what was timed: --bands sums power spectra, whatever --scale says
    let bands = [
        "--sizes", "1024", "--reps", "1", "--bands", "mel:40", "--scale", "db",
    ];
    let out = run(&[&["bench", "--device", "cpu"][..], &bands].concat());
    assert_silent_success(&out);
    let head = stdout_text(&out);
    assert!(
        head.contains("scale power summed into --bands mel:40"),
        "{head}"
    );
}

/// Flags that a run's inputs give nothing to do are refused, naming the flag and the inputs:
/// `--channels` without a raw file or the microphone, `--fftshift` with real inputs only,
/// `--retry` with nothing to reopen, the NATS flags with no NATS server. Where one input of
/// several can use the flag, the run goes on.
#[test]
fn flags_the_inputs_give_nothing_to_do_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = samples(dir.path());
    let raw = dir.path().join("x.f32");
    write_f32(&raw, &noise(4096, 5));
    let wav = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tones.wav");
    let wav_by_bytes = dir.path().join("w.dat");
    std::fs::copy(&wav, &wav_by_bytes).expect("copy");
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--file", s(&wav), "--channels", "2"],
            &["--channels 2", "tones.wav gives its own channel count"],
        ),
        (
            &["--file", s(&wav), "--fftshift"],
            &["--fftshift", "tones.wav is real"],
        ),
        (
            &["--file", s(&raw), "--rate", "8000", "--fftshift"],
            &["--fftshift", "x.f32 is real"],
        ),
        // text whose first sample line is one number, and a WAV known by its bytes alone
        (
            &["--file", s(&text), "--fftshift"],
            &["--fftshift", "x.txt is real"],
        ),
        (
            &["--file", s(&wav_by_bytes), "--fftshift"],
            &["--fftshift", "w.dat is real"],
        ),
        (
            &["--file", s(&text), "--retry", "3"],
            &["--retry", "x.txt is a file"],
        ),
        (
            &["--file", s(&text), "--nats-tls"],
            &["--nats-tls", "no NATS server"],
        ),
        (
            &["--file", s(&text), "--connect-timeout", "2"],
            &["--connect-timeout", "no NATS server"],
        ),
    ];
    for (args, needles) in cases {
        let out = run(&[&args[..], &["--output", "/dev/null"]].concat());
        assert_clean_error(&out, 2, needles);
    }
    // stdin redirected from a file is that file, read once (helper-36)
    let out = fftd()
        .args(["--file", "-", "--retry", "3", "--output", "/dev/null"])
        .stdin(std::fs::File::open(&text).expect("open"))
        .output()
        .expect("run fftd");
    assert_clean_error(&out, 2, &["--retry", "stdin (redirected from a file)"]);
    // one input of two takes --channels (the raw file), one may be complex (text: "re im")
    let both = [
        "--file",
        s(&wav),
        "--file",
        s(&raw),
        "--rate",
        "8000",
        "--output-dir",
    ];
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = run(&[&both[..], &[s(&out_dir), "--channels", "1"]].concat());
    assert_silent_success(&out);
    let complex_text = dir.path().join("iq.txt");
    std::fs::write(&complex_text, "# I Q\n\n0.5 -0.25\n1 0\n").expect("text");
    let out = run(&["--file", s(&complex_text), "--frame", "2", "--fftshift"]);
    assert_silent_success(&out);
    // a file whose format its first bytes give is never raw: --channels names the way out
    let sniffed = dir.path().join("y.dat");
    std::fs::copy(&text, &sniffed).expect("copy");
    let out = run(&["--file", s(&sniffed), "--channels", "2"]);
    assert_clean_error(&out, 2, &["--channels 2", "--input-format", "y.dat"]);
    // a config file's keys need not fit every run: only the run's own flags are judged
    let config = dir.path().join("site.toml");
    std::fs::write(&config, "channels = 2\nfftshift = true\nretry = \"3\"\n").expect("config");
    let site = [
        "--config",
        s(&config),
        "--file",
        s(&wav),
        "--output",
        "/dev/null",
    ];
    assert_silent_success(&run(&site));
    // no input: that is the error, whatever else was given
    let out = run(&["--channels", "2", "--fftshift"]);
    assert_clean_error(&out, 2, &["no input"]);
}

/// `fftd publish --max-latency` with files only (it paces live input) and `--output-dir` naming
/// a file are refused before anything is sent or written (audit of session 41).
#[test]
fn publish_latency_for_files_and_an_output_dir_that_is_a_file_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let to = ["--to", "nats://127.0.0.1:9/frames.x", "--file", s(&x)];
    let out = run(&[&["publish", "--max-latency", "50"][..], &to].concat());
    assert_clean_error(&out, 2, &["--max-latency 50", "live frame"]);
    let out = run(&["--file", s(&x), "--output-dir", s(&x)]);
    assert_clean_error(&out, 2, &["--output-dir", "not a directory"]);
    // a SoapySDR address whose arguments have no key opened the default device
    let out = run(&["--file", "soapy://=,,="]);
    assert_clean_error(&out, 2, &["soapy://=,,=", "key=value"]);
}

/// `--center-freq`, `--rate`, `--fmin`, `--fmax` and `--tone` take the k, M and G suffixes
/// `--sweep` takes, by flag and in a config file (audits of sessions 41 and 43: `100M` and
/// `--rate 2.4M` were "expected a number").
#[test]
fn frequencies_take_the_suffixes_sweep_takes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let args = [
        "--file",
        s(&x),
        "--frame",
        "8",
        "--max-frames",
        "1",
        "--format",
        "csv",
    ];
    let out = run(&[&args[..], &["--center-freq", "100M"]].concat());
    assert!(out.status.success(), "{}", stderr_text(&out));
    let header = stdout_text(&out);
    let first_bin = header.lines().next().and_then(|l| l.split(',').nth(3));
    assert_eq!(first_bin, Some("100000000.0"), "{header}"); // (real input: DC first)
    let out = run(&[&args[..], &["--center-freq", "100X"]].concat());
    assert_clean_error(&out, 2, &["--center-freq 100X", "k, M or G"]);
    // the same rows, however the rate and the range are written
    let hz = [
        "--rate",
        "8000",
        "--fmin",
        "1000",
        "--fmax",
        "3000",
        "--center-freq",
        "0",
    ];
    let want = run(&[&args[..], &hz].concat());
    assert!(want.status.success(), "{}", stderr_text(&want));
    let scaled = [
        "--rate",
        "8k",
        "--fmin",
        "1k",
        "--fmax",
        "0.003M",
        "--center-freq",
        "0G",
    ];
    let got = run(&[&args[..], &scaled].concat());
    assert_eq!(
        stdout_text(&got),
        stdout_text(&want),
        "{}",
        stderr_text(&got)
    );
    let config = dir.path().join("hz.toml");
    std::fs::write(&config, "rate = \"8k\"\nfmin = \"1k\"\nfmax = 3000\n").expect("write");
    let from_file = run(&[&args[..], &["--config", s(&config)]].concat());
    assert_eq!(
        stdout_text(&from_file),
        stdout_text(&want),
        "{}",
        stderr_text(&from_file)
    );
    std::fs::write(&config, "rate = \"8X\"\n").expect("write");
    let out = run(&[&args[..], &["--config", s(&config)]].concat());
    assert_clean_error(&out, 2, &["hz.toml:1", "rate", "k, M or G"]);
}

/// A frequency out of its flag's range is quoted as typed (`--rate -1k`, not `-1000`); an
/// exponent beside a suffix (`1e3k`) is refused; `--bands` and `--alert` frequencies take the
/// suffixes too, with the same rows as plain Hz (review of session 43).
#[test]
fn frequencies_are_quoted_as_typed_and_band_options_take_suffixes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let args = ["--file", s(&x), "--frame", "64", "--format", "csv"];
    for (flag, value, why) in [
        ("--rate", "-1k", "the sample rate must be"),
        ("--rate", "1e3k", "expected a number of Hz"),
        (
            "--center-freq",
            "-100M",
            "must be a frequency from 0 to 1e12 Hz",
        ),
        ("--tone", "-5k", "must be a frequency above 0 Hz"),
    ] {
        let out = run(&[&args[..], &[flag, value]].concat());
        assert_clean_error(&out, 2, &[&format!("{flag} {value}: {why}")]);
        assert!(stderr_text(&out).contains("1e6") || value != "1e3k");
    }
    // a config file's key is checked by the same range, quoted as written there
    let config = dir.path().join("hz.toml");
    std::fs::write(&config, "center-freq = \"-5M\"\n").expect("write");
    let out = run(&[&args[..], &["--config", s(&config)]].concat());
    let want = "hz.toml:1: center-freq = \"-5M\": must be a frequency from 0";
    assert_clean_error(&out, 2, &[want]);
    let rate = ["--rate", "48000", "--levels"];
    let rows_and_events = |bands: &str, band: &str| {
        let events = dir.path().join(format!("{band}.ndjson"));
        let alert = format!("name=a,band={band},above=-300");
        let asked = ["--bands", bands, "--alert", &alert, "--events", s(&events)];
        let out = run(&[&args[..], &rate, &asked].concat());
        assert!(out.status.success(), "{}", stderr_text(&out));
        let events = std::fs::read_to_string(&events).expect("events written");
        assert!(events.contains("\"start\""), "{events}");
        (stdout_text(&out), events)
    };
    let want = rows_and_events("third-octave:fmin=1000,fmax=8000", "1000-2000");
    let got = rows_and_events("third-octave:fmin=1k,fmax=8k", "1k-2k");
    assert_eq!(got, want);
    let bad = ["--bands", "mel:8,fmin=1e1k"];
    let out = run(&[&args[..], &rate, &bad].concat());
    assert_clean_error(&out, 2, &["fmin=1e1k", "k, M or G"]);
}

/// Every duration flag takes the units `--average` and `--rotate` take, a bare number being the
/// flag's own unit (`--duration 10` seconds, `--max-latency 5` ms), by flag and config key; one
/// out of range is quoted as typed (audit of session 44: `--duration 1s` was "expected a number").
#[test]
fn durations_take_units_wherever_they_are_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let x = samples(dir.path());
    let args = ["--file", s(&x), "--rate", "1000", "--frame", "64"];
    let args = [&args[..], &["--format", "csv"]].concat();
    let rows = |more: &[&str]| {
        let out = run(&[&args[..], more].concat());
        assert!(out.status.success(), "{more:?}: {}", stderr_text(&out));
        stdout_text(&out)
    };
    let want = rows(&["--duration", "1.5", "--max-latency", "20"]);
    assert_eq!(want.lines().count(), 1 + 1500_usize.div_ceil(64), "{want}"); // (the last padded)
    assert_eq!(
        rows(&["--duration", "1500ms", "--max-latency", "0.02s"]),
        want
    );
    let config = dir.path().join("d.toml");
    std::fs::write(&config, "duration = \"0.025min\"\nmax-latency = 20\n").expect("write");
    assert_eq!(rows(&["--config", s(&config)]), want);
    for (flag, value, why) in [
        (
            "--duration",
            "0s",
            "--duration 0s: must be a duration above 0",
        ),
        (
            "--duration",
            "1 parsec",
            "--duration 1 parsec: expected a duration",
        ),
        (
            "--max-latency",
            "2min",
            "--max-latency 2min: must be from 0 to 60000 ms",
        ),
        (
            "--idle-exit",
            "2w",
            "--idle-exit 2w: must be a duration above 0 and at most",
        ),
    ] {
        let out = run(&[&args[..], &[flag, value]].concat());
        assert_clean_error(&out, 2, &[why]);
    }
    std::fs::write(&config, "duration = \"-1s\"\n").expect("write");
    let out = run(&[&args[..], &["--config", s(&config)]].concat());
    let why = "d.toml:1: duration = \"-1s\": must be a duration above 0";
    assert_clean_error(&out, 2, &[why]);
}
