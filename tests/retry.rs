//! `--retry` (issue 27): a live input that fails is reopened, and the run goes on.
//!
//! Real inputs only: a named FIFO whose writer goes and a new one comes (given as the input,
//! and as stdin redirected from it), an rtl_tcp loopback server (the real protocol) that closes
//! and comes back on the same port, the microphone through ALSA's `pulse` plugin from a
//! PulseAudio server the test kills and starts again, and through ALSA's `file` plugin (which
//! cannot fail mid-stream: `the_microphone_runs_the_same_under_retry`). Each
//! checks that rows from before and after the outage are written, frame numbers continue, row
//! times jump by the outage, and one `gap` event is written.

use crate::common;

use common::*;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("retry")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir
}

/// Waits for `child` (killed after `TIMEOUT`); its exit code and stderr.
fn wait(mut child: Child) -> (Option<i32>, String) {
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fftd did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status.code(), reader.join().unwrap_or_default())
}

/// A csv row: frame, time_s, bins.
type Row = (u64, f64, Vec<f64>);

/// csv rows.
fn rows(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).expect("csv output");
    text.lines()
        .skip(1)
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            let bins = v[3..].iter().map(|x| x.parse().expect("bin")).collect();
            (
                v[1].parse().expect("frame"),
                v[2].parse().expect("time"),
                bins,
            )
        })
        .collect()
}

fn events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event is JSON"))
        .collect()
}

/// Frames numbered 0, 1, 2 … without a hole; the row times, and where they jump.
fn assert_one_jump(rows: &[Row], hop_s: f64, at: usize, at_least_s: f64) {
    for (i, (frame, ..)) in rows.iter().enumerate() {
        assert_eq!(*frame, i as u64, "frame numbers run on across the gap");
    }
    let jumps: Vec<(usize, f64)> = rows
        .windows(2)
        .enumerate()
        .map(|(i, w)| (i + 1, w[1].1 - w[0].1))
        .filter(|(_, d)| (d - hop_s).abs() > 1e-6)
        .collect();
    assert_eq!(jumps.len(), 1, "one jump in the row times: {jumps:?}");
    assert_eq!(jumps[0].0, at, "the jump after the first writer's rows");
    assert!(
        jumps[0].1 >= hop_s + at_least_s,
        "the times jump by the outage: {jumps:?}"
    );
}

/// 12 frames of 1024 f32 samples: a ramp, so every frame differs.
fn signal() -> Vec<u8> {
    let ramp: Vec<f64> = (0..12 * 1024).map(|i| (i % 1000) as f64 / 1000.0).collect();
    f32_bytes(&ramp)
}

fn write_fifo(fifo: &Path, bytes: &[u8]) {
    let mut w = std::fs::OpenOptions::new()
        .write(true)
        .open(fifo)
        .expect("open the FIFO for writing");
    w.write_all(bytes).expect("write the FIFO");
    close_drained(w);
}

/// Closes a FIFO's writing end once fftd has taken every byte; see `write_fifo`.
fn close_drained(w: File) {
    // closed only once fftd has taken every byte (FIONREAD: what the pipe still holds), so the
    // end of file, and the gap fftd measures from it, begin at the close: the pause after it
    // is the gap however slowly a busy machine lets fftd read
    let started = Instant::now();
    loop {
        let mut held: libc::c_int = 0;
        // SAFETY: FIONREAD on our own open FIFO descriptor, into a c_int we own.
        let ok = unsafe { libc::ioctl(w.as_raw_fd(), libc::FIONREAD, &mut held) } == 0;
        if !ok || held == 0 {
            break;
        }
        assert!(started.elapsed() < TIMEOUT, "fftd did not read the FIFO");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The FIFO fed by two writers one after the other, 1 s apart; fftd's rows and events.
fn two_writers(dir: &Path, fifo: &Path, cmd: &mut Command) -> (Vec<Row>, Vec<serde_json::Value>) {
    let out = dir.join("out.csv");
    let ev = dir.join("events.ndjson");
    cmd.args(["--input-format", "f32", "--rate", "1024", "--frame", "1024"])
        .args(["--format", "csv", "--device", "cpu", "--max-frames", "24"])
        .args(["--retry", "forever", "--events"])
        .arg(&ev)
        .arg("--output")
        .arg(&out)
        .env("RUST_LOG", "fftd=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start fftd");
    write_fifo(fifo, &signal());
    // 2 s away: fftd may notice the end late on a busy machine, which shortens the gap it
    // measures; the checks want 0.9 s of it
    std::thread::sleep(Duration::from_millis(2000));
    write_fifo(fifo, &signal());
    let (code, stderr) = wait(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("reopening it (--retry forever)") && stderr.contains("resumed after"),
        "the log says so: {stderr}"
    );
    (rows(&out), events(&ev))
}

fn check_two_writers(rows: &[Row], events: &[serde_json::Value], name: &str) {
    assert_eq!(rows.len(), 24, "12 rows from each writer");
    for k in 0..12 {
        assert_eq!(rows[k].2, rows[k + 12].2, "the second writer's row {k}");
    }
    assert_one_jump(rows, 1.0, 12, 0.9);
    assert_eq!(events.len(), 1, "one gap event: {events:?}");
    let e = &events[0];
    assert_eq!(e["event"], "gap");
    assert_eq!(e["input"], name);
    assert_eq!(e["stream"], 0);
    assert_eq!(e["resumed"], true);
    assert_eq!(e["time_s"], 12.0, "the gap begins after 12 s of signal");
    let gap = e["gap_s"].as_f64().expect("gap_s");
    assert!(gap >= 0.9, "{e}");
    // the rows after it are that much later
    assert!(
        (rows[12].1 - 12.0 - gap).abs() < 0.01,
        "{} vs {gap}",
        rows[12].1
    );
}

#[test]
fn a_fifo_whose_writer_goes_and_returns() {
    let dir = tmp("fifo");
    let fifo = dir.join("in.f32");
    mkfifo(&fifo);
    let mut cmd = fftd();
    cmd.arg("--file").arg(&fifo).stdin(Stdio::null());
    let (rows, events) = two_writers(&dir, &fifo, &mut cmd);
    check_two_writers(&rows, &events, &fifo.display().to_string());
}

#[test]
fn stdin_redirected_from_a_fifo_is_reopened_too() {
    let dir = tmp("stdin");
    let fifo = dir.join("in.f32");
    mkfifo(&fifo);
    // `fftd --file - < in.f32`: the shell's open waits for a writer; so does this one
    let opener = {
        let fifo = fifo.clone();
        std::thread::spawn(move || File::open(fifo).expect("open the FIFO for reading"))
    };
    let first = {
        let fifo = fifo.clone();
        std::thread::spawn(move || write_fifo(&fifo, &signal()))
    };
    let stdin = opener.join().expect("opener");
    let mut cmd = fftd();
    cmd.args(["--file", "-"]).stdin(stdin);
    let out = dir.join("out.csv");
    let ev = dir.join("events.ndjson");
    cmd.args(["--input-format", "f32", "--rate", "1024", "--frame", "1024"])
        .args(["--format", "csv", "--device", "cpu", "--max-frames", "24"])
        .args(["--retry", "10", "--events"])
        .arg(&ev)
        .arg("--output")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start fftd");
    first.join().expect("first writer");
    std::thread::sleep(Duration::from_millis(2000)); // (as in `two_writers`)
    write_fifo(&fifo, &signal());
    let (code, stderr) = wait(child);
    assert_eq!(code, Some(0), "{stderr}");
    check_two_writers(&rows(&out), &events(&ev), "-");
}

#[test]
fn a_shell_pipe_is_not_reopened_and_retry_needs_a_live_input_for_events() {
    // stdin from a shell pipe: no one can open it again, so its end is the end
    let dir = tmp("pipe");
    let mut child = fftd()
        .args(["--file", "-", "--input-format", "f32", "--rate", "1024"])
        .args(["--frame", "1024", "--format", "csv", "--device", "cpu"])
        .args(["--retry", "forever"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fftd");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&signal()).expect("feed");
    drop(stdin);
    let out = child.wait_with_output().expect("fftd ends");
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(stdout_text(&out).lines().count(), 13, "header and 12 rows");
    assert!(stderr_text(&out).contains("is not a named FIFO"));
    // --events without --alert is for --retry's gaps only
    let bad = run(&[
        "--file",
        "x.f32",
        "--events",
        dir.join("e").to_str().unwrap(),
    ]);
    assert_clean_error(&bad, 2, &["--events", "--alert", "--retry"]);
    let bad = run(&["--file", "x.f32", "--retry", "soon"]);
    assert_clean_error(&bad, 2, &["--retry", "soon", "forever"]);
    // the config key: a number of attempts, or a string
    let config = dir.join("retry.toml");
    std::fs::write(&config, "retry = \"soon\"\n").expect("config");
    let bad = run(&["--config", config.to_str().unwrap(), "--file", "x.f32"]);
    assert_clean_error(&bad, 2, &["retry", "forever"]);
    std::fs::write(&config, "retry = 10\n").expect("config");
    let mut child = fftd()
        .args(["--config", config.to_str().unwrap()])
        .args(["--file", "-", "--input-format", "f32", "--rate", "1024"])
        .args(["--frame", "1024", "--format", "csv", "--device", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fftd");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&signal()).expect("feed");
    drop(stdin);
    let out = child.wait_with_output().expect("fftd ends");
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(stderr_text(&out).contains("--retry: - is not a named FIFO"));
}

/// A loopback rtl_tcp server: header, the client's commands, then cu8 I/Q paced at `RATE`.
const RATE: usize = 64_000;

fn rtl_session(listener: &TcpListener, blocks: Option<usize>) -> Vec<[u8; 5]> {
    rtl_session_then(listener, blocks, false)
}

/// `rtl_session`, then (`hold`) the connection held open with nothing sent until the client goes,
/// as a server whose dongle stopped.
fn rtl_session_then(listener: &TcpListener, blocks: Option<usize>, hold: bool) -> Vec<[u8; 5]> {
    let (mut socket, _) = listener.accept().expect("accept");
    let mut header = b"RTL0".to_vec();
    // tuner 0: a server of the protocol that is no RTL2832U, so 64 kHz is a rate it may take
    header.extend(0u32.to_be_bytes());
    header.extend(29u32.to_be_bytes());
    socket.write_all(&header).expect("header");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut commands = Vec::new();
    let mut c = [0u8; 5];
    socket.read_exact(&mut c).expect("the rate command");
    commands.push(c);
    // 1024 samples (16 ms) a block, a tone in bin 100 of 1024
    let block: Vec<u8> = (0..1024)
        .flat_map(|k| {
            let phase = 2.0 * std::f64::consts::PI * 100.0 * k as f64 / 1024.0;
            let q = |v: f64| (127.5 + 100.0 * v).round() as u8;
            [q(phase.cos()), q(phase.sin())]
        })
        .collect();
    let started = Instant::now();
    for n in 0.. {
        if blocks.is_some_and(|b| n >= b) || started.elapsed() > TIMEOUT {
            break;
        }
        if socket.write_all(&block).is_err() {
            break; // the client went
        }
        let due = started + Duration::from_secs_f64((n + 1) as f64 * 1024.0 / RATE as f64);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    if hold {
        // (the client's going ends this read: at most the 10 s read timeout)
        let _ = socket.read(&mut [0u8; 1]);
    }
    let _ = socket.shutdown(std::net::Shutdown::Both);
    commands
}

#[test]
fn an_rtl_tcp_server_that_goes_away_and_comes_back() {
    let dir = tmp("rtl_tcp");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let out = dir.join("out.csv");
    let ev = dir.join("events.ndjson");
    let child = fftd()
        .args(["--file", &format!("rtl_tcp://127.0.0.1:{port}")])
        .args([
            "--rate",
            &RATE.to_string(),
            "--frame",
            "1024",
            "--device",
            "cpu",
        ])
        .args(["--format", "csv", "--max-frames", "120", "--retry", "1min"])
        .arg("--events")
        .arg(&ev)
        .arg("--output")
        .arg(&out)
        .env("RUST_LOG", "fftd=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fftd");
    // the first server: 50 blocks (0.8 s), then it closes and is gone for 3 s (refused): fftd
    // may notice the close late on a busy machine, and the checks want a 1.4 s gap and two
    // attempts
    let first = rtl_session(&listener, Some(50));
    drop(listener);
    std::thread::sleep(Duration::from_millis(3000));
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the same port again");
    let second = rtl_session(&listener, None);
    let (code, stderr) = wait(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(first, second, "tuned again: the same rate command");
    assert_eq!(first[0], [0x02, 0, 0, 0xfa, 0], "64000 S/s");
    let rows = rows(&out);
    assert_eq!(rows.len(), 120, "{stderr}");
    let hop_s = 1024.0 / RATE as f64;
    let at = rows
        .windows(2)
        .position(|w| w[1].1 - w[0].1 > hop_s + 1e-6)
        .expect("a jump")
        + 1;
    assert!(
        (45..=50).contains(&at),
        "about 50 rows from the first server: {at}"
    );
    assert_one_jump(&rows, hop_s, at, 1.4);
    for (_, _, bins) in &rows {
        let peak = (0..bins.len()).fold(0, |b, i| if bins[i] > bins[b] { i } else { b });
        assert_eq!(peak, 100, "the tone in bin 100 before and after");
    }
    let events = events(&ev);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "gap");
    assert_eq!(events[0]["resumed"], true);
    assert!(
        events[0]["attempts"].as_u64().expect("attempts") >= 2,
        "refused, then back"
    );
    assert!(events[0]["error"]
        .as_str()
        .expect("error")
        .contains("closed by the server"));
}

#[test]
fn a_server_that_falls_silent_is_reconnected_and_its_silence_counted_in_the_gap() {
    let dir = tmp("rtl_tcp_silent");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (out, ev) = (dir.join("out.csv"), dir.join("events.ndjson"));
    let child = fftd()
        .args(["--file", &format!("rtl_tcp://127.0.0.1:{port}")])
        .args(["--rate", &RATE.to_string(), "--frame", "1024"])
        .args(["--format", "csv", "--max-frames", "80", "--retry", "1min"])
        .args(["--device", "cpu", "--events"])
        .arg(&ev)
        .arg("--output")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fftd");
    // 30 blocks (0.5 s), then silence on an open connection: lost after 5 s, then connected again
    rtl_session_then(&listener, Some(30), true);
    rtl_session(&listener, None);
    let (code, stderr) = wait(child);
    assert_eq!(code, Some(0), "{stderr}");
    let events = events(&ev);
    assert_eq!(events.len(), 1, "{events:?}");
    let gap = &events[0];
    assert_eq!(gap["resumed"], true, "{gap}");
    assert!(gap["error"]
        .as_str()
        .expect("error")
        .contains("no samples for 5 s"));
    // the outage began with the silence, not when it was given up
    assert!(gap["gap_s"].as_f64().expect("gap_s") >= 5.0, "{gap}");
    let rows = rows(&out);
    let hop_s = 1024.0 / RATE as f64;
    let at = (rows.windows(2))
        .position(|w| w[1].1 - w[0].1 > hop_s + 1e-6)
        .expect("a jump")
        + 1;
    assert_one_jump(&rows, hop_s, at, 5.0);
}

#[test]
fn a_server_that_stays_away_ends_the_run_as_the_policy_says() {
    let dir = tmp("rtl_gone");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let ev = dir.join("events.ndjson");
    let child = fftd()
        .args(["--file", &format!("rtl_tcp://127.0.0.1:{port}")])
        .args([
            "--rate",
            &RATE.to_string(),
            "--frame",
            "1024",
            "--device",
            "cpu",
        ])
        .args(["--format", "csv", "--retry", "3", "--events"])
        .arg(&ev)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fftd");
    rtl_session(&listener, Some(20));
    drop(listener);
    let started = Instant::now();
    let (code, stderr) = wait(child);
    // 3 attempts, 0.5 + 1 + 2 s apart, then the input's error
    assert_eq!(code, Some(1), "{stderr}");
    assert!(started.elapsed() >= Duration::from_secs(3), "{stderr}");
    assert!(
        stderr.contains("gave up after 3 attempt(s)") && stderr.contains("--retry 3"),
        "{stderr}"
    );
    let events = events(&ev);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["resumed"], false);
    assert_eq!(events[0]["attempts"], 3);
}

#[test]
fn the_microphone_runs_the_same_under_retry() {
    // ALSA's `file` plugin cannot fail mid-stream: a read error on its infile (a folder) and a
    // write error on its file (/dev/full) are printed by alsa-lib (pcm_file.c) and the capture
    // goes on with the slave's silence; the `null` slave never fails. So no stream error can
    // reach cpal here; what is checked is that the microphone wrapped by --retry still captures
    // sample-exact, and that --retry's counters are on /metrics.
    let dir = tmp("mic");
    let samples: Vec<f64> = (0..48_000 * 2)
        .map(|i| ((i / 2) % 480) as f64 / 480.0 - 0.5)
        .collect();
    let conf = alsa_file_device(&dir, &f32_bytes(&samples));
    let run = |retry: bool| {
        let mut cmd = fftd();
        cmd.args([
            "--mic",
            "--frame",
            "1024",
            "--max-frames",
            "20",
            "--format",
            "csv",
        ])
        .args(["--device", "cpu"])
        .env("ALSA_CONFIG_PATH", &conf)
        .stdin(Stdio::null());
        if retry {
            cmd.args(["--retry", "forever"]);
        }
        let out = cmd.output().expect("fftd runs");
        assert!(out.status.success(), "{}", stderr_text(&out));
        stdout_text(&out)
    };
    assert_eq!(run(true), run(false));
}

/// A PulseAudio server of the test's own (no default script: a null sink, and the native
/// protocol on `socket` for anyone), with its own HOME and runtime folder under `dir`.
fn pulseaudio(dir: &Path, socket: &Path) -> Reaped {
    let _ = std::fs::remove_file(socket); // a killed server leaves its socket behind
    let (home, runtime) = (dir.join("pa-home"), dir.join("pa-run"));
    for d in [&home, &runtime] {
        std::fs::create_dir_all(d).expect("pulseaudio's folders");
    }
    let child = Command::new("pulseaudio")
        .args([
            "-n",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
        ])
        .args(["--disable-shm=yes", "-L", "module-null-sink", "-L"])
        .arg(format!(
            "module-native-protocol-unix auth-anonymous=1 socket={}",
            socket.display()
        ))
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("PULSE_SERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pulseaudio");
    let server = Reaped(Some(child));
    let started = Instant::now();
    while !socket.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "pulseaudio did not open {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// Whether the PulseAudio server and ALSA's `pulse` plugin are here (CI: they must be).
fn pulse_present() -> bool {
    let plugin = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .any(|d| {
        Path::new(d)
            .join("alsa-lib/libasound_module_pcm_pulse.so")
            .exists()
    });
    if !plugin {
        let required = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !required,
            "ALSA's pulse plugin is missing (CI requires it: run scripts/deps.sh --test)"
        );
        eprintln!("skipping: ALSA's pulse plugin is missing (scripts/deps.sh --test installs libasound2-plugins)");
        return false;
    }
    program_runs("pulseaudio", &["--version"])
}

#[test]
fn the_microphone_fails_and_comes_back_through_pulseaudio() {
    // The microphone is ALSA's `pulse` plugin reading a PulseAudio server's null sink monitor;
    // the server is killed mid-capture (the plugin's poll fails with EIO: a cpal stream error)
    // and started again 1 s later on the same socket: the capture is reopened and goes on.
    if !pulse_present() {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("fftd-pulse")
        .tempdir_in("/tmp") // a unix socket's path has at most 107 bytes
        .expect("tmp dir");
    let dir = dir.path();
    let socket = dir.join("pulse.sock");
    let mut server = pulseaudio(dir, &socket);
    let conf = dir.join("asound.conf");
    let server_line = format!("    server \"unix:{}\"\n", socket.display());
    std::fs::write(
        &conf,
        format!(
            "pcm.!default {{\n    type pulse\n{server_line}    device \"null.monitor\"\n}}\nctl.!default {{\n    type pulse\n{server_line}}}\n"
        ),
    )
    .expect("ALSA config");
    // the client never starts a server of its own
    let client_conf = dir.join("client.conf");
    std::fs::write(&client_conf, "autospawn = no\n").expect("client.conf");
    let (out, ev) = (dir.join("out.csv"), dir.join("events.ndjson"));
    let child = fftd()
        .args([
            "--mic",
            "--rate",
            "48000",
            "--frame",
            "1024",
            "--max-frames",
            "200",
        ])
        .args(["--format", "csv", "--device", "cpu", "--retry", "forever"])
        .arg("--events")
        .arg(&ev)
        .arg("--output")
        .arg(&out)
        .env("ALSA_CONFIG_PATH", &conf)
        .env("PULSE_CLIENTCONFIG", &client_conf)
        .env("HOME", dir)
        .env("RUST_LOG", "fftd=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fftd");
    let mut fftd_child = Reaped(Some(child));
    // some rows before the outage (the header and 20 rows)
    let started = Instant::now();
    while std::fs::read_to_string(&out).map_or(0, |t| t.lines().count()) < 21 {
        assert!(started.elapsed() < TIMEOUT, "no rows from the microphone");
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(mut s) = server.0.take() {
        let _ = s.kill(); // SIGKILL: the server is gone
        let _ = s.wait();
    }
    // 2 s gone: fftd may notice the loss late on a busy machine (the checks want a 0.9 s gap)
    std::thread::sleep(Duration::from_millis(2000));
    let _server = pulseaudio(dir, &socket);
    let (code, stderr) = wait(fftd_child.0.take().expect("fftd"));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("capture failed")
            && stderr.contains("reopening it (--retry forever)")
            && stderr.contains("resumed after"),
        "the log says so: {stderr}"
    );
    let rows = rows(&out);
    assert_eq!(rows.len(), 200, "{stderr}");
    let before = rows
        .windows(2)
        .position(|w| w[1].1 - w[0].1 > 0.5)
        .map(|i| i + 1);
    let before = before.expect("the row times jump at the outage");
    assert!((20..200).contains(&before), "rows before the gap: {before}");
    assert_one_jump(&rows, 1024.0 / 48_000.0, before, 0.9);
    let events = events(&ev);
    assert_eq!(events.len(), 1, "one gap event: {events:?}");
    let e = &events[0];
    assert_eq!(e["event"], "gap");
    assert_eq!(e["input"], "mic:default");
    assert_eq!(e["resumed"], true);
    let gap = e["gap_s"].as_f64().expect("gap_s");
    assert!(gap >= 0.9, "{e}");
    assert!(
        (rows[before].1 - rows[before - 1].1 - 1024.0 / 48_000.0 - gap).abs() < 0.05,
        "the rows after it are the gap later: {e}"
    );
}

/// fftd reading a new FIFO (`--retry forever`, rows to /dev/null) with a live view on a free
/// port: the FIFO, the port and the running process.
fn served_fifo_run(name: &str) -> (PathBuf, u16, Reaped) {
    let dir = tmp(name);
    let fifo = dir.join("in.f32");
    mkfifo(&fifo);
    let port = free_port();
    let child = fftd()
        .arg("--file")
        .arg(&fifo)
        .args(["--input-format", "f32", "--rate", "1024", "--frame", "1024"])
        .args(["--device", "cpu", "--retry", "forever"])
        .args(["--output", "/dev/null"])
        .args(["--serve", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fftd");
    (fifo, port, Reaped(Some(child)))
}

#[test]
fn retry_counters_are_on_metrics() {
    let (fifo, port, mut child) = served_fifo_run("metrics");
    write_fifo(&fifo, &signal());
    std::thread::sleep(Duration::from_millis(700));
    write_fifo(&fifo, &signal());
    let metrics = (0..100)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            let text = http_get(port, "/metrics")?;
            text.contains("fftd_input_gaps_total{stream=\"0\"} 1")
                .then_some(text)
        })
        .expect("the gap counted on /metrics");
    // one attempt ended the outage; the second writer's end began another
    let retries: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("fftd_input_retries_total "))
        .and_then(|n| n.trim().parse().ok())
        .expect("fftd_input_retries_total");
    assert!(retries >= 1, "{metrics}");
    let child = child.0.take().expect("child");
    interrupt(&child);
    let (code, stderr) = wait(child);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn gaps_go_to_the_live_views_event_feed() {
    // --retry and --serve without --alert or --events: the gap is a server-sent event on /events
    let (fifo, port, mut child) = served_fifo_run("feed");
    // the first writer holds the FIFO open while /events is connected
    let first = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            std::fs::OpenOptions::new()
                .write(true)
                .open(fifo)
                .expect("open the FIFO for writing")
        })
    };
    let mut feed = (0..100)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            let mut feed = Feed::open(port, "/events")?;
            feed.read_until(
                |t| t.contains(": fftd alert events"),
                Duration::from_secs(5),
            )
            .then_some(feed)
        })
        .expect("/events answers");
    assert!(feed.text.contains("text/event-stream"), "{}", feed.text);
    let streams = http_get(port, "/api/streams").expect("/api/streams");
    assert!(
        streams.contains("\"alerts\":[]"),
        "the page opens /events: {streams}"
    );
    let mut first = first.join().expect("first writer");
    first.write_all(&signal()).expect("write the FIFO");
    close_drained(first);
    // 2 s away: fftd may notice the end late on a busy machine (the check wants a 0.6 s gap)
    std::thread::sleep(Duration::from_millis(2000));
    write_fifo(&fifo, &signal());
    let gap = |t: &str| {
        t.split_once("event: gap\ndata: ")
            .is_some_and(|(_, data)| data.contains("\n\n"))
    };
    assert!(
        feed.read_until(gap, Duration::from_secs(20)),
        "a gap event on /events: {}",
        feed.text
    );
    let data = feed.text.split("event: gap\ndata: ").nth(1).expect("data");
    let e: serde_json::Value =
        serde_json::from_str(data.lines().next().expect("a line")).expect("the event is JSON");
    assert_eq!(e["event"], "gap");
    assert_eq!(e["stream"], 0);
    assert_eq!(e["resumed"], true);
    assert_eq!(e["time_s"], 12.0, "the gap begins after 12 s of signal");
    assert!(e["gap_s"].as_f64().expect("gap_s") >= 0.6, "{e}");
    assert_eq!(e["input"], fifo.display().to_string());
    let child = child.0.take().expect("child");
    interrupt(&child);
    let (code, stderr) = wait(child);
    assert_eq!(code, Some(0), "{stderr}");
}

/// An open HTTP response read bit by bit (a server-sent-events stream).
struct Feed {
    stream: TcpStream,
    text: String,
}

impl Feed {
    fn open(port: u16, path: &str) -> Option<Feed> {
        let stream = send_http_get(port, path)?;
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .ok()?;
        Some(Feed {
            stream,
            text: String::new(),
        })
    }

    /// Reads until `done` says the text read so far is enough, or `limit` passed.
    fn read_until(&mut self, done: impl Fn(&str) -> bool, limit: Duration) -> bool {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        while !done(&self.text) {
            if start.elapsed() > limit {
                return false;
            }
            match self.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.text.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(_) => {}
            }
        }
        true
    }
}

/// A child killed if the test fails before it is waited for (no fftd left behind).
struct Reaped(Option<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// SIGINT to `child` (as Ctrl-C).
fn interrupt(child: &Child) {
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}
