//! `--output nats://HOST:PORT/SUBJECT` of a local run (files or `--mic`) against a real NATS
//! server (Debian's nats-server on a free loopback port, started and killed here): the rows stored
//! on the spectra stream are exactly the rows the same run writes to a file, each once, with the
//! headers a fleet worker's rows carry; several streams and products (mel bands) go out as the
//! local run writes them; a live microphone (ALSA file plugin) publishes its rows; a server
//! restarted mid-run loses no row; every run is a run of its own; what cannot work is a one-line
//! error before anything is read.

use crate::common;
use crate::fleet_common;

use common::*;
use fleet_common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

fn setup(server: &NatsServer) {
    let out = fftd()
        .args(["fleet", "setup", "--server", &server.url("")])
        .output()
        .expect("fftd runs");
    assert!(out.status.success(), "setup: {}", stderr_text(&out));
}

/// A server with the fleet's streams, in a directory that holds them until dropped.
fn server_with_streams() -> (tempfile::TempDir, NatsServer) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = NatsServer::start(dir.path());
    setup(&server);
    (dir, server)
}

fn to_nats(server: &NatsServer, input: &Path, extra: &[&str]) -> Child {
    fftd()
        .arg("--file")
        .arg(input)
        .args(["--output", &server.url("spectra.local")])
        .args(FRAMING)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd starts")
}

/// Stored rows by (stream, frame), each with how many times it was stored.
fn by_frame(stored: &[StoredMessage]) -> BTreeMap<(u64, u64), (&StoredMessage, usize)> {
    let mut rows = BTreeMap::new();
    for m in stored {
        let entry = rows
            .entry((m.number("stream"), m.number("frame")))
            .or_insert((m, 0));
        entry.1 += 1;
    }
    rows
}

#[test]
fn a_local_run_stores_exactly_its_rows_with_the_workers_headers() {
    if !have_server() {
        return;
    }
    let (dir, server) = server_with_streams();
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 40_000);
    let meta = dir.path().join("meta.json");
    let meta_arg = meta.to_str().expect("utf-8");
    finish(to_nats(&server, &wav, &["--meta", meta_arg]), "fftd");
    assert_equals_local_any_source(&server, &wav);
    let stored = stored_messages(&server);
    // batched: fewer messages than rows, each id once
    let raw = stored_raw_messages(&server);
    assert!(raw.len() * 10 < stored.len(), "{} messages", raw.len());
    let mut ids = BTreeSet::new();
    for m in &raw {
        assert!(
            ids.insert(m.header("Nats-Msg-Id").to_string()),
            "ids unique"
        );
        assert!(m.header("Nats-Msg-Id").contains("/r"), "a batch id");
    }
    for m in &stored {
        let frame = m.number("frame") as usize;
        assert_eq!(m.header("source"), wav.to_str().expect("utf-8"));
        assert_eq!(m.header("scale"), "magnitude");
        assert_eq!(
            (m.number("n"), m.number("hop"), m.number("bins")),
            (512, 128, 257)
        );
        let time_s: f64 = m.header("time_s").parse().expect("time_s");
        assert_eq!(time_s, (frame * 128) as f64 / 8000.0);
    }
    let runs: BTreeSet<&str> = stored.iter().map(|m| m.header("run")).collect();
    assert_eq!(runs.len(), 1, "one run: {runs:?}");
    let meta = std::fs::read_to_string(&meta).expect("--meta written");
    assert!(meta.contains("spectra.local"), "{meta}");

    // the same recording analysed again is a new run, not a duplicate of the first
    finish(to_nats(&server, &wav, &[]), "fftd again");
    let per_run = rows_per_run(&server);
    assert_eq!(per_run.len(), 2, "{per_run:?}");
    assert!(
        per_run.values().all(|&n| n == stored.len() as u64),
        "{per_run:?}"
    );

    // one message per row, as before batches: the row itself, a row's id
    finish(
        to_nats(&server, &wav, &["--rows-per-message", "1"]),
        "fftd, one row per message",
    );
    let raw = stored_raw_messages(&server);
    let singles: Vec<&StoredMessage> = raw
        .iter()
        .filter(|m| !m.headers.contains_key("rows"))
        .collect();
    assert_eq!(singles.len(), stored.len(), "one message per row");
    let mut ids = BTreeSet::new();
    for m in singles {
        assert_eq!(m.payload.len(), 257 * 4);
        assert!(
            ids.insert(m.header("Nats-Msg-Id").to_string()),
            "ids unique"
        );
    }
}

/// `(stream, frame) -> line` of NDJSON rows.
fn ndjson_rows(text: &str) -> BTreeMap<(u64, u64), String> {
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON row");
            let key = |k: &str| v[k].as_u64().expect(k);
            ((key("stream"), key("frame")), format!("{line}\n"))
        })
        .collect()
}

#[test]
fn several_streams_and_mel_bands_go_out_as_the_local_run_writes_them() {
    if !have_server() {
        return;
    }
    let (dir, server) = server_with_streams();
    let (a, b) = (dir.path().join("a.wav"), dir.path().join("b.wav"));
    write_wav(&a, 30_000);
    write_wav(&b, 12_345);
    let analysis = ["--bands", "mel:40", "--scale", "db", "--format", "ndjson"];
    let (a_path, b_path) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    let mut args = vec!["--file", a_path, "--file", b_path];
    args.extend(FRAMING);
    args.extend(analysis);
    let local = run(&args);
    assert!(local.status.success(), "{}", stderr_text(&local));
    let want = ndjson_rows(&stdout_text(&local));
    let child = fftd()
        .args(["--file", a_path, "--file", b_path])
        .args(["--output", &server.url("spectra.bands")])
        .args(FRAMING)
        .args(analysis)
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd starts");
    finish(child, "fftd");
    let stored = stored_messages(&server);
    let got = by_frame(&stored);
    assert_eq!(got.len(), want.len(), "rows stored vs local rows");
    assert!(want.keys().any(|&(s, _)| s == 1), "two streams");
    for (key, line) in &want {
        let (m, times) = got.get(key).expect("every row stored");
        assert_eq!(*times, 1, "{key:?} stored {times} times");
        assert_eq!(String::from_utf8_lossy(&m.payload), *line, "{key:?}");
        assert_eq!(m.number("bins"), 40, "mel bands are the row's columns");
        assert_eq!(m.header("scale"), "db");
    }
}

#[test]
fn streams_of_other_widths_share_a_subject_in_any_format() {
    if !have_server() {
        return;
    }
    // a range at 8 and 16 kHz: rows of different widths, which one csv file cannot hold
    let (dir, server) = server_with_streams();
    let (a, b) = (dir.path().join("a.wav"), dir.path().join("b.wav"));
    write_wav_at(&a, 20_000, 8000);
    write_wav_at(&b, 20_000, 16000);
    let (a_path, b_path) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    let child = fftd()
        .args(["--file", a_path, "--file", b_path])
        .args(["--output", &server.url("spectra.csv")])
        .args(FRAMING)
        .args(["--fmin", "100", "--fmax", "1000", "--format", "csv"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd starts");
    finish(child, "fftd");
    let stored = stored_messages(&server);
    let widths: BTreeMap<u64, BTreeSet<u64>> = stored.iter().fold(BTreeMap::new(), |mut w, m| {
        w.entry(m.number("stream"))
            .or_default()
            .insert(m.number("bins"));
        w
    });
    // bins 15.625 Hz apart at 8 kHz (7..=64), 31.25 Hz at 16 kHz (4..=32)
    let want = BTreeMap::from([(0, BTreeSet::from([58])), (1, BTreeSet::from([29]))]);
    assert_eq!(widths, want);
    let frames = |len: usize| (len - 512).div_ceil(128) + 1;
    assert_eq!(stored.len(), 2 * frames(20_000));
    for m in &stored {
        let line = String::from_utf8_lossy(&m.payload);
        let fields = line.trim_end().split(',').count() as u64;
        assert_eq!(
            fields,
            3 + m.number("bins"),
            "stream,frame,time_s then the bins"
        );
    }
}

#[test]
fn a_microphone_publishes_its_rows_live() {
    if !have_server() {
        return;
    }
    let (dir, server) = server_with_streams();
    // 2 s of a 3 kHz tone as the default capture device (ALSA file plugin, no sound card)
    let conf = alsa_file_device(dir.path(), &f32_bytes(&tone(2.0, 48000.0, 3000.0)));
    let out = fftd()
        .args(["--mic", "--channels", "1", "--rate", "48000"])
        .args(["--frame", "4096", "--duration", "1", "--stats"])
        .args(["--output", &server.url("spectra.mic")])
        .env("ALSA_CONFIG_PATH", &conf)
        .output()
        .expect("fftd runs");
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    let stored = stored_messages(&server);
    assert!(!stored.is_empty(), "no rows stored: {err}");
    // the file plugin delivers faster than real time: a loaded machine may drop (and count)
    // frames, whose numbers are then skipped; every row written is stored
    let written = frames_out(&err);
    assert_eq!(stored.len() as u64, written, "{err}");
    let tone_bin = (3000.0_f64 / 48000.0 * 4096.0).round() as usize;
    for m in &stored {
        let values: Vec<f32> = m
            .payload
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(values.len(), 2049);
        let peak = (0..values.len())
            .max_by(|&i, &j| values[i].total_cmp(&values[j]))
            .expect("bins");
        assert!(peak.abs_diff(tone_bin) <= 1, "peak at bin {peak}");
        // frame k starts at k·hop, later after a capture gap (frame numbers stay contiguous)
        let time_s: f64 = m.header("time_s").parse().expect("time_s");
        assert!(time_s >= (m.number("frame") * 4096) as f64 / 48000.0);
    }
}

/// `frames out N` of a `--stats` line.
fn frames_out(stats: &str) -> u64 {
    let at = stats.find("frames out ").expect("--stats line") + "frames out ".len();
    let digits: String = stats[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().expect("a count")
}

fn tone(seconds: f64, rate: f64, hz: f64) -> Vec<f64> {
    let len = (seconds * rate) as usize;
    (0..len)
        .map(|i| 0.5 * (2.0 * std::f64::consts::PI * hz * i as f64 / rate).sin())
        .collect()
}

#[test]
fn a_server_restart_mid_run_loses_no_row() {
    if !have_server() {
        return;
    }
    let (dir, mut server) = server_with_streams();
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 40_000); // 5 s at 8 kHz, played at its own pace
    let running = to_nats(&server, &wav, &["--realtime"]);
    wait_for("the first rows", Duration::from_secs(60), || {
        messages_in(&server, "SPECTRA").unwrap_or(0) > 0
    });
    server.stop();
    std::thread::sleep(Duration::from_millis(1500));
    server.launch();
    eprintln!("{}", finish(running, "fftd"));
    assert_equals_local_any_source(&server, &wav);
}

/// As `assert_equals_local`, for rows whose source is the input's path.
fn assert_equals_local_any_source(server: &NatsServer, wav: &Path) {
    let want = local_rows(wav);
    let stored = stored_messages(server);
    let rows = by_frame(&stored);
    assert_eq!(rows.len(), want.len(), "rows stored vs local frames");
    for (frame, row) in want.iter().enumerate() {
        let (m, times) = rows.get(&(0, frame as u64)).expect("every frame stored");
        assert_eq!(*times, 1, "frame {frame} stored {times} times");
        assert!(
            m.payload == *row,
            "frame {frame} differs from the local run"
        );
    }
}

#[test]
fn more_rows_in_flight_than_the_clients_default_ack_window() {
    if !have_server() {
        return;
    }
    // 31 249 rows of 2 KB, one message each: batches of hundreds of rows await their acks together, more than the
    // 5 000 async-nats lets be pending by default (a publish then waited for ever)
    let (dir, server) = server_with_streams();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(16_000_000, 9));
    let out = fftd()
        .arg("--file")
        .arg(&input)
        .args([
            "--frame", "1024", "--hop", "512", "--device", "cpu", "--stats",
        ])
        .args(["--rows-per-message", "1"])
        .args(["--output", &server.url("spectra.many")])
        .output()
        .expect("fftd runs");
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    let rows = (16_000_000 - 1024usize).div_ceil(512) as u64 + 1;
    assert_eq!(frames_out(&err), rows, "{err}");
    assert_eq!(rows_in_spectra(&server), rows);
}

#[test]
fn ctrl_c_publishes_every_row_framed_before_it() {
    if !have_server() {
        return;
    }
    let (dir, server) = server_with_streams();
    let wav = dir.path().join("rec.wav");
    // 40 s at 8 kHz, played at its own pace: Ctrl-C comes after 50 rows (0.8 s) and must come
    // before the end, so the length leaves a busy machine 39 s to send it (a run stopped early
    // costs no more for being longer)
    write_wav(&wav, 320_000);
    let running = to_nats(&server, &wav, &["--realtime", "--stats"]);
    wait_for("50 rows", Duration::from_secs(60), || {
        messages_in(&server, "SPECTRA").unwrap_or(0) >= 50
    });
    // SAFETY: kill(2) on the pid of a child we spawned and have not waited for yet.
    unsafe { libc::kill(running.id() as i32, libc::SIGINT) };
    let err = finish(running, "fftd");
    let want = local_rows(&wav);
    let stored = stored_messages(&server);
    let rows = by_frame(&stored);
    assert_eq!(rows.len() as u64, frames_out(&err), "{err}");
    assert!(rows.len() < want.len(), "stopped early: {err}");
    assert_eq!(rows.keys().last().map(|k| k.1 + 1), Some(rows.len() as u64));
    // the frames that reach past the last sample read are zero-padded there, as in a file
    // output of a run stopped so (the tail rule); those before it are the local run's
    let whole = rows.len() - 512 / 128;
    for (&(_, frame), (m, times)) in &rows {
        assert_eq!(*times, 1, "frame {frame} stored {times} times");
        let equal = m.payload == want[frame as usize];
        assert!(equal || frame as usize >= whole, "frame {frame}");
    }
}

#[test]
fn what_cannot_be_published_is_a_one_line_error_before_anything_is_read() {
    if !have_server() {
        return;
    }
    let (dir, server) = server_with_streams();
    let input = dir.path().join("x.f32");
    write_f32(&input, &noise(4096, 3));
    let x = input.to_str().expect("utf-8");
    let no_stream = server.url("nowhere.x");
    let out = run(&["--file", x, "--output", &no_stream]);
    assert_clean_error(
        &out,
        1,
        &["no JetStream stream captures subject 'nowhere.x'"],
    );
    let refused = "nats://127.0.0.1:1/spectra.x";
    let out = run(&["--file", x, "--output", refused]);
    assert_clean_error(&out, 1, &["cannot connect to NATS at nats://127.0.0.1:1"]);
    let good = server.url("spectra.x");
    for (extra, needle) in [
        (
            &["--format", "npy"][..],
            "--format npy cannot go to --output nats://",
        ),
        (
            &["--format", "png"][..],
            "--format png cannot go to --output nats://",
        ),
        (
            &["--idle-exit", "3"][..],
            "--idle-exit is for fleet workers",
        ),
    ] {
        let mut args = vec!["--file", x, "--output", &good];
        args.extend(extra);
        let out = run(&args);
        assert_clean_error(&out, 2, &[needle]);
    }
    let no_subject = server.url("");
    let out = run(&["--file", x, "--output", &no_subject]);
    assert_clean_error(&out, 2, &["--output"]);
    assert_eq!(
        messages_in(&server, "SPECTRA"),
        Some(0),
        "nothing published"
    );
}
