//! `--file rtl_tcp://HOST:PORT` against a loopback server that speaks rtl_tcp's protocol: it
//! sends the 12-byte dongle-info header, receives and records the 5-byte commands, then streams
//! cu8 I/Q of a known complex tone. The tests check the commands fftd sent (`--rate`,
//! `--center-freq`, `--gain`), the bin the tone lands in, SIGINT ending the run cleanly, and the
//! one-line errors of a lost connection, a refused one and a server that is not rtl_tcp.

use crate::common;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the loopback server does once a client connects.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Header, `commands` commands, then the tone until the client goes (at most 60 s).
    Stream { commands: usize },
    /// Header, `commands` commands, `bytes` bytes of the tone, then close.
    CloseAfter { commands: usize, bytes: usize },
    /// Not rtl_tcp: an HTTP answer.
    NotRtlTcp,
    /// Header, `commands` commands, then nothing, the connection held open (at most 60 s).
    Silent { commands: usize },
}

/// Samples per second fftd is asked for, and the tone's frequency: bin 50 of 1024.
const RATE: u32 = 1_024_000;
const TONE_HZ: f64 = 50_000.0;

struct Server {
    port: u16,
    commands: Arc<Mutex<Vec<[u8; 5]>>>,
    thread: JoinHandle<()>,
}

/// The tone's cu8 I/Q bytes from sample `from`: I = 127.5 + 100 cos, Q = 127.5 + 100 sin.
fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf8 path")
}

fn tone(from: u64, samples: usize) -> Vec<u8> {
    (0..samples as u64)
        .flat_map(|k| {
            let phase = 2.0 * std::f64::consts::PI * TONE_HZ * (from + k) as f64 / f64::from(RATE);
            let q = |v: f64| (127.5 + 100.0 * v).round() as u8;
            [q(phase.cos()), q(phase.sin())]
        })
        .collect()
}

fn serve(behaviour: Behaviour) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let commands = Arc::new(Mutex::new(Vec::new()));
    let seen = commands.clone();
    let thread = std::thread::spawn(move || {
        let Ok((mut socket, _)) = listener.accept() else {
            return;
        };
        let _ = socket.set_read_timeout(Some(Duration::from_secs(10)));
        let count = match behaviour {
            Behaviour::NotRtlTcp => {
                let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
                return;
            }
            Behaviour::Stream { commands }
            | Behaviour::CloseAfter { commands, .. }
            | Behaviour::Silent { commands } => commands,
        };
        // dongle info: RTL0, tuner 5 (R820T), 29 gain steps
        let mut header = b"RTL0".to_vec();
        header.extend(5u32.to_be_bytes());
        header.extend(29u32.to_be_bytes());
        socket.write_all(&header).expect("send header");
        for _ in 0..count {
            let mut c = [0u8; 5];
            if socket.read_exact(&mut c).is_err() {
                return;
            }
            seen.lock().expect("lock").push(c);
        }
        match behaviour {
            // (until the client goes: its read sees the end of the connection)
            Behaviour::Silent { .. } => {
                let _ = socket.set_read_timeout(Some(Duration::from_secs(60)));
                let _ = socket.read(&mut [0u8; 1]);
            }
            _ => stream_tone(&mut socket, behaviour),
        }
    });
    Server {
        port,
        commands,
        thread,
    }
}

/// Sends the tone in 16 KiB blocks, paced near real time, until the client goes, 60 s pass, or
/// (`CloseAfter`) the bytes are sent.
fn stream_tone(socket: &mut TcpStream, behaviour: Behaviour) {
    let limit = match behaviour {
        Behaviour::CloseAfter { bytes, .. } => bytes,
        _ => usize::MAX,
    };
    let started = Instant::now();
    let (mut sent, mut sample) = (0usize, 0u64);
    while sent < limit && started.elapsed() < Duration::from_secs(60) {
        let samples = (8192).min((limit - sent).div_ceil(2));
        let mut block = tone(sample, samples);
        block.truncate(limit - sent);
        if socket.write_all(&block).is_err() {
            return;
        }
        sent += block.len();
        sample += samples as u64;
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn url(port: u16) -> String {
    format!("rtl_tcp://127.0.0.1:{port}")
}

/// The index of each csv row's largest bin.
fn peak_bins(csv: &str) -> Vec<usize> {
    csv.lines()
        .skip(1)
        .map(|l| {
            let v: Vec<f64> = l
                .split(',')
                .skip(3)
                .map(|v| v.parse().expect("number"))
                .collect();
            (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
        })
        .collect()
}

#[test]
fn tunes_then_analyses_the_stream() {
    let server = serve(Behaviour::Stream { commands: 4 });
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("radio.sigmf-meta");
    let out = run(&[
        "--file",
        &url(server.port),
        "--rate",
        "1024000",
        "--center-freq",
        "100000000",
        "--gain",
        "20.7",
        "--frame",
        "1024",
        "--max-frames",
        "20",
        "--format",
        "csv",
        "--meta",
        s(&meta),
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    // a SigMF sidecar: rtl_tcp's samples are cu8, and no dataset file stays behind (review of
    // session 51: refused, as if the receiver were text)
    let doc = std::fs::read_to_string(&meta).expect("meta");
    assert!(
        doc.contains("\"core:datatype\": \"cu8\"") && doc.contains("\"core:metadata_only\": true"),
        "{doc}"
    );
    server.thread.join().expect("server");
    let commands = server.commands.lock().expect("lock").clone();
    assert_eq!(
        commands,
        vec![
            [0x02, 0x00, 0x0f, 0xa0, 0x00], // sample rate 1024000
            [0x01, 0x05, 0xf5, 0xe1, 0x00], // frequency 100 MHz
            [0x03, 0, 0, 0, 1],             // manual gain
            [0x04, 0, 0, 0, 207],           // 20.7 dB in tenths
        ]
    );
    let bins = peak_bins(&stdout_text(&out));
    assert!(!bins.is_empty() && bins.len() <= 20, "{} rows", bins.len());
    assert!(
        bins.iter().all(|&b| b == 50),
        "the 50 kHz tone in bin 50: {bins:?}"
    );
}

#[test]
fn auto_gain_and_the_default_rate() {
    let server = serve(Behaviour::Stream { commands: 2 });
    let out = run(&[
        "--file",
        &url(server.port),
        "--gain",
        "auto",
        "--frame",
        "2048",
        "--max-frames",
        "3",
        "--format",
        "csv",
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    server.thread.join().expect("server");
    let commands = server.commands.lock().expect("lock").clone();
    // rtl_tcp's default 2.048 MS/s, no frequency (not given), automatic gain
    assert_eq!(
        commands,
        vec![[0x02, 0x00, 0x1f, 0x40, 0x00], [0x03, 0, 0, 0, 0]]
    );
    let header = stdout_text(&out)
        .lines()
        .next()
        .expect("header")
        .to_string();
    assert!(
        header.contains(",1000.0,"),
        "2048000 Hz / 2048 bins: {header}"
    );
}

#[test]
fn sigint_ends_the_stream_cleanly() {
    let server = serve(Behaviour::Stream { commands: 1 });
    let mut child = fftd()
        .args([
            "--file",
            &url(server.port),
            "--rate",
            "1024000",
            "--frame",
            "1024",
        ])
        .args(["--format", "csv", "--device", "cpu"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let header = lines.next().expect("a header").expect("read");
    assert!(header.starts_with("stream,frame"), "{header}");
    let row = lines.next().expect("a row").expect("read");
    assert!(row.starts_with("0,"), "{row}");
    // SAFETY: kill(2) with the pid of our own child and SIGINT; no memory is involved.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let rest: Vec<String> = lines.map(|l| l.expect("read")).collect();
    let out = child.wait_with_output().expect("fftd ends");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(!stderr_text(&out).contains("panicked"));
    assert!(rest.iter().all(|l| l.split(',').count() == 3 + 1024));
    server.thread.join().expect("server");
}

#[test]
fn a_lost_connection_is_one_line_naming_it() {
    let server = serve(Behaviour::CloseAfter {
        commands: 1,
        bytes: 8 * 2048 + 1,
    });
    let address = url(server.port);
    let out = run(&["--file", &address, "--frame", "1024", "--format", "csv"]);
    assert_clean_error(
        &out,
        1,
        &[
            &format!("{address}: connection lost after"),
            "closed by the server",
        ],
    );
    server.thread.join().expect("server");
}

#[test]
fn a_server_that_stops_sending_is_one_line_naming_it() {
    let server = serve(Behaviour::Silent { commands: 1 });
    let address = url(server.port);
    let out = run(&["--file", &address, "--frame", "1024", "--format", "csv"]);
    assert_clean_error(
        &out,
        1,
        &[
            &format!("{address}: connection lost after 0 I/Q samples"),
            "no samples for 5 s",
        ],
    );
    server.thread.join().expect("server");
}

#[test]
fn not_rtl_tcp_and_refused_connections_are_one_line() {
    let server = serve(Behaviour::NotRtlTcp);
    let address = url(server.port);
    let out = run(&["--file", &address, "--format", "csv"]);
    assert_clean_error(&out, 1, &[&address, "not an rtl_tcp server", "RTL0"]);
    server.thread.join().expect("server");
    // a port nothing listens on (bound, then closed)
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let out = run(&["--file", &url(port), "--format", "csv"]);
    assert_clean_error(&out, 1, &[&url(port), "cannot connect"]);
    // usage errors: a bad address, --gain without an rtl_tcp input, a fractional rate
    let out = run(&["--file", "rtl_tcp://127.0.0.1:99999"]);
    assert_clean_error(&out, 2, &["rtl_tcp://127.0.0.1:99999", "port"]);
    let out = run(&["--file", "x.wav", "--gain", "10"]);
    assert_clean_error(&out, 2, &["--gain", "rtl_tcp://"]);
    let out = run(&["--file", &url(port), "--gain", "loud"]);
    assert_clean_error(&out, 2, &["--gain", "auto"]);
    let out = run(&["--file", &url(port), "--realtime"]);
    assert_clean_error(&out, 2, &["--realtime", "live"]);
    let out = run(&["--file", &url(port), "--center-freq", "1e300"]);
    assert_clean_error(&out, 2, &["--center-freq 1e300", "from 0 to 1e12 Hz"]);
    let out = run(&["--file", &url(port), "--frame", "whole"]);
    assert_clean_error(&out, 2, &["--frame whole", "never ends", "--duration"]);
    for real_only in [
        &["--cross", "0,1"][..],
        &["--bands", "octave"],
        &["--levels"],
    ] {
        let out = run(&[&["--file", &url(port)][..], real_only].concat());
        assert_clean_error(&out, 2, &[real_only[0], "complex (I/Q) input"]);
    }
    let out = run(&["--file", &url(port), "--input-format", "cs16"]);
    assert_clean_error(&out, 2, &["--input-format cs16", "send their own format"]);
    let out = run(&["--file", &url(port), "--rate", "1000000.5"]);
    assert_clean_error(&out, 2, &["--rate 1000000.5", "whole number"]);
}
