//! `--sweep LOW:HIGH:BIN` over rtl_tcp (issue 42) against a loopback server that speaks rtl_tcp's
//! protocol and simulates a dongle under a sky of tones at known radio frequencies: samples paced
//! at the commanded rate, and a retune that takes effect only for samples made after the command
//! arrives, behind a queue of transfers already made (so stale samples exist, as with a real
//! dongle's USB transfers). The tests check that the hops cover the band without gaps or bins
//! outside it, that each tone lies in its bin, and that no tone has a ghost in a hop that does
//! not contain it — and that without a settle time there are ghosts, so the check can see them.

use crate::common;

use common::*;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Samples per transfer, and transfers made before the one being sent: 65536 stale samples.
const CHUNK: usize = 16384;
const QUEUED: usize = 4;

/// The sky: tones at these radio frequencies (Hz) with these amplitudes (codes of cu8).
const TONES: [(f64, f64); 3] = [(100.6e6, 60.0), (101.904e6, 40.0), (103.6e6, 50.0)];

/// What the dongle was told.
#[derive(Default)]
struct Dongle {
    rate: Option<f64>,
    centre: f64,
    /// Every set-frequency command, in order.
    retunes: Vec<f64>,
}

struct Sky {
    port: u16,
    dongle: Arc<Mutex<Dongle>>,
    thread: JoinHandle<()>,
}

/// Starts the simulated dongle on a loopback port; it serves one client, or with `drop_after`
/// two: the first connection is closed once that many retunes came (a lost device), and the
/// next one is served to the end.
fn sky(drop_after: Option<usize>) -> Sky {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let dongle = Arc::new(Mutex::new(Dongle::default()));
    let shared = dongle.clone();
    let thread = std::thread::spawn(move || {
        let mut limit = drop_after;
        for _ in 0..1 + drop_after.is_some() as usize {
            let Ok((mut socket, _)) = listener.accept() else {
                return;
            };
            {
                let mut d = shared.lock().expect("lock");
                (d.rate, d.centre) = (None, 0.0); // a new connection: the dongle's own tuning
            }
            let mut header = b"RTL0".to_vec();
            header.extend(5u32.to_be_bytes()); // R820T
            header.extend(29u32.to_be_bytes());
            socket.write_all(&header).expect("send header");
            let commands = socket.try_clone().expect("clone socket");
            let dongle = shared.clone();
            std::thread::spawn(move || take_commands(commands, &dongle));
            stream_sky(&mut socket, &shared, limit.take());
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    });
    Sky {
        port,
        dongle,
        thread,
    }
}

/// Applies the client's commands as they arrive: set rate (0x02), set frequency (0x01).
fn take_commands(mut socket: TcpStream, dongle: &Mutex<Dongle>) {
    let mut c = [0u8; 5];
    while socket.read_exact(&mut c).is_ok() {
        let value = f64::from(u32::from_be_bytes([c[1], c[2], c[3], c[4]]));
        let mut d = dongle.lock().expect("lock");
        match c[0] {
            0x02 => d.rate = Some(value),
            0x01 => {
                d.centre = value;
                d.retunes.push(value);
            }
            _ => {}
        }
    }
}

/// Makes transfers of the sky at the dongle's current tuning, each sent only once `QUEUED`
/// newer ones are made, paced at the rate, until the client goes, 60 s pass, or (`retunes`) the
/// dongle has had that many retunes in all.
fn stream_sky(socket: &mut TcpStream, dongle: &Mutex<Dongle>, retunes: Option<usize>) {
    let started = Instant::now();
    let rate = loop {
        if let Some(rate) = dongle.lock().expect("lock").rate {
            break rate;
        }
        if started.elapsed() > Duration::from_secs(10) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut queue = VecDeque::new();
    let (mut made, mut noise) = (0u64, 12345u64);
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(60) {
        let (centre, tuned) = {
            let d = dongle.lock().expect("lock");
            (d.centre, d.retunes.len())
        };
        if retunes.is_some_and(|r| tuned >= r) {
            return;
        }
        queue.push_back(transfer(made, centre, rate, &mut noise));
        made += CHUNK as u64;
        if queue.len() <= QUEUED {
            continue;
        }
        let due = Duration::from_secs_f64((made as usize - QUEUED * CHUNK) as f64 / rate);
        if let Some(wait) = due.checked_sub(began.elapsed()) {
            std::thread::sleep(wait);
        }
        let oldest = queue.pop_front().expect("queued");
        if socket.write_all(&oldest).is_err() {
            return;
        }
    }
}

/// One transfer of cu8 I/Q from sample `first` at `centre`: every tone within the band the
/// tuner passes (90 % of the rate), plus a code of dither.
fn transfer(first: u64, centre: f64, rate: f64, noise: &mut u64) -> Vec<u8> {
    let passed: Vec<(f64, f64)> = (TONES.iter())
        .map(|&(hz, amplitude)| (hz - centre, amplitude))
        .filter(|(offset, _)| offset.abs() < 0.45 * rate)
        .collect();
    // each tone a phasor turned once per sample (cheap beside the suite's other tests)
    let mut tones = phasors(&passed, first, rate);
    let mut bytes = Vec::with_capacity(2 * CHUNK);
    for _ in 0..CHUNK {
        let (mut i, mut q) = (127.5, 127.5);
        for t in &mut tones {
            i += t.0;
            q += t.1;
            t.turn();
        }
        for v in [&mut i, &mut q] {
            *noise = noise
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *v += (*noise >> 33) as f64 / (1u64 << 31) as f64 - 0.5;
        }
        bytes.extend([
            i.round().clamp(0.0, 255.0) as u8,
            q.round().clamp(0.0, 255.0) as u8,
        ]);
    }
    bytes
}

/// A tone as (re, im) at its current sample, and its turn per sample.
pub(crate) struct Phasor(pub(crate) f64, pub(crate) f64, f64, f64);

impl Phasor {
    pub(crate) fn turn(&mut self) {
        let (re, im) = (
            self.0 * self.2 - self.1 * self.3,
            self.0 * self.3 + self.1 * self.2,
        );
        (self.0, self.1) = (re, im);
    }
}

/// The phasors of tones at `(offset Hz, amplitude)` from sample `first` at `rate`.
pub(crate) fn phasors(tones: &[(f64, f64)], first: u64, rate: f64) -> Vec<Phasor> {
    let tau = 2.0 * std::f64::consts::PI;
    (tones.iter())
        .map(|&(offset, amplitude)| {
            // the phase at `first` from its remainder of whole cycles, for precision
            let cycles = (offset * first as f64 / rate).fract();
            let (start, step) = (tau * cycles, tau * offset / rate);
            Phasor(
                amplitude * start.cos(),
                amplitude * start.sin(),
                step.cos(),
                step.sin(),
            )
        })
        .collect()
}

/// One rtl-power row: Hz low, Hz step, FFTs averaged and the dB values.
pub(crate) struct Row {
    pub(crate) low: f64,
    pub(crate) high: f64,
    pub(crate) step: f64,
    pub(crate) samples: u32,
    pub(crate) db: Vec<f64>,
}

pub(crate) fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .map(|line| {
            let f: Vec<&str> = line.split(", ").collect();
            // heatmap.py reads Hz low and high with int() and the step with float()
            let low: i64 = f[2].parse().expect("Hz low is a whole number");
            let high: i64 = f[3].parse().expect("Hz high is a whole number");
            Row {
                low: low as f64,
                high: high as f64,
                step: f[4].parse().expect("step"),
                samples: f[5].parse().expect("samples"),
                db: f[6..].iter().map(|v| v.parse().expect("dB")).collect(),
            }
        })
        .collect()
}

/// Each row's bins more than 6 bins from every tone that row's hop contains, at or above
/// `floor` dB: a ghost (or a missing tone) is a bin there.
pub(crate) fn ghosts(rows: &[Row], tones: &[(f64, f64)], floor: f64) -> Vec<String> {
    let mut found = Vec::new();
    for row in rows {
        for (k, &db) in row.db.iter().enumerate() {
            let hz = row.low + k as f64 * row.step;
            let near_a_tone = tones.iter().any(|t| (t.0 - hz).abs() <= 6.0 * row.step);
            if !near_a_tone && db >= floor {
                found.push(format!("{db:.1} dB at {hz} Hz in the hop from {}", row.low));
            }
        }
    }
    found
}

fn sweep_args(port: u16, settle: &str) -> Vec<String> {
    [
        "--file",
        &format!("rtl_tcp://127.0.0.1:{port}"),
        "--sweep",
        "100M:104M:8k",
        "--crop",
        "20%",
        "--settle",
        settle,
        "--average",
        "20",
        "--sweeps",
        "2",
        "--format",
        "rtl-power",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn run_sweep(settle: &str, extra: &[&str]) -> (Vec<Row>, Vec<f64>) {
    let sky = sky(None);
    let mut args = sweep_args(sky.port, settle);
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr_text(&out));
    sky.thread.join().expect("sky");
    let retunes = sky.dongle.lock().expect("lock").retunes.clone();
    (rows(&stdout_text(&out)), retunes)
}

#[test]
fn a_sweep_tiles_the_band_and_finds_each_tone_without_ghosts() {
    let (rows, retunes) = run_sweep("400ms", &[]);
    // 2.048 MS/s (rtl_tcp's default), 8 kHz bins: 256-point FFTs, 204 bins kept of each hop,
    // 500 bins from 100 to 104 MHz: three hops starting 148 bins apart, the last ending at 104 MHz
    let centres = [100.816e6, 102.0e6, 103.184e6];
    assert_eq!(
        retunes,
        [centres, centres].concat(),
        "two sweeps of three hops"
    );
    assert_eq!(rows.len(), 6, "one row per hop per sweep");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.step, 8000.0);
        assert_eq!(row.db.len(), 204);
        assert_eq!(row.high, row.low + 204.0 * 8000.0);
        assert_eq!(row.low, centres[i % 3] - 102.0 * 8000.0, "row {i}");
        assert!(
            row.samples >= 1 && row.samples <= 20,
            "FFTs averaged: {}",
            row.samples
        );
    }
    // the hops of a sweep cover 100..104 MHz: no gap, no bin outside
    let (first, last) = (&rows[0], &rows[2]);
    assert_eq!(first.low, 100e6);
    assert_eq!(last.high, 104e6);
    assert!(rows[1].low <= rows[0].high && rows[2].low <= rows[1].high);
    // each tone is the loudest bin of the rows whose band holds it
    assert_tones_in_their_bins(&rows, &TONES);
    assert_no_ghosts(&rows, &TONES);
}

/// `peak` and `exp` hold their state per hop: one shared by the hops carried each hop's bins,
/// other frequencies, into the next hops' rows (helper-37: 26 dB lines in every later hop).
#[test]
fn a_sweeps_peak_hold_and_exp_average_keep_each_hop_to_its_own_band() {
    for mode in ["peak", "exp:0.5"] {
        let (rows, _) = run_sweep("400ms", &["--average-mode", mode]);
        assert_eq!(rows.len(), 6, "{mode}");
        assert_tones_in_their_bins(&rows, &TONES);
        assert_no_ghosts(&rows, &TONES);
    }
}

/// A run that ends inside a hop's frames gives that hop's whole frames only: a zero-padded
/// partial frame read the tone 26 dB low in that row (helper-37, `--tail drop` and all).
#[test]
fn a_hop_cut_short_by_the_runs_end_gives_its_whole_frames_only() {
    // slots of 400 ms settle (819200 samples) + 20 frames of 256 at 2.048 MS/s: the run ends
    // 10.5 frames into the third hop, at sample 2·824320 + 819200 + 2688 = 2470528
    let (rows, _) = run_sweep("400ms", &["--duration", "1.2063125"]);
    assert_eq!(rows.len(), 3, "two whole hops and the cut one");
    assert_eq!(rows[2].samples, 10, "the cut hop's whole frames");
    assert_tones_in_their_bins(&rows, &TONES);
    let loudest = |r: &Row| r.db.iter().copied().fold(f64::MIN, f64::max);
    let levels: Vec<f64> = rows.iter().map(loudest).collect();
    // the sky's tones differ by a few dB at most; a padded frame read ~26 dB lower
    assert!(
        (levels[2] - levels[0]).abs() < 6.0,
        "the cut hop's tone at its level: {levels:?}"
    );
}

/// No bin away from every tone within 40 dB of the loudest bin of all rows.
pub(crate) fn assert_no_ghosts(rows: &[Row], tones: &[(f64, f64)]) {
    let peak = rows
        .iter()
        .flat_map(|r| r.db.iter().copied())
        .fold(f64::MIN, f64::max);
    let found = ghosts(rows, tones, peak - 40.0);
    assert!(found.is_empty(), "ghosts: {found:?}");
}

/// Each row holds the one tone of its band, loudest at the tone's bin.
pub(crate) fn assert_tones_in_their_bins(rows: &[Row], tones: &[(f64, f64)]) {
    for row in rows {
        let inside: Vec<f64> = (tones.iter().map(|t| t.0))
            .filter(|hz| (row.low..row.high).contains(hz))
            .collect();
        assert_eq!(inside.len(), 1, "one tone per hop of this sky");
        let k = (0..row.db.len()).max_by(|&a, &b| row.db[a].total_cmp(&row.db[b]));
        let loudest = row.low + k.expect("bins") as f64 * row.step;
        // the nearest bin (hop centres are whole Hz, so up to 1 Hz more)
        let off = (loudest - inside[0]).abs();
        assert!(
            off <= row.step / 2.0 + 1.0,
            "the tone {} in its bin, not {loudest}",
            inside[0]
        );
    }
}

#[test]
fn a_lost_receiver_comes_back_under_retry_and_the_sweep_goes_on() {
    // the dongle goes away during the second sweep's first hop; fftd reconnects
    let sky = sky(Some(4));
    let mut args = sweep_args(sky.port, "400ms");
    let at = args.iter().position(|a| a == "--sweeps").expect("--sweeps");
    args[at + 1] = "3".into();
    args.extend(["--retry".to_string(), "5".to_string()]);
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("reopening it"),
        "{}",
        stderr_text(&out)
    );
    sky.thread.join().expect("sky");
    let retunes = sky.dongle.lock().expect("lock").retunes.clone();
    assert!(retunes.len() > 4, "retuned after reconnecting: {retunes:?}");
    let rows = rows(&stdout_text(&out));
    assert!(rows.len() >= 4 && rows.len() <= 9, "{} rows", rows.len());
    // rows after the outage still carry their own hop's centre
    assert_tones_in_their_bins(&rows, &TONES);
    assert_no_ghosts(&rows, &TONES);
}

#[test]
fn without_a_settle_time_the_stale_samples_show_as_ghosts() {
    let (rows, _) = run_sweep("0", &[]);
    let peak = rows
        .iter()
        .flat_map(|r| r.db.iter().copied())
        .fold(f64::MIN, f64::max);
    // the first samples after each retune were made at the previous hop's frequency
    assert!(
        !ghosts(&rows, &TONES, peak - 40.0).is_empty(),
        "the simulated dongle's {} stale samples must show",
        CHUNK * QUEUED
    );
}

#[test]
fn bad_sweeps_are_usage_errors() {
    let rtl = ["--file", "rtl_tcp://127.0.0.1:1"];
    for (args, needle) in [
        (&["--sweep", "108M:88M:10k"][..], "--sweep"),
        (&["--sweep", "88M:108M:0"], "BIN must be above 0"),
        (&["--sweep", "88M:108M:3M"], "above the receiver's rate"),
        (
            &["--sweep", "88M:108M:10k", "--frame", "512"],
            "--sweep goes without --frame",
        ),
        (&["--sweep", "88M:108M:10k", "--crop", "1.5"], "--crop"),
        (&["--sweep", "88M:108M:10k", "--sweeps", "0"], "--sweeps 0"),
        (&["--crop", "0.2"], "--crop goes with --sweep"),
        (
            &["--sweep", "88M:108M:10k", "--tail", "pad"],
            "--sweep goes without --tail",
        ),
        // shorter than a hop: nothing would be written
        (
            &["--sweep", "88M:108M:10k", "--duration", "0.1"],
            "--duration 0.1 s: a hop of this sweep takes 0.149 s",
        ),
        // (the user's spec, and the hop's frequency rtl_tcp cannot carry)
        (
            &["--sweep", "0:10G:10k"],
            "--sweep 0:10000000000:10000: a hop would tune",
        ),
    ] {
        let out = run(&[&rtl[..], args].concat());
        assert_clean_error(&out, 2, &[needle]);
    }
    // a file holds one tuning
    let out = run(&["--file", "x.cu8", "--sweep", "88M:108M:10k"]);
    assert_clean_error(&out, 2, &["--sweep retunes a receiver"]);
}

#[test]
fn the_live_view_draws_the_whole_swept_band() {
    use std::io::BufRead;
    let sky = sky(None);
    let mut args = sweep_args(sky.port, "400ms");
    args.extend(["--serve", "127.0.0.1:0", "--output", "/dev/null"].map(String::from));
    let mut child = fftd()
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("fftd starts");
    let stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut lines = stderr.lines().map_while(Result::ok);
    let line = lines
        .find(|l| l.contains("live view on http://"))
        .expect("served");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .expect("addr");
    std::thread::spawn(move || lines.for_each(drop));
    let (mut socket, _) = tungstenite::connect(format!("ws://{addr}/ws")).expect("websocket");
    let (mut columns_hz, mut last_max) = (Vec::<f64>::new(), Vec::<f32>::new());
    loop {
        match socket.read().expect("message") {
            tungstenite::Message::Text(text) => {
                let json: serde_json::Value = serde_json::from_str(&text).expect("json");
                match json["type"].as_str() {
                    Some("layout") => {
                        columns_hz = serde_json::from_value(json["columns_hz"].clone()).expect("hz")
                    }
                    Some("end") => break,
                    _ => {}
                }
            }
            tungstenite::Message::Binary(bytes) => {
                let columns = u32::from_le_bytes(bytes[24..28].try_into().expect("u32")) as usize;
                last_max = (bytes[32..32 + 4 * columns].chunks_exact(4))
                    .map(|v| f32::from_le_bytes(v.try_into().expect("f32")))
                    .collect();
            }
            _ => {}
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    sky.thread.join().expect("sky");
    // one spectrum of 100..104 MHz in 8 kHz bins, every tone at its frequency
    assert_eq!(columns_hz.len(), 500);
    assert_eq!(
        (columns_hz[0], columns_hz[499]),
        (100e6, 100e6 + 499.0 * 8000.0)
    );
    assert!(
        last_max.iter().all(|v| v.is_finite()),
        "every part of the band swept"
    );
    let quiet = last_max.iter().copied().fold(f32::MAX, f32::min);
    for (hz, _) in TONES {
        let k = ((hz - 100e6) / 8000.0) as usize;
        assert!(last_max[k] > quiet + 40.0, "{hz} Hz: {} dB", last_max[k]);
    }
}

#[test]
fn the_bundled_sky_simulator_sweeps_as_docs_radio_says() {
    if !python_has("numpy") {
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/rtl_tcp_sky.py");
    let mut sky = std::process::Command::new(python())
        .args([script, "--port", &port.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the simulator starts");
    let mut ready = String::new();
    let mut out = std::io::BufReader::new(sky.stdout.take().expect("stdout"));
    std::io::BufRead::read_line(&mut out, &mut ready).expect("its first line");
    assert!(ready.contains("rtl_tcp sky on"), "{ready}");
    let out = run(&[
        "--file",
        &format!("rtl_tcp://127.0.0.1:{port}"),
        "--sweep",
        "94M:95.5M:10k",
        "--crop",
        "0.2",
        "--average",
        "20",
        "--sweeps",
        "1",
        "--format",
        "rtl-power",
    ]);
    let _ = sky.kill();
    let _ = sky.wait();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let rows = rows(&stdout_text(&out));
    // 1.5 MHz in 8 kHz bins, 204 a hop: one station, 94.7 MHz, in the first of its rows
    assert!(rows.len() == 1 || rows.len() == 2, "{} rows", rows.len());
    assert_tones_in_their_bins(&rows[..1], &[(94.7e6, 60.0)]);
}
