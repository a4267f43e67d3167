//! Helpers of the fleet tests (tests/fleet.rs, tests/fleet_auth.rs): a real nats-server on a free
//! loopback port with a temporary store (optionally requiring credentials, a .creds file in
//! operator mode, or TLS), a generated recording, the local run's rows and the rows the SPECTRA
//! stream holds.
#![allow(dead_code)]

use crate::common::*;
use async_nats::jetstream;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How the tests' own client authenticates to a server.
#[derive(Clone, Default)]
pub enum ClientAuth {
    #[default]
    None,
    UserPassword(String, String),
    Token(String),
    /// The text of a .creds file (user JWT and nkey seed), for a server in operator mode.
    Creds(String),
    /// TLS required, trusting this root certificate (PEM).
    TlsCa(PathBuf),
}

/// A nats-server with JetStream on 127.0.0.1; killed (and waited for) when dropped.
pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
    store: PathBuf,
    pub log: PathBuf,
    /// Extra arguments (credentials, TLS).
    extra: Vec<OsString>,
    /// How `stored_rows`/`messages_in` connect.
    pub auth: ClientAuth,
    /// The monitoring port (`-m`), where one was given (`start_cluster`'s nodes).
    pub monitor: Option<u16>,
}

/// Whether a NATS server answers on loopback `port`: it greets every connection with an `INFO`
/// line. A bare connect is not enough: before the server listens, a connect to a port in the
/// ephemeral range can be given that very port as its own and connect to itself (TCP
/// simultaneous open), and a client connecting next was refused (a CI run, session 22).
fn serves_nats(port: u16) -> bool {
    use std::io::Read;
    let Some(mut stream) = crate::common::connect_loopback(port) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut greeting = [0u8; 4];
    stream.read_exact(&mut greeting).is_ok() && &greeting == b"INFO"
}

impl NatsServer {
    pub fn start(dir: &Path) -> NatsServer {
        NatsServer::start_with(dir, &[], ClientAuth::None)
    }

    /// A server started with `extra` arguments (`--user U --pass P`, `--auth T`, `--tls ...`).
    pub fn start_with(dir: &Path, extra: &[OsString], auth: ClientAuth) -> NatsServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = NatsServer {
            child: None,
            port,
            store: dir.join("store"),
            log: dir.join("nats-server.log"),
            extra: extra.to_vec(),
            auth,
            monitor: None,
        };
        server.launch();
        server
    }

    pub fn launch(&mut self) {
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
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nats-server starts");
        self.child = Some(child);
        let started = Instant::now();
        while !serves_nats(self.port) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "nats-server did not listen; its log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL (a node dying) and wait.
    pub fn stop_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM (the server shuts down in order) and wait.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child we spawned and have not waited for yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("nats://127.0.0.1:{}/{path}", self.port)
    }

    /// The tests' own client.
    async fn client(&self) -> Result<async_nats::Client, async_nats::ConnectError> {
        let opts = match &self.auth {
            ClientAuth::None => async_nats::ConnectOptions::new(),
            ClientAuth::UserPassword(u, p) => {
                async_nats::ConnectOptions::with_user_and_password(u.clone(), p.clone())
            }
            ClientAuth::Token(t) => async_nats::ConnectOptions::with_token(t.clone()),
            ClientAuth::Creds(creds) => {
                async_nats::ConnectOptions::with_credentials(creds).expect("a valid .creds text")
            }
            ClientAuth::TlsCa(ca) => async_nats::ConnectOptions::new()
                .require_tls(true)
                .add_root_certificates(ca.clone()),
        };
        opts.connect(format!("127.0.0.1:{}", self.port)).await
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

pub fn have_server() -> bool {
    program_runs("nats-server", &["--version"])
}

/// A mono 16-bit WAV of `len` samples of noise at 8 kHz.
pub fn write_wav(path: &Path, len: usize) {
    write_wav_at(path, len, 8000);
}

/// A mono 16-bit WAV of `len` samples of noise at `rate` Hz.
pub fn write_wav_at(path: &Path, len: usize, rate: u32) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav");
    for v in noise(len, 7) {
        w.write_sample((v * 20000.0) as i16).expect("sample");
    }
    w.finalize().expect("wav written");
}

pub const FRAMING: [&str; 4] = ["--frame", "512", "--hop", "128"];

/// The local run's rows (f32), one per frame.
pub fn local_rows(wav: &Path) -> Vec<Vec<u8>> {
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

/// Publishes one message with `headers` to `subject` (JetStream, acked).
pub fn publish_raw(server: &NatsServer, subject: &str, headers: &[(&str, &str)], payload: &[u8]) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let js = jetstream::new(server.client().await.expect("connect"));
        let mut map = async_nats::HeaderMap::new();
        for (k, v) in headers {
            map.insert(*k, *v);
        }
        let ack = js
            .publish_with_headers(subject.to_string(), map, payload.to_vec().into())
            .await
            .expect("publish");
        ack.await.expect("ack");
    })
}

/// The SPECTRA stream and how many rows it holds.
async fn spectra(server: &NatsServer) -> (jetstream::stream::Stream, u64) {
    let client = server.client().await.expect("connect");
    let js = jetstream::new(client);
    // (asked again while a cluster elects a new meta leader after a node died)
    for _ in 0..60 {
        if let Ok(mut stream) = js.get_stream("SPECTRA").await {
            if let Ok(info) = stream.info().await {
                let total = info.state.messages;
                return (stream, total);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut stream = js.get_stream("SPECTRA").await.expect("SPECTRA");
    let total = stream.info().await.expect("info").state.messages;
    (stream, total)
}

/// Every row stored in SPECTRA: (stream, frame) -> (payload, how many times); each from
/// source `rec`.
pub fn stored_rows(server: &NatsServer) -> BTreeMap<(u64, u64), (Vec<u8>, usize)> {
    let mut rows = BTreeMap::new();
    for m in stored_messages(server) {
        assert_eq!(m.header("source"), "rec");
        let entry = rows
            .entry((m.number("stream"), m.number("frame")))
            .or_insert((m.payload, 0));
        entry.1 += 1;
    }
    rows
}

/// A message stored in SPECTRA: its headers (first value of each) and payload.
pub struct StoredMessage {
    pub headers: BTreeMap<String, String>,
    pub payload: Vec<u8>,
}

impl StoredMessage {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no '{name}' header"))
    }

    pub fn number(&self, name: &str) -> u64 {
        self.header(name).parse().expect(name)
    }
}

/// Every row SPECTRA holds, in the order stored: a one-row message as it is, a batch message
/// (docs/fleet.md, "Payload layout": a `rows` header; per row frame u64, time_s f64, length u32,
/// little-endian, then the row) as one message per row, with its `frame` and `time_s`.
pub fn stored_messages(server: &NatsServer) -> Vec<StoredMessage> {
    let mut rows = Vec::new();
    for m in stored_raw_messages(server) {
        let Some(count) = m.headers.get("rows") else {
            rows.push(m);
            continue;
        };
        assert_eq!(m.header("layout"), "fftd-rows-1");
        let count: usize = count.parse().expect("rows");
        let p = &m.payload;
        let mut at = 0;
        let mut decoded = 0;
        while at < p.len() {
            let word = |k: usize| <[u8; 8]>::try_from(&p[k..k + 8]).expect("8 bytes");
            let frame = u64::from_le_bytes(word(at));
            let time_s = f64::from_le_bytes(word(at + 8));
            let len = u32::from_le_bytes(p[at + 16..at + 20].try_into().expect("4 bytes")) as usize;
            if decoded == 0 {
                assert_eq!(
                    frame.to_string(),
                    m.header("frame"),
                    "the first row's frame"
                );
            }
            decoded += 1;
            let mut headers = m.headers.clone();
            headers.insert("frame".into(), frame.to_string());
            headers.insert("time_s".into(), format!("{time_s}"));
            rows.push(StoredMessage {
                headers,
                payload: p[at + 20..at + 20 + len].to_vec(),
            });
            at += 20 + len;
        }
        assert_eq!(decoded, count, "rows in a batch vs its rows header");
    }
    rows
}

/// Rows SPECTRA holds (batch messages counted by their rows).
pub fn rows_in_spectra(server: &NatsServer) -> u64 {
    stored_messages(server).len() as u64
}

/// Every message SPECTRA holds, in the order stored, as stored.
pub fn stored_raw_messages(server: &NatsServer) -> Vec<StoredMessage> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (stream, total) = spectra(server).await;
        // after a cluster node dies the JetStream API times out until a new meta leader is
        // elected (about 5 s on nats-server 2.9, longer on a loaded machine): ask again
        let mut tries = 0;
        let consumer = loop {
            let made = stream
                .create_consumer(jetstream::consumer::pull::Config {
                    ack_policy: jetstream::consumer::AckPolicy::None,
                    ..Default::default()
                })
                .await;
            match made {
                Ok(consumer) => break consumer,
                Err(e) if tries < 60 => {
                    tries += 1;
                    eprintln!("consumer on SPECTRA: {e}; asking again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => panic!("consumer: {e:?}"),
            }
        };
        let mut stored = Vec::new();
        let started = Instant::now();
        while (stored.len() as u64) < total {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "fetched {} of the {total} messages SPECTRA holds",
                stored.len()
            );
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
                let headers = m
                    .headers
                    .iter()
                    .flat_map(|h| h.iter())
                    .filter_map(|(k, v)| {
                        let value = v.first()?.as_str().to_string();
                        Some((AsRef::<str>::as_ref(k).to_string(), value))
                    })
                    .collect();
                stored.push(StoredMessage {
                    headers,
                    payload: m.payload.to_vec(),
                });
            }
        }
        stored
    })
}

/// Messages stored in `stream`; None when the server or the stream cannot be asked (a restart).
pub fn messages_in(server: &NatsServer, stream: &str) -> Option<u64> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = server.client().await.ok()?;
        let js = jetstream::new(client);
        let mut s = js.get_stream(stream).await.ok()?;
        s.info().await.ok().map(|i| i.state.messages)
    })
}

/// The work stream's shards: FRAMES, FRAMES-shard1, … (`fftd fleet setup --shards`).
fn shard_name(k: usize) -> String {
    match k {
        0 => "FRAMES".to_string(),
        k => format!("FRAMES-shard{k}"),
    }
}

/// Every shard's work consumer info now, shard 0 first; None when the server cannot be asked
/// (a restart).
fn work_consumer_infos(server: &NatsServer) -> Option<Vec<jetstream::consumer::Info>> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = server.client().await.ok()?;
        let js = jetstream::new(client);
        let mut infos = Vec::new();
        for k in 0.. {
            let Ok(stream) = js.get_stream(shard_name(k)).await else {
                break;
            };
            infos.push(stream.consumer_info("workers").await.ok()?);
        }
        (!infos.is_empty()).then_some(infos)
    })
}

/// Takes one block off shard 0 of the work consumer and never acks it, as a worker that dies
/// holding it: the server delivers it again after the consumer's ack wait.
pub fn take_a_block_and_die(server: &NatsServer) {
    use futures_util::StreamExt;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let js = jetstream::new(server.client().await.expect("connect"));
        let stream = js.get_stream("FRAMES").await.expect("the work stream");
        let consumer: jetstream::consumer::PullConsumer =
            stream.get_consumer("workers").await.expect("the consumer");
        let mut batch = (consumer.fetch().max_messages(1).messages())
            .await
            .expect("a fetch");
        let block = batch.next().await.expect("a block").expect("a block");
        assert!(block.info().is_ok(), "a JetStream message");
    });
}

/// Blocks on the work stream now, over every shard; None when the server cannot be asked.
pub fn work_messages(server: &NatsServer) -> Option<u64> {
    let mut total = messages_in(server, "FRAMES")?;
    for k in 1.. {
        match messages_in(server, &shard_name(k)) {
            Some(n) => total += n,
            None => break,
        }
    }
    Some(total)
}

/// Blocks each shard's consumer has delivered so far, redeliveries included, shard 0 first.
pub fn deliveries_per_shard(server: &NatsServer) -> Vec<u64> {
    work_consumer_infos(server)
        .unwrap_or_default()
        .iter()
        .map(|info| info.delivered.consumer_sequence)
        .collect()
}

/// The work consumers now, over every shard: (blocks delivered and not acked, deliveries in
/// all, redeliveries included); None when the server cannot be asked.
pub fn work_consumer_state(server: &NatsServer) -> Option<(usize, u64)> {
    work_consumer_infos(server).map(|infos| {
        let pending = infos.iter().map(|i| i.num_ack_pending).sum();
        let delivered = infos.iter().map(|i| i.delivered.consumer_sequence).sum();
        (pending, delivered)
    })
}

/// Pull requests waiting on the work consumer of shard 0 now (one per idle worker); None when
/// the server cannot be asked.
pub fn waiting_pulls(server: &NatsServer) -> Option<usize> {
    work_consumer_infos(server).map(|infos| infos[0].num_waiting)
}

/// Rows stored in SPECTRA per `run` header value.
pub fn rows_per_run(server: &NatsServer) -> BTreeMap<String, u64> {
    let mut runs = BTreeMap::new();
    for m in stored_messages(server) {
        *runs.entry(m.header("run").to_string()).or_insert(0) += 1;
    }
    runs
}

/// Runs `command` to its end, as `Command::output`, but kills it and fails after `limit` (a
/// publish that waits for ever fails the test instead of hanging the suite).
pub fn output_within(command: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!("still running after {limit:?}: {}", stderr_text(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn finish(child: Child, what: &str) -> String {
    let out = child.wait_with_output().expect("wait");
    let err = stderr_text(&out);
    assert!(out.status.success(), "{what}: {err}");
    err
}

/// Every local frame stored exactly once, byte for byte.
pub fn assert_equals_local(server: &NatsServer, wav: &Path) {
    let want = local_rows(wav);
    let got = stored_rows(server);
    assert_eq!(got.len(), want.len(), "rows stored vs local frames");
    for (frame, row) in want.iter().enumerate() {
        let (payload, times) = got.get(&(0, frame as u64)).expect("every frame stored");
        assert_eq!(*times, 1, "frame {frame} stored {times} times");
        assert!(payload == row, "frame {frame} differs from the local run");
    }
}

/// The clients connected to the server with monitoring port `monitor` now, from its /connz:
/// each one's name and how many subscriptions it holds (none until its handshake is through and
/// it has asked or fetched something). Empty while the server cannot be asked.
pub fn clients(monitor: u16) -> Vec<(String, u64)> {
    use std::io::{Read, Write};
    let Some(mut stream) = connect_loopback(monitor) else {
        return Vec::new();
    };
    // (HTTP/1.0: the answer is the body up to the end, never chunked)
    let request = "GET /connz?limit=1000 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    let mut response = String::new();
    if stream.write_all(request.as_bytes()).is_err()
        || stream.read_to_string(&mut response).is_err()
    {
        return Vec::new();
    }
    let Some(body) = response.split("\r\n\r\n").nth(1) else {
        return Vec::new();
    };
    let Ok(connz) = serde_json::from_str::<serde_json::Value>(body) else {
        return Vec::new();
    };
    (connz["connections"].as_array().into_iter().flatten())
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            (name, c["subscriptions"].as_u64().unwrap_or(0))
        })
        .collect()
}

/// A 3-node JetStream cluster on loopback (issue 28), each node with a monitoring port: each
/// node a `NatsServer` with a store of its own and routes to the others (Debian's nats-server 2.9: after a node dies, JetStream calls
/// time out for about 5 s while a new meta leader is elected).
pub fn start_cluster(dir: &Path) -> Vec<NatsServer> {
    let free = || {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
    };
    let cluster_ports: Vec<u16> = (0..3).map(|_| free()).collect();
    let monitors: Vec<u16> = (0..3).map(|_| free()).collect();
    let routes: Vec<String> = cluster_ports
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect();
    (0..3)
        .map(|i| {
            let node = dir.join(format!("node{i}"));
            std::fs::create_dir_all(&node).expect("node dir");
            let args: Vec<OsString> = [
                "-n".to_string(),
                format!("node{i}"),
                "-cluster".into(),
                routes[i].clone(),
                "-cluster_name".into(),
                "fftd".into(),
                "-routes".into(),
                routes.join(","),
                "-m".into(),
                monitors[i].to_string(),
            ]
            .into_iter()
            .map(OsString::from)
            .collect();
            let mut server = NatsServer::start_with(&node, &args, ClientAuth::None);
            server.monitor = Some(monitors[i]);
            server
        })
        .collect()
}
