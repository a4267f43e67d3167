//! Fleet mode against a real NATS server (Debian's nats-server, started here on a free loopback
//! port with a temporary store, killed at the end): one publisher and three workers, one of them
//! SIGKILLed mid-run, give exactly the rows of a local run, each once; a server restarted mid-run
//! loses nothing; bad addresses, an unreachable server, a missing stream or consumer are one-line
//! errors, quickly.

mod common;
mod fleet_common;

use common::*;
use fleet_common::*;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn setup(server: &NatsServer, ack_wait: &str) {
    let out = fftd()
        .args([
            "fleet",
            "setup",
            "--server",
            &server.url(""),
            "--ack-wait",
            ack_wait,
        ])
        .output()
        .expect("fftd runs");
    assert!(out.status.success(), "setup: {}", stderr_text(&out));
}

fn publish(server: &NatsServer, wav: &Path) -> Child {
    fftd()
        .args([
            "publish",
            "--to",
            &server.url("frames.site1"),
            "--source-id",
            "rec",
        ])
        .arg("--file")
        .arg(wav)
        .args(FRAMING)
        .args(["--block-frames", "16"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("publisher starts")
}

fn worker(server: &NatsServer, idle_exit: &str) -> Child {
    fftd()
        .args(["--file", &server.url("FRAMES/workers")])
        .args(["--output", &server.url("spectra.site1")])
        .args(FRAMING)
        .args(["--device", "cpu", "--idle-exit", idle_exit, "--stats"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("worker starts")
}

#[test]
fn three_workers_one_killed_equal_a_local_run_exactly_once() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = NatsServer::start(dir.path());
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 400_000); // 3122 frames, 196 blocks
    setup(&server, "2");
    let publisher = publish(&server, &wav);
    let mut workers: Vec<Child> = (0..3).map(|_| worker(&server, "5")).collect();
    // kill one worker once rows flow and blocks are still queued
    wait_for("the first rows", Duration::from_secs(30), || {
        messages_in(&server, "SPECTRA").unwrap_or(0) > 0
    });
    let queued = messages_in(&server, "FRAMES");
    workers[0].kill().expect("SIGKILL");
    let _ = workers[0].wait();
    eprintln!("killed a worker with {queued:?} blocks queued");
    finish(publisher, "publisher");
    for w in workers.drain(1..) {
        eprintln!("{}", finish(w, "worker"));
    }
    assert_eq!(messages_in(&server, "FRAMES"), Some(0), "every block acked");
    assert_equals_local(&server, &wav);
}

#[test]
fn a_server_restart_mid_run_loses_nothing() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = NatsServer::start(dir.path());
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 300_000);
    setup(&server, "3");
    finish(publish(&server, &wav), "publisher");
    let workers: Vec<Child> = (0..2).map(|_| worker(&server, "6")).collect();
    wait_for("the first rows", Duration::from_secs(30), || {
        messages_in(&server, "SPECTRA").unwrap_or(0) > 0
    });
    server.stop();
    std::thread::sleep(Duration::from_millis(1500));
    server.launch();
    for w in workers {
        eprintln!("{}", finish(w, "worker"));
    }
    assert_eq!(messages_in(&server, "FRAMES"), Some(0), "every block acked");
    assert_equals_local(&server, &wav);
}

#[test]
fn bad_addresses_and_missing_objects_are_one_line_errors() {
    // no server needed: usage errors (exit 2), never echoing a password
    let bad = [
        (
            "nats://h:1/ONLYSTREAM",
            "nats://h:1/spectra.x",
            "STREAM/CONSUMER",
        ),
        (
            "nats://u:hunter2@h:99999/S/C",
            "nats://h:1/spectra.x",
            "bad port",
        ),
        ("nats://h:1/S/C", "nats://h:1/", "subject"),
        ("nats://h:1/S/C", "out.f32", "--output nats://"),
    ];
    for (input, output, needle) in bad {
        let out = run(&["--file", input, "--output", output, "--frame", "64"]);
        assert_clean_error(&out, 2, &[needle]);
        assert!(!stderr_text(&out).contains("hunter2"), "secret shown");
    }
    let out = run(&["--file", "x.f32", "--output", "nats://h:1/spectra.x"]);
    assert_clean_error(&out, 2, &["fftd publish"]);
    // nothing listens: exit 1 at once
    let free = TcpListener::bind("127.0.0.1:0").expect("port");
    let port = free.local_addr().expect("addr").port();
    drop(free);
    let url = |p: u16, path: &str| format!("nats://u:hunter2@127.0.0.1:{p}/{path}");
    let out = run(&[
        "--file",
        &url(port, "S/C"),
        "--output",
        &url(port, "spectra.x"),
    ]);
    assert_clean_error(&out, 1, &["cannot connect"]);
    assert!(!stderr_text(&out).contains("hunter2"), "secret shown");
    // a listener that never answers: bounded by --connect-timeout
    let silent = TcpListener::bind("127.0.0.1:0").expect("port");
    let port = silent.local_addr().expect("addr").port();
    let started = Instant::now();
    let out = run(&[
        "--file",
        &url(port, "S/C"),
        "--output",
        &url(port, "spectra.x"),
        "--connect-timeout",
        "1",
    ]);
    assert_clean_error(&out, 1, &["cannot connect"]);
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "connect not bounded"
    );
    drop(silent);

    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = NatsServer::start(dir.path());
    let out = run(&[
        "--file",
        &server.url("NOPE/workers"),
        "--output",
        &server.url("spectra.x"),
    ]);
    assert_clean_error(&out, 1, &["'NOPE'"]);
    setup(&server, "30");
    let out = run(&[
        "--file",
        &server.url("FRAMES/nobody"),
        "--output",
        &server.url("spectra.x"),
    ]);
    assert_clean_error(&out, 1, &["'nobody'"]);
    let out = run(&[
        "--file",
        &server.url("FRAMES/workers"),
        "--output",
        &server.url("elsewhere.x"),
    ]);
    assert_clean_error(&out, 1, &["elsewhere.x"]);
    let wav = dir.path().join("short.wav");
    write_wav(&wav, 1000);
    let wav = wav.to_str().expect("utf-8 path");
    let out = run(&[
        "publish",
        "--to",
        &server.url("elsewhere.x"),
        "--file",
        wav,
        "--frame",
        "64",
    ]);
    assert_clean_error(&out, 1, &["elsewhere.x"]);
}
