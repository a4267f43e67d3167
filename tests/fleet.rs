//! Fleet mode against a real NATS server (Debian's nats-server, started here on a free loopback
//! port with a temporary store, killed at the end): one publisher and three workers, one of them
//! SIGKILLed mid-run, give exactly the rows of a local run, each once; a server restarted mid-run
//! loses nothing; bad addresses, an unreachable server, a missing stream or consumer are one-line
//! errors, quickly.

mod common;

use async_nats::jetstream;
use common::*;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A nats-server with JetStream on 127.0.0.1; killed (and waited for) when dropped.
struct NatsServer {
    child: Option<Child>,
    port: u16,
    store: PathBuf,
    log: PathBuf,
}

impl NatsServer {
    fn start(dir: &Path) -> NatsServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = NatsServer {
            child: None,
            port,
            store: dir.join("store"),
            log: dir.join("nats-server.log"),
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("server log");
        let child = Command::new("nats-server")
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.store)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nats-server starts");
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "nats-server did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM (the server shuts down in order) and wait.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child we spawned and have not waited for yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }

    fn url(&self, path: &str) -> String {
        format!("nats://127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn have_server() -> bool {
    program_runs("nats-server", &["--version"])
}

/// A mono 16-bit WAV of `len` samples of noise at 8 kHz.
fn write_wav(path: &Path, len: usize) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 8000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav");
    for v in noise(len, 7) {
        w.write_sample((v * 20000.0) as i16).expect("sample");
    }
    w.finalize().expect("wav written");
}

const FRAMING: [&str; 4] = ["--frame", "512", "--hop", "128"];

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

/// The local run's rows (f32), one per frame.
fn local_rows(wav: &Path) -> Vec<Vec<u8>> {
    let out = run(&[
        "--file",
        wav.to_str().expect("utf-8 path"),
        "--frame",
        "512",
        "--hop",
        "128",
        "--format",
        "f32",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let row = (512 / 2 + 1) * 4;
    assert_eq!(out.stdout.len() % row, 0);
    out.stdout.chunks(row).map(<[u8]>::to_vec).collect()
}

/// Every row stored in SPECTRA: (stream, frame) -> (payload, how many times).
fn stored_rows(server: &NatsServer) -> BTreeMap<(u64, u64), (Vec<u8>, usize)> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{}", server.port))
            .await
            .expect("connect");
        let js = jetstream::new(client);
        let mut stream = js.get_stream("SPECTRA").await.expect("SPECTRA");
        let total = stream.info().await.expect("info").state.messages;
        let consumer = stream
            .create_consumer(jetstream::consumer::pull::Config {
                ack_policy: jetstream::consumer::AckPolicy::None,
                ..Default::default()
            })
            .await
            .expect("consumer");
        let mut rows = BTreeMap::new();
        let mut seen = 0u64;
        while seen < total {
            use futures_util::StreamExt;
            let mut batch = consumer
                .fetch()
                .max_messages(1000)
                .expires(Duration::from_secs(2))
                .messages()
                .await
                .expect("fetch");
            while let Some(m) = batch.next().await {
                let m = m.expect("message");
                let h = m.headers.as_ref().expect("headers");
                let num = |k: &str| h.get(k).expect(k).as_str().parse::<u64>().expect(k);
                assert_eq!(h.get("source").expect("source").as_str(), "rec");
                let entry = rows
                    .entry((num("stream"), num("frame")))
                    .or_insert((m.payload.to_vec(), 0));
                entry.1 += 1;
                seen += 1;
            }
        }
        rows
    })
}

/// Messages in a stream now.
fn messages_in(server: &NatsServer, stream: &str) -> u64 {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let Ok(client) = async_nats::connect(format!("127.0.0.1:{}", server.port)).await else {
            return 0;
        };
        let js = jetstream::new(client);
        match js.get_stream(stream).await {
            Ok(mut s) => s.info().await.map_or(0, |i| i.state.messages),
            Err(_) => 0,
        }
    })
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(child: Child, what: &str) -> String {
    let out = child.wait_with_output().expect("wait");
    let err = stderr_text(&out);
    assert!(out.status.success(), "{what}: {err}");
    err
}

fn assert_equals_local(server: &NatsServer, wav: &Path) {
    let want = local_rows(wav);
    let got = stored_rows(server);
    assert_eq!(got.len(), want.len(), "rows stored vs local frames");
    for (frame, row) in want.iter().enumerate() {
        let (payload, times) = got.get(&(0, frame as u64)).expect("every frame stored");
        assert_eq!(*times, 1, "frame {frame} stored {times} times");
        assert!(payload == row, "frame {frame} differs from the local run");
    }
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
        messages_in(&server, "SPECTRA") > 0
    });
    let queued = messages_in(&server, "FRAMES");
    workers[0].kill().expect("SIGKILL");
    let _ = workers[0].wait();
    eprintln!("killed a worker with {queued} blocks queued");
    finish(publisher, "publisher");
    for w in workers.drain(1..) {
        eprintln!("{}", finish(w, "worker"));
    }
    assert_eq!(messages_in(&server, "FRAMES"), 0, "every block acked");
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
        messages_in(&server, "SPECTRA") > 0
    });
    server.stop();
    std::thread::sleep(Duration::from_millis(1500));
    server.launch();
    for w in workers {
        eprintln!("{}", finish(w, "worker"));
    }
    assert_eq!(messages_in(&server, "FRAMES"), 0, "every block acked");
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
