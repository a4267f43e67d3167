//! `--serve`: the live view's endpoints against a real run. `/spectra` rows equal the file
//! output's rows, `/metrics` parses as Prometheus text (prometheus_client's own parser) and agrees
//! with the run, twenty WebSocket clients and one that never reads leave the file output
//! byte-identical to a run without `--serve` while the twenty keep receiving rows whose peak sits
//! at the tone, and bad addresses are one-line errors.

use crate::common;

use common::{
    alsa_file_device, assert_clean_error, f32_bytes, fftd, python_has, run, run_python, write_f32,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `fftd --serve` and what it prints on stderr, line by line.
struct Served {
    child: Child,
    addr: String,
    stderr: mpsc::Receiver<String>,
    input_finished: bool,
}

impl Served {
    fn start(args: &[&str], stdin: Stdio) -> Served {
        Served::start_with(args, stdin, &[])
    }

    fn start_with(args: &[&str], stdin: Stdio, envs: &[(&str, &Path)]) -> Served {
        let mut child = fftd()
            .envs(envs.iter().copied())
            .args(args)
            .args(["--serve", "127.0.0.1:0", "--device", "cpu", "--quiet"])
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fftd starts");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut served = Served {
            child,
            addr: String::new(),
            stderr: rx,
            input_finished: false,
        };
        let line = served.wait_for_line("live view on http://");
        served.addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .expect("address")
            .to_string();
        served
    }

    /// Waits until the input has ended and its outputs are complete.
    fn wait_for_input_end(&mut self) {
        if !self.input_finished {
            self.wait_for_line("input finished");
            self.input_finished = true;
        }
    }

    fn wait_for_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => assert!(!line.contains("panicked"), "{line}"),
                Err(e) => panic!("no '{needle}' on stderr: {e}"),
            }
        }
    }

    /// Waits for the input to end, then stops the server with SIGINT: a clean exit 0.
    fn finish(mut self) {
        self.wait_for_input_end();
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-INT", &pid]).status();
        assert!(killed.is_ok_and(|s| s.success()));
        let status = self.child.wait().expect("fftd exits");
        assert!(status.success(), "exit after SIGINT: {status}");
    }
}

/// GET `path`; the whole body (a chunked body is decoded), read until the server ends it.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("response");
    let text = String::from_utf8(raw).expect("utf-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").expect("chunk size");
        let size = usize::from_str_radix(size.trim(), 16).expect("hex size");
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}

/// The value of an unlabelled metric in `/metrics` text.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Waits for `done`; the limit only bounds a failure, so it is generous.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn tone(seconds: f64, rate: f64, hz: f64) -> Vec<f64> {
    let noise = common::noise((seconds * rate) as usize, 7);
    noise
        .iter()
        .enumerate()
        .map(|(i, n)| 0.5 * (2.0 * std::f64::consts::PI * hz * i as f64 / rate).sin() + 0.01 * n)
        .collect()
}

#[test]
fn spectra_rows_equal_the_file_rows_and_metrics_agree() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.ndjson");
    let samples = tone(3.0, 8000.0, 1000.0);
    let bytes = f32_bytes(&samples);
    let args = [
        "--file",
        "-",
        "--input-format",
        "f32",
        "--rate",
        "8000",
        "--frame",
        "256",
        "--hop",
        "128",
        "--format",
        "ndjson",
        "--output",
    ];
    let mut args: Vec<&str> = args.to_vec();
    args.push(out.to_str().unwrap());
    let mut served = Served::start(&args, Stdio::piped());
    let addr = served.addr.clone();
    let readers: Vec<_> = ["/spectra", "/spectra?stream=0&every=3"]
        .into_iter()
        .map(|path| {
            let addr = addr.clone();
            std::thread::spawn(move || get(&addr, path))
        })
        .collect();
    wait_until("two /spectra readers", || {
        metric(&get(&addr, "/metrics"), "fftd_serve_spectra_readers") == 2.0
    });
    // the rows flow only now: both readers see every row from the first
    let mut stdin = served.child.stdin.take().unwrap();
    for chunk in bytes.chunks(4096) {
        stdin.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(stdin);
    let bodies: Vec<String> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    served.wait_for_input_end();
    let file = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<&str> = file.lines().collect();
    assert!(rows.len() > 180, "{} rows", rows.len());
    assert_eq!(bodies[0].lines().collect::<Vec<_>>(), rows);
    let every_third: Vec<&str> = rows
        .iter()
        .copied()
        .filter(|r| {
            let frame: u64 = r
                .split("\"frame\":")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            frame % 3 == 0
        })
        .collect();
    assert_eq!(bodies[1].lines().collect::<Vec<_>>(), every_third);

    let metrics = get(&addr, "/metrics");
    assert_eq!(metric(&metrics, "fftd_frames_out_total"), rows.len() as f64);
    assert_eq!(
        metric(&metrics, "fftd_frame_latency_seconds_count"),
        rows.len() as f64
    );
    assert_eq!(
        metric(&metrics, "fftd_serve_spectra_rows_skipped_total"),
        0.0
    );
    // rows sent: the rows each reader got, and nothing else (a skipped line was counted)
    assert_eq!(
        metric(&metrics, "fftd_serve_spectra_rows_sent_total"),
        (rows.len() + every_third.len()) as f64
    );
    assert_eq!(metric(&metrics, "fftd_input_finished"), 1.0);
    // issue 32: every thread kind's time by phase (the sink's has been counted by now)
    let sink_write = "fftd_thread_seconds_total{kind=\"sink\",phase=\"write\",stage=\"sink\"}";
    assert!(metric(&metrics, sink_write) > 0.0, "{metrics}");
    assert_eq!(get(&addr, "/healthz"), "ok\n");
    // a page opened after the end gets the history and the end
    let late = read_display_rows(&addr);
    assert!(late.rows > 0);
    assert_eq!(late.last_frame + 1, rows.len() as u64);
    if python_has("prometheus_client") {
        let path = dir.path().join("metrics.txt");
        std::fs::write(&path, &metrics).unwrap();
        let parsed = run_python(
            PARSE_METRICS,
            &[path.to_str().unwrap()],
            "prometheus parser",
        );
        assert!(
            parsed.contains("fftd_frame_latency_seconds histogram"),
            "{parsed}"
        );
        assert!(
            parsed.contains("fftd_stage_busy_seconds counter"),
            "{parsed}"
        );
        assert!(parsed.contains("fftd_thread_seconds counter"), "{parsed}");
    }
    served.finish();
}

/// Parses /metrics with Prometheus' own Python parser and checks the histogram is consistent.
const PARSE_METRICS: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(open(sys.argv[1]).read()))
for f in families:
    print(f.name, f.type)
    if f.type == "histogram":
        buckets = [s.value for s in f.samples if s.name.endswith("_bucket")]
        assert buckets == sorted(buckets), buckets
        count = [s.value for s in f.samples if s.name.endswith("_count")][0]
        assert buckets[-1] == count, (buckets[-1], count)
assert len(families) >= 12, len(families)
"#;

/// A binary display row (docs/serve.md).
struct DisplayRow {
    frames: u32,
    last_frame: u64,
    max: Vec<f32>,
    mean: Vec<f32>,
}

impl DisplayRow {
    fn parse(bytes: &[u8]) -> DisplayRow {
        let columns = u32::from_le_bytes(bytes[24..28].try_into().unwrap()) as usize;
        assert_eq!(bytes.len(), 32 + 8 * columns);
        let values: Vec<f32> = bytes[32..]
            .chunks_exact(4)
            .map(|v| f32::from_le_bytes(v.try_into().unwrap()))
            .collect();
        DisplayRow {
            frames: u32::from_le_bytes(bytes[4..8].try_into().unwrap()),
            last_frame: u64::from_le_bytes(bytes[16..24].try_into().unwrap()),
            max: values[..columns].to_vec(),
            mean: values[columns..].to_vec(),
        }
    }
}

/// What one WebSocket reader saw.
struct Seen {
    rows: usize,
    last_frame: u64,
    peak_hz: Vec<f64>,
}

fn read_display_rows(addr: &str) -> Seen {
    let url = format!("ws://{addr}/ws?width=256");
    let (mut socket, _) = tungstenite::connect(url).expect("websocket");
    if let tungstenite::stream::MaybeTlsStream::Plain(tcp) = socket.get_ref() {
        // a session that never says "end" fails the test instead of hanging it
        tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    }
    let mut seen = Seen {
        rows: 0,
        last_frame: 0,
        peak_hz: Vec::new(),
    };
    let mut columns_hz: Vec<f64> = Vec::new();
    loop {
        match socket.read().expect("message") {
            tungstenite::Message::Text(text) => {
                let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                match json["type"].as_str() {
                    Some("layout") => {
                        columns_hz = serde_json::from_value(json["columns_hz"].clone()).unwrap()
                    }
                    Some("end") => return seen,
                    _ => {}
                }
            }
            tungstenite::Message::Binary(bytes) => {
                let row = DisplayRow::parse(&bytes);
                assert_eq!(row.max.len(), columns_hz.len());
                let peak = (0..row.max.len())
                    .max_by(|&a, &b| row.max[a].total_cmp(&row.max[b]))
                    .unwrap();
                seen.peak_hz.push(columns_hz[peak]);
                seen.last_frame = row.last_frame;
                seen.rows += 1;
            }
            _ => {}
        }
    }
}

#[test]
fn twenty_clients_and_one_that_never_reads_leave_the_output_alone() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("tone.f32");
    // 10 s at 48 kHz, frames of 65536: full-width rows of 262 KB for the client that never reads
    write_f32(&input, &tone(10.0, 48000.0, 3000.0));
    let common_args = |output: &Path| {
        let args = [
            "--file",
            input.to_str().unwrap(),
            "--rate",
            "48000",
            "--frame",
            "65536",
            "--hop",
            "1024",
            "--format",
            "f32",
            "--output",
            output.to_str().unwrap(),
        ];
        args.map(str::to_string).to_vec()
    };
    let reference = dir.path().join("reference.f32");
    let plain = common_args(&reference);
    let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
    assert!(run(&plain).status.success());

    let served_out = dir.path().join("served.f32");
    let mut args = common_args(&served_out);
    args.push("--realtime".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let served = Served::start(&args, Stdio::null());
    let addr = served.addr.clone();
    // never reads a byte after the handshake
    let (stuck, _) = tungstenite::connect(format!("ws://{addr}/ws")).expect("websocket");
    let readers: Vec<_> = (0..20)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || read_display_rows(&addr))
        })
        .collect();
    let seen: Vec<Seen> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let metrics = get(&addr, "/metrics");
    served.finish();
    drop(stuck);

    let written = std::fs::read(&served_out).unwrap();
    assert!(
        written == std::fs::read(&reference).unwrap(),
        "output differs"
    );
    let frames = (written.len() / 4 / 32769) as u64;
    for s in &seen {
        // a display row per frame or per tick (47 frames/s, 60 ticks/s), to the last frame
        assert!(s.rows >= 100, "{} rows of {frames} frames", s.rows);
        assert_eq!(s.last_frame, frames - 1, "last frame shown, of {frames}");
        let bin = 48000.0 / 65536.0 * 128.0; // one of 256 columns
        assert!(
            s.peak_hz.iter().all(|hz| (hz - 3000.0).abs() <= bin),
            "{:?}",
            &s.peak_hz[..5]
        );
    }
    assert_eq!(metric(&metrics, "fftd_frames_dropped_total"), 0.0);
    assert!(
        metric(&metrics, "fftd_serve_ws_clients_dropped_total") >= 1.0,
        "the client that never reads was not dropped: {metrics}"
    );
}

#[test]
fn bad_addresses_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &tone(0.5, 8000.0, 1000.0));
    let input = input.to_str().unwrap();
    for bad in ["nonsense", "127.0.0.1:99999", "localhost"] {
        let out = run(&["--file", input, "--serve", bad]);
        assert_clean_error(&out, 2, &["--serve", bad, "HOST:PORT"]);
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    // a taken port stops the run before the output is touched
    let existing = dir.path().join("existing.npy");
    std::fs::write(&existing, b"precious").unwrap();
    let out = run(&[
        "--file",
        input,
        "--serve",
        &addr,
        "--format",
        "npy",
        "--output",
        existing.to_str().unwrap(),
    ]);
    assert_clean_error(&out, 1, &[&addr, "cannot listen"]);
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");
    let out = run(&["--mic", "--realtime"]);
    assert_clean_error(&out, 2, &["--realtime"]);
}

#[test]
fn ctrl_c_mid_run_ends_the_run_the_responses_and_the_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("long.f32");
    write_f32(&input, &tone(60.0, 8000.0, 1000.0));
    let out = dir.path().join("out.f32");
    let args = [
        "--file",
        input.to_str().unwrap(),
        "--rate",
        "8000",
        "--frame",
        "256",
        "--realtime",
        "--format",
        "f32",
        "--output",
        out.to_str().unwrap(),
    ];
    let mut served = Served::start(&args, Stdio::null());
    let addr = served.addr.clone();
    let (mut socket, _) = tungstenite::connect(format!("ws://{addr}/ws")).expect("websocket");
    let spectra = {
        let addr = addr.clone();
        std::thread::spawn(move || get(&addr, "/spectra"))
    };
    // Ctrl-C once the /spectra reader is in and 20 more rows were framed (not after a guessed
    // second): the rows it must have seen were sent to it, however busy the machine is
    wait_until("rows on the socket", || {
        matches!(socket.read(), Ok(tungstenite::Message::Binary(_)))
    });
    wait_until("the /spectra reader", || {
        metric(&get(&addr, "/metrics"), "fftd_serve_spectra_readers") == 1.0
    });
    let framed = || metric(&get(&addr, "/metrics"), "fftd_frames_out_total");
    let from = framed();
    wait_until("20 rows framed", || framed() >= from + 20.0);
    let started = Instant::now();
    let pid = served.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = served.child.wait().unwrap();
    assert!(status.success(), "{status}");
    // By design the run stops at the next row (32 a second here) and the responses end with it;
    // the bug is a run that plays its minute out (or a response that holds it): 20 s tells
    // them apart with room for a busy machine.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let rows = spectra.join().unwrap().lines().count();
    assert!(rows > 10, "{rows} rows before Ctrl-C");
    // the session ends too: the server closes it or the socket fails (the bug: open for ever)
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Close(_)) | Err(_) => break,
            Ok(_) => assert!(Instant::now() < deadline, "the session stayed open"),
        }
    }
    // what was framed before Ctrl-C is written whole
    let written = std::fs::metadata(&out).unwrap().len();
    assert!(written > 0 && written % (129 * 4) == 0, "{written} bytes");
}

#[test]
fn a_1_ms_burst_among_thousands_of_frames_shows_in_a_display_row() {
    let rate = 48000.0;
    let mut samples = tone(20.0, rate, 1000.0);
    // 48 samples (1 ms) in the middle of frame 1875, at 12 kHz
    let burst_at = 1875 * 256 + 104;
    for (i, s) in samples[burst_at..burst_at + 48].iter_mut().enumerate() {
        *s += (2.0 * std::f64::consts::PI * 12000.0 * i as f64 / rate).sin();
    }
    let bytes = f32_bytes(&samples);
    let args = [
        "--file",
        "-",
        "--input-format",
        "f32",
        "--rate",
        "48000",
        "--frame",
        "256",
        "--format",
        "f32",
        "--output",
        "/dev/null",
    ];
    let mut served = Served::start(&args, Stdio::piped());
    let (mut socket, _) =
        tungstenite::connect(format!("ws://{}/ws", served.addr)).expect("websocket");
    // the whole input at full speed: thousands of frames per display row
    let mut stdin = served.child.stdin.take().unwrap();
    std::thread::spawn(move || stdin.write_all(&bytes));
    let mut columns_hz: Vec<f64> = Vec::new();
    let (mut rows, mut frames, mut burst_rows, mut burst_folded) = (0, 0u64, 0, 0);
    loop {
        match socket.read().expect("message") {
            tungstenite::Message::Text(text) => {
                let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                match json["type"].as_str() {
                    Some("layout") => {
                        columns_hz = serde_json::from_value(json["columns_hz"].clone()).unwrap()
                    }
                    Some("end") => break,
                    _ => {}
                }
            }
            tungstenite::Message::Binary(bytes) => {
                let row = DisplayRow::parse(&bytes);
                let column = |hz: f64| columns_hz.iter().position(|&c| c >= hz).unwrap();
                rows += 1;
                frames += u64::from(row.frames);
                // the burst's column in the max row, against a quiet column's level
                let burst = column(12000.0);
                if row.max[burst] > row.max[column(20000.0)] + 20.0 {
                    burst_rows += 1;
                    // max-hold, not an average: the mean of the same frames hides it, by the
                    // number of frames folded (how many a display tick gets depends on the
                    // machine's load; a few thousand a tick on an idle one)
                    let (max, mean) = (row.max[burst], row.mean[burst]);
                    let folded = 10.0 * f64::from(row.frames).log10();
                    assert!(
                        f64::from(max - mean) >= folded - 3.0,
                        "max {max} dB, mean {mean} dB over {} frames",
                        row.frames
                    );
                    burst_folded = row.frames;
                }
            }
            _ => {}
        }
    }
    served.finish();
    assert_eq!(frames, 3750, "every frame folded into some row");
    assert!(rows < 1000, "{rows} rows: frames were not folded");
    assert_eq!(burst_rows, 1, "the burst shows in exactly one display row");
    eprintln!("the burst's row folded {burst_folded} frames");
}

#[test]
fn a_microphone_reaches_the_live_view() {
    let dir = tempfile::tempdir().unwrap();
    // 4 s of a 3 kHz tone as the default capture device (ALSA file plugin, no sound card)
    let signal = tone(4.0, 48000.0, 3000.0);
    let conf = alsa_file_device(dir.path(), &f32_bytes(&signal));
    let args = [
        "--mic",
        "--channels",
        "1",
        "--rate",
        "48000",
        "--frame",
        "4096",
        "--duration",
        "3",
        "--format",
        "f32",
        "--output",
        "/dev/null",
    ];
    let served = Served::start_with(&args, Stdio::null(), &[("ALSA_CONFIG_PATH", &conf)]);
    // capture runs faster than real time: whatever this session misses live comes as history
    let seen = read_display_rows(&served.addr);
    let metrics = get(&served.addr, "/metrics");
    served.finish();
    assert!(seen.rows > 0);
    let bin = 48000.0 / 4096.0 * 8.0; // one of 256 columns
    assert!(
        seen.peak_hz.iter().all(|hz| (hz - 3000.0).abs() <= bin),
        "{:?}",
        seen.peak_hz
    );
    // the file plugin delivers faster than real time: on a loaded machine live input may drop
    // frames (counted), and frame numbers skip them
    let frames = metric(&metrics, "fftd_frames_out_total") as u64;
    assert!(frames > 0);
    assert!(
        seen.last_frame + 1 >= frames,
        "{} < {frames}",
        seen.last_frame
    );
}
