//! Helpers shared by the integration tests: deterministic signals, a per-frame tolerance check,
//! and running the `fftd` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Deterministic pseudo-random values in [-1, 1) (xorshift), so failures reproduce.
pub fn noise(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// Largest |got - want| relative to the frame's largest |want| (values compared in order).
pub fn max_relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "bin counts differ");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / scale)
        .fold(0.0, f64::max)
}

/// The fftd binary, quiet, with its calibration cache inside the build folder (never $HOME).
pub fn fftd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fftd"));
    cmd.env("RUST_LOG", "fftd=warn");
    if std::env::var_os("FFTD_CACHE_DIR").is_none() {
        cmd.env(
            "FFTD_CACHE_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/fftd-cache"),
        );
    }
    cmd
}

/// Runs fftd with `args`, no stdin. Analysis runs use the CPU engine unless `args` name a device:
/// tests compare outputs exactly, and `auto` may route batches of different lengths to different
/// engines (equal to 1e-4, not to the last bit).
pub fn run(args: &[&str]) -> Output {
    let mut cmd = fftd();
    cmd.args(args);
    let subcommand = matches!(
        args.first(),
        Some(&"devices" | &"check" | &"bench" | &"publish" | &"fleet")
    );
    if !subcommand && !args.contains(&"--device") {
        cmd.args(["--device", "cpu"]);
    }
    cmd.stdin(Stdio::null()).output().expect("fftd runs")
}

pub fn stdout_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Values as little-endian f32, as `--input-format f32` reads them (interleaved re, im for cf32).
pub fn f32_bytes(values: &[f64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| (v as f32).to_le_bytes())
        .collect()
}

/// Writes `values` as a little-endian f32 (or interleaved cf32) file.
pub fn write_f32(path: &Path, values: &[f64]) {
    std::fs::write(path, f32_bytes(values)).expect("write f32 samples");
}

/// A little-endian f32 file's values (`--format f32` output).
pub fn read_f32(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).expect("output");
    bytes
        .chunks_exact(4)
        .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect()
}

/// Whether the OpenCL tests run: they do unless FFTD_SKIP_OPENCL_TESTS=1 (CI has PoCL).
pub fn opencl_required() -> bool {
    if std::env::var("FFTD_SKIP_OPENCL_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("skipping: FFTD_SKIP_OPENCL_TESTS=1");
        return false;
    }
    true
}

/// Records in the cache folder `cache` (as `FFTD_CACHE_DIR`) what an earlier run found the
/// device choice `choice` to name (`device-kinds.json`): GPU-type devices alone, or not. A
/// choice so recorded starts its devices in the background while the CPU engines work, or
/// opens them before the run.
pub fn record_device_kinds(cache: &Path, choice: &str, gpus_alone: bool) {
    let kinds = format!("{{{choice:?}:{gpus_alone}}}");
    std::fs::write(cache.join("device-kinds.json"), kinds).expect("device kinds");
}

/// Writes one sample per line.
pub fn write_text_samples(path: &Path, samples: &[f64]) {
    let text: String = samples.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(path, text).expect("write samples");
}

/// Parses text output: one row per line of space-separated numbers.
pub fn parse_rows(text: &str) -> Vec<Vec<f64>> {
    text.lines()
        .map(|l| {
            l.split(' ')
                .map(|v| v.parse::<f64>().expect("number"))
                .collect()
        })
        .collect()
}

/// Asserts a run succeeded and printed nothing on stderr.
pub fn assert_silent_success(out: &Output) {
    let err = stderr_text(out);
    assert!(out.status.success(), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// Asserts a run failed with `code`, one line on stderr containing every `needle`, no panic.
pub fn assert_clean_error(out: &Output, code: i32, needles: &[&str]) {
    let err = stderr_text(out);
    assert_eq!(out.status.code(), Some(code), "exit code; stderr: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "panic: {err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "stderr lacks '{n}': {err}");
    }
}

/// The python the tests compare against (`FFTD_PYTHON`, else python3).
pub fn python() -> String {
    std::env::var("FFTD_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether python imports `modules`; when it cannot, CI fails with the reason instead of skipping.
pub fn python_has(modules: &str) -> bool {
    let python = python();
    let ok = std::process::Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let required = std::env::var("CI").is_ok_and(|v| v == "true")
            || std::env::var_os("FFTD_REQUIRE_NUMPY").is_some();
        assert!(
            !required,
            "{python} cannot import {modules} (CI requires it: run scripts/deps.sh --test)"
        );
        eprintln!("skipping: {python} cannot import {modules}");
    }
    ok
}

/// Runs a python script (`python -c script argv...`) and asserts it succeeded (`context` names
/// the case in the failure); returns what it printed.
pub fn run_python(script: &str, argv: &[&str], context: &str) -> String {
    let out = Command::new(python())
        .args(["-c", script])
        .args(argv)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{context}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `infile` and an ALSA config whose default capture device plays it.
pub fn alsa_file_device(dir: &Path, raw: &[u8]) -> PathBuf {
    let infile = dir.join("signal.raw");
    std::fs::write(&infile, raw).expect("write raw signal");
    let conf = dir.join("asound.conf");
    let text = format!(
        "pcm.!default {{\n    type file\n    slave.pcm {{ type null }}\n    file \"/dev/null\"\n    infile \"{}\"\n    format \"raw\"\n}}\n",
        infile.display()
    );
    std::fs::write(&conf, text).expect("write ALSA config");
    conf
}

/// Makes a named pipe (FIFO) at `path`, for tests of fftd reading or writing one.
pub fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path with no NUL");
    // SAFETY: mkfifo(3) with a NUL-terminated path that lives across the call.
    let made = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } == 0;
    let why = std::io::Error::last_os_error();
    assert!(made, "mkfifo {}: {why}", path.display());
}

/// Whether `program` runs (`program ARGS` exits 0); when it cannot, CI fails with the reason
/// instead of skipping (as `python_has`).
pub fn program_runs(program: &str, args: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let required = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !required,
            "{program} is missing (CI requires it: run scripts/deps.sh --test)"
        );
        eprintln!("skipping: {program} is missing (scripts/deps.sh --test installs it)");
    }
    ok
}

/// How long a run may take to end after a signal (or to give up, stop, time out) in a test
/// whose subject is that it ends promptly. The design answers in well under a second (a
/// signal is seen at the next poll, ≤ 100 ms, then the pipeline drains); the bugs these tests
/// guard against wait for something that never comes (a reader, a writer, a server) or for a
/// timeout of 10 s and more. 5 s tells the two apart with the suite on 2 cores beside two
/// busy loops, where fftd may get a third of a core and its teardown runs that much slower.
pub const PROMPT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits (at most 60 s) until process `pid` has installed its handlers for SIGINT and SIGTERM
/// (`SigCgt` in /proc/PID/status), so a signal the test sends next is fftd's to handle: a
/// fixed sleep is not enough on a busy machine, where the default action would kill it first.
pub fn wait_until_signals_caught(pid: u32) {
    let started = std::time::Instant::now();
    while !signals_caught(pid) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "process {pid} never caught SIGINT and SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether process `pid` has its SIGINT and SIGTERM handlers installed (`SigCgt` in /proc).
fn signals_caught(pid: u32) -> bool {
    const WANTED: u64 = (1 << (libc::SIGINT - 1)) | (1 << (libc::SIGTERM - 1));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"));
    let caught = mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok());
    caught.unwrap_or(0) & WANTED == WANTED
}

/// The value of the metric `name` (a line `NAME VALUE`) in a /metrics text.
pub fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Runs `cmd` (stdout and stderr piped) and times it from when it has installed its SIGINT and
/// SIGTERM handlers (in `main`, once the options are resolved, before any run or connect), not
/// from the spawn: a busy machine's process start is not counted in a bound on what the run
/// itself waits. A run over before they are seen is timed from its spawn.
pub fn output_timed_from_main(cmd: &mut Command) -> (Output, std::time::Duration) {
    let spawned = std::time::Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the process starts");
    let ended = loop {
        if child.try_wait().expect("try_wait").is_some() {
            break true;
        }
        if signals_caught(child.id()) {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let started = std::time::Instant::now();
    let out = child.wait_with_output().expect("the process ends");
    let took = match ended {
        true => spawned.elapsed(),
        false => started.elapsed(),
    };
    (out, took)
}

/// A free loopback port (bound and released: the process the test starts next binds it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A connection to whatever listens on loopback `port`; None while nothing does. A socket
/// connected to itself does not count: before a server listens, a connect to a port in the
/// ephemeral range (where `free_port` finds one) can be given that very port as its own and
/// connect to itself (TCP simultaneous open). It would then read back what it wrote, wait for
/// an end that never comes, and hold the port the server is about to bind; closed normally it
/// would still hold it for a minute (TIME-WAIT), so it is closed with a reset.
pub fn connect_loopback(port: u16) -> Option<std::net::TcpStream> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    if stream.local_addr().ok()? == stream.peer_addr().ok()? {
        close_with_reset(stream);
        return None;
    }
    Some(stream)
}

/// Closes `stream` with a reset (SO_LINGER 0): its port is free at once, no TIME-WAIT.
fn close_with_reset(stream: std::net::TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    set_socket_option(&stream, libc::SO_LINGER, &linger);
    drop(stream);
}

/// `setsockopt(SOL_SOCKET, option, value)` on `socket`; whether it took.
pub fn set_socket_option<V>(
    socket: &impl std::os::fd::AsRawFd,
    option: libc::c_int,
    value: &V,
) -> bool {
    // SAFETY: `value` is a valid `V` for the call's duration and its size is passed with it;
    // the descriptor is the socket's own, open while it is borrowed here.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (value as *const V).cast(),
            std::mem::size_of::<V>() as libc::socklen_t,
        )
    };
    set == 0
}

/// The whole response to an HTTP GET of `path` on loopback `port`; None while nothing
/// listens, or when the server does not answer in full within 30 s.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::Read;
    let mut stream = send_http_get(port, path)?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

/// A connection to loopback `port` (`connect_loopback`) that has sent an HTTP GET of `path`,
/// its response to be read; None while nothing listens.
pub fn send_http_get(port: u16, path: &str) -> Option<std::net::TcpStream> {
    use std::io::Write;
    let mut stream = connect_loopback(port)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    Some(stream)
}
