//! `--retry` when the NATS server goes away (issue 27's recovery, for the fleet), against a real
//! nats-server killed and started again on the same port and store: a worker and a live
//! `fftd publish` with `--retry forever` ride out the outage (said in the log, counted in
//! `--meta`/`--stats`) and the rows stored are the local run's, each once; a local run's
//! `--output nats://` does too, and its outage is a `gap` event on `--events`; `--retry 2` gives
//! up after two attempts with one line naming the policy.

use crate::common;
use crate::fleet_common;

use common::*;
use fleet_common::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

/// A child killed (SIGKILL: a SIGTERM only asks a `--retry forever` run to finish) when the
/// test ends early, so a failed test leaves no process retrying for ever behind.
struct Reaped(Option<Child>);

impl Reaped {
    fn take(mut self) -> Child {
        self.0.take().expect("a child")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn setup(server: &NatsServer) {
    let out = fftd()
        .args(["fleet", "setup", "--server", &server.url("")])
        .args(["--ack-wait", "3"])
        .output()
        .expect("fftd runs");
    assert!(out.status.success(), "setup: {}", stderr_text(&out));
}

/// Writes `bytes` in pieces, so a live reader frames and sends them as they come.
fn feed(stdin: &mut ChildStdin, bytes: &[u8]) {
    for piece in bytes.chunks(16_384) {
        stdin.write_all(piece).expect("write to stdin");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A third of the WAV's bytes to `stdin`; then the server stopped for `outage` while the
/// second third is written; then the server started again, and once the client is back (a
/// couple of seconds) the rest written and stdin closed.
fn outage_mid_stream(server: &mut NatsServer, mut stdin: ChildStdin, wav: &Path, outage: Duration) {
    let bytes = std::fs::read(wav).expect("wav");
    let third = bytes.len() / 3;
    feed(&mut stdin, &bytes[..third]);
    wait_for("the first rows", Duration::from_secs(60), || {
        messages_in(server, "SPECTRA").unwrap_or(0) > 0
    });
    server.stop();
    feed(&mut stdin, &bytes[third..2 * third]);
    std::thread::sleep(outage);
    server.launch();
    std::thread::sleep(Duration::from_secs(3));
    feed(&mut stdin, &bytes[2 * third..]);
    drop(stdin);
}

#[test]
fn with_retry_a_worker_and_a_live_publisher_ride_out_a_server_gone_exactly_once() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = NatsServer::start(dir.path());
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 200_000);
    setup(&server);
    let meta = dir.path().join("worker.json");
    let worker = fftd()
        .args(["--file", &server.url("FRAMES/workers")])
        .args(["--output", &server.url("spectra.site1")])
        .args(FRAMING)
        .args(["--device", "cpu", "--retry", "forever"])
        .arg("--meta")
        .arg(&meta)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("worker starts");
    let worker = Reaped(Some(worker));
    let mut publisher = fftd()
        .args(["publish", "--to", &server.url("frames.site1")])
        .args([
            "--file",
            "-",
            "--source-id",
            "rec",
            "--retry",
            "forever",
            "--stats",
        ])
        .args(FRAMING)
        .args(["--block-frames", "16"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("publisher starts");
    let stdin = publisher.stdin.take().expect("stdin");
    let publisher = Reaped(Some(publisher));
    outage_mid_stream(&mut server, stdin, &wav, Duration::from_secs(4));
    let published = finish(publisher.take(), "publisher");
    // the worker is stopped by Ctrl-C once every block is acked (an --idle-exit could end it
    // in the outage's quiet on a busy machine)
    wait_for("every block acked", Duration::from_secs(60), || {
        work_messages(&server) == Some(0)
            && work_consumer_state(&server).is_some_and(|(pending, _)| pending == 0)
    });
    let worker = worker.take();
    // SAFETY: kill(2) on the pid of a child we spawned and have not waited for yet.
    unsafe { libc::kill(worker.id() as i32, libc::SIGINT) };
    let worked = finish(worker, "worker");
    eprintln!("{published}\n{worked}");
    for (who, err) in [("publisher", &published), ("worker", &worked)] {
        assert!(
            err.contains("(--retry forever)"),
            "the {who} said the outage: {err}"
        );
        assert!(
            err.contains("answers again after"),
            "the {who} said it was over: {err}"
        );
    }
    assert!(
        published.contains("the NATS server was away"),
        "{published}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert!(meta["nats_outages"].as_u64() >= Some(1), "{meta}");
    assert!(meta["nats_retries"].as_u64() >= Some(1), "{meta}");
    assert_eq!(work_messages(&server), Some(0), "every block acked");
    assert_equals_local(&server, &wav);
}

#[test]
fn with_retry_a_local_runs_nats_output_rides_out_a_server_gone_and_says_so_on_events() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = NatsServer::start(dir.path());
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 200_000);
    setup(&server);
    let events = dir.path().join("events.ndjson");
    let mut run = fftd()
        .args(["--file", "-", "--output", &server.url("spectra.local")])
        .args(FRAMING)
        .args(["--device", "cpu", "--retry", "forever", "--events"])
        .arg(&events)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd starts");
    let stdin = run.stdin.take().expect("stdin");
    let run = Reaped(Some(run));
    outage_mid_stream(&mut server, stdin, &wav, Duration::from_secs(3));
    let err = finish(run.take(), "local run");
    assert!(err.contains("answers again after"), "{err}");
    // every row once, as the local run writes it
    let local = local_rows(&wav);
    let mut stored: BTreeMap<u64, (Vec<u8>, usize)> = BTreeMap::new();
    for m in stored_messages(&server) {
        let entry = stored.entry(m.number("frame")).or_insert((m.payload, 0));
        entry.1 += 1;
    }
    assert_eq!(stored.len(), local.len(), "rows stored");
    for (frame, (row, times)) in &stored {
        assert_eq!(*times, 1, "frame {frame} stored {times} times");
        assert!(*row == local[*frame as usize], "frame {frame} differs");
    }
    let text = std::fs::read_to_string(&events).expect("events");
    let gap = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|v| v["event"] == "gap")
        .unwrap_or_else(|| panic!("no gap event: {text}"));
    assert_eq!(gap["resumed"], true, "{gap}");
    assert!(
        gap["input"]
            .as_str()
            .unwrap_or_default()
            .contains("127.0.0.1"),
        "{gap}"
    );
    // (attempts: none when the client held the rows until it was back, as here mostly)
    assert!(gap["attempts"].as_u64().is_some(), "{gap}");
    assert!(gap["gap_s"].as_f64() >= Some(1.0), "{gap}");
}

#[test]
fn retry_n_gives_up_after_n_attempts_with_one_line() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = NatsServer::start(dir.path());
    setup(&server);
    let worker: Child = fftd()
        .args(["--file", &server.url("FRAMES/workers")])
        .args(["--output", &server.url("spectra.site1")])
        .args(FRAMING)
        .args(["--device", "cpu", "--retry", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("worker starts");
    wait_for("a waiting worker", Duration::from_secs(60), || {
        waiting_pulls(&server).unwrap_or(0) >= 1
    });
    server.stop();
    let stopped = Instant::now();
    let out = worker.wait_with_output().expect("wait");
    let err = stderr_text(&out);
    eprintln!("gave up after {:?}: {err}", stopped.elapsed());
    assert_eq!(out.status.code(), Some(1), "{err}");
    // By design: 2 attempts 0.5 s and 1 s apart, each fetch bounded by the client's 5 s
    // timeout, about 12 s of timers at most; the default policy would retry 120 s, --retry
    // forever never end. 60 s tells them apart, with room for a busy machine.
    assert!(
        stopped.elapsed() < Duration::from_secs(60),
        "2 attempts took {:?}",
        stopped.elapsed()
    );
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.contains("cannot fetch blocks") && last.contains("retried for --retry 2"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
