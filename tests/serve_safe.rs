//! `--serve` safe to expose (docs/serve.md, "Who may look"): a foreign Host refused (DNS
//! rebinding), a WebSocket from another origin refused, the security headers and a 404 body on
//! every response, slowloris and idle connections closed after the header/idle timeouts
//! (shortened through FFTD_SERVE_HEADER_TIMEOUT / FFTD_SERVE_IDLE_TIMEOUT), the connection cap
//! (a newcomer evicts a connection that has sent no whole request; 503 when all are busy), a
//! bearer token on every endpoint (a Prometheus scrape of /metrics with it), HTTPS with a
//! certificate made by openssl, and Ctrl-C not waiting for a half-sent request. The browser's
//! side of the Origin check is in tests/serve_browser.py.

use crate::common;

use common::{assert_clean_error, fftd, program_runs, python_has, run, run_python, write_f32};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `fftd --realtime --serve 127.0.0.1:0 EXTRA...` on a 30 s tone.
struct Served {
    child: Child,
    addr: String,
    lines: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start(extra: &[&str], envs: &[(&str, &str)]) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("tone.f32");
        let tone: Vec<f64> = (0..240_000).map(|i| (i as f64 * 0.7).sin()).collect();
        write_f32(&input, &tone);
        let mut child = fftd()
            .envs(envs.iter().copied())
            .args(["--file", input.to_str().unwrap(), "--rate", "8000"])
            .args(["--frame", "256", "--realtime", "--device", "cpu"])
            .args(["--output", "/dev/null", "--serve", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fftd starts");
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("fftd says where it serves");
        let addr = first
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in '{first}'"))
            .to_string();
        Served {
            child,
            addr,
            lines,
            _dir: dir,
        }
    }

    /// SIGINT; the exit status and how long it took.
    fn interrupt(mut self) -> Duration {
        let started = Instant::now();
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit after SIGINT: {status}");
        let said: Vec<String> = self.lines.try_iter().collect();
        assert!(!said.iter().any(|l| l.contains("panicked")), "{said:?}");
        started.elapsed()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response: status line, headers (lower-case names), body.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends `request` (a whole HTTP/1.1 request) and reads the reply until the server closes.
fn exchange(addr: &str, request: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).expect("request");
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// GET `path` with `Host: host` and extra header lines.
fn get(addr: &str, host: &str, path: &str, headers: &[&str]) -> Reply {
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
    )
}

/// A WebSocket handshake with extra headers; the HTTP status it got (101: open).
fn websocket_status(addr: &str, headers: &[(&str, &str)]) -> u16 {
    use tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{addr}/ws").into_client_request().unwrap();
    for (k, v) in headers {
        let name = tungstenite::http::HeaderName::from_bytes(k.as_bytes()).expect("name");
        request
            .headers_mut()
            .insert(name, v.parse().expect("header value"));
    }
    match tungstenite::connect(request) {
        Ok((_, response)) => response.status().as_u16(),
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("websocket: {e}"),
    }
}

fn assert_security_headers(reply: &Reply, what: &str) {
    for (name, want) in [
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
    ] {
        assert_eq!(reply.header(name), Some(want), "{what}: {name}");
    }
    let csp = reply.header("content-security-policy").unwrap_or("");
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
        "{what}: CSP '{csp}'"
    );
    assert!(reply.header("cache-control").is_some(), "{what}");
}

#[test]
fn a_foreign_host_and_a_foreign_origin_are_refused_and_every_reply_is_hardened() {
    let served = Served::start(&[], &[]);
    let addr = served.addr.clone();
    // a DNS-rebinding page's requests carry its own name
    for path in ["/spectra", "/api/streams", "/metrics", "/"] {
        let r = get(&addr, "evil.example", path, &[]);
        assert_eq!(r.status, 403, "{path}: {}", r.head);
        assert!(r.body.contains("--serve-allow-host"), "{}", r.body);
        assert_security_headers(&r, "403");
    }
    let port = addr.rsplit(':').next().unwrap();
    for host in [
        addr.clone(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let r = get(&addr, &host, "/healthz", &[]);
        assert_eq!((r.status, r.body.as_str()), (200, "ok\n"), "Host {host}");
        assert_security_headers(&r, "/healthz");
    }
    for path in [
        "/",
        "/app.js",
        "/xfer.js",
        "/app.css",
        "/api/streams",
        "/metrics",
    ] {
        let r = get(&addr, &addr, path, &[]);
        assert_eq!(r.status, 200, "{path}");
        assert_security_headers(&r, path);
    }
    // a second Host or Origin is not looked past
    let r = get(&addr, &addr, "/healthz", &["Host: evil.example"]);
    assert_eq!(r.status, 400, "{}", r.head);
    assert!(r.body.contains("more than one Host header"), "{}", r.body);
    let own = format!("Origin: http://{addr}");
    let r = get(&addr, &addr, "/", &[&own, "Origin: http://evil.example"]);
    assert_eq!(r.status, 400, "{}", r.head);
    let r = get(&addr, &addr, "/no/such/page", &[]);
    assert_eq!(r.status, 404);
    assert!(r.body.contains("no such page: /no/such/page"), "{}", r.body);
    assert_security_headers(&r, "404");
    assert!(r.body.contains("/events"), "{}", r.body);
    // a query that does not parse is one line naming it, not a framework's message
    for (path, says) in [
        ("/spectra?every=0", "every=0"),
        ("/spectra?every=x", "every"),
        ("/spectra?stream=-1", "stream"),
        ("/ws?width=wide", "width"),
        ("/ws", "WebSocket"),
    ] {
        let r = get(&addr, &addr, path, &[]);
        // (a plain GET of /ws: 426 Upgrade Required)
        assert!(matches!(r.status, 400 | 426), "{path}: {}", r.head);
        assert!(
            r.body.starts_with("fftd: ") && r.body.contains(says),
            "{path}: {}",
            r.body
        );
        assert_eq!(r.body.trim_end().lines().count(), 1, "{}", r.body);
    }
    // WebSocket upgrades: no Origin (not a browser) and the page's own origin are welcome
    assert_eq!(websocket_status(&addr, &[]), 101);
    let own = format!("http://{addr}");
    assert_eq!(websocket_status(&addr, &[("Origin", &own)]), 101);
    for foreign in [
        "http://evil.example",
        "http://127.0.0.1:1",
        "null",
        "https://127.0.0.1",
    ] {
        assert_eq!(
            websocket_status(&addr, &[("Origin", foreign)]),
            403,
            "{foreign}"
        );
    }
    served.interrupt();

    // the allow-lists
    let lists = [
        "--serve-allow-origin",
        "https://ok.example",
        "--serve-allow-host",
        "spectra.example.org",
    ];
    let served = Served::start(&lists, &[]);
    let addr = served.addr.clone();
    let origin = [("Origin", "https://ok.example")];
    assert_eq!(websocket_status(&addr, &origin), 101);
    let origin = [("Origin", "https://no.example")];
    assert_eq!(websocket_status(&addr, &origin), 403);
    assert_eq!(get(&addr, "spectra.example.org", "/", &[]).status, 200);
    assert_eq!(get(&addr, "other.example.org", "/", &[]).status, 403);
    served.interrupt();
    let served = Served::start(&["--serve-allow-host", "*"], &[]);
    assert_eq!(
        get(&served.addr, "evil.example", "/healthz", &[]).status,
        200
    );
    served.interrupt();
}

/// Opens a connection that sends `partial` and never finishes its request.
fn slow(addr: &str, partial: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(partial.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Whether the server has closed `s` (read: end of file or reset), within its read timeout.
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // (a 408 or the like first is fine)
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn slowloris_and_idle_connections_are_closed_and_never_lock_viewers_out() {
    let timeouts = [
        ("FFTD_SERVE_HEADER_TIMEOUT", "1"),
        ("FFTD_SERVE_IDLE_TIMEOUT", "1.5"),
    ];
    // (the default cap, 64)
    let served = Served::start(&[], &timeouts);
    let addr = served.addr.clone();
    // 200 connections: nothing, half a request line, or headers trickled without an end
    let mut sockets: Vec<TcpStream> = (0..200)
        .map(|i| match i % 3 {
            0 => slow(&addr, ""),
            1 => slow(&addr, "GET /spec"),
            _ => slow(
                &addr,
                &format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-A: 1\r\n"),
            ),
        })
        .collect();
    // a viewer still gets in at once (it evicts a connection that has sent no whole request)
    let r = get(&addr, &addr, "/healthz", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
    assert_eq!(websocket_status(&addr, &[]), 101);
    // and every slow connection is closed (evicted, or after the 1 s header timeout)
    for (i, s) in sockets.iter_mut().enumerate() {
        assert!(closed_by_server(s), "slow connection {i} still open");
    }
    // one alone is closed by the header timeout: it was not evicted (nobody needed its place)
    let started = Instant::now();
    let mut alone = slow(&addr, "GET / HTTP/1.1\r\n");
    for _ in 0..3 {
        // (headers that keep coming do not extend the deadline; on a busy machine these
        // pauses may outlast it, and a write to the closed connection then fails: no matter)
        std::thread::sleep(Duration::from_millis(250));
        let _ = alone.write_all(b"X-Slow: 1\r\n");
    }
    assert!(closed_by_server(&mut alone));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "closed after {waited:?}"
    );
    // a kept-alive connection is closed once idle for 1.5 s after its response
    let mut kept = TcpStream::connect(&addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // (timed from before the request: the server's 1.5 s begins after it, however late this
    // thread runs on a busy machine)
    let started = Instant::now();
    write!(kept, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 1024];
    let idle_close = loop {
        match kept.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("ok\n"),
        "{text}"
    );
    assert!(idle_close, "the idle connection stayed open");
    assert!(started.elapsed() >= Duration::from_millis(1400));
    served.interrupt();
}

#[test]
fn the_connection_cap_holds_and_says_so_when_every_connection_is_busy() {
    let served = Served::start(&["--serve-max-connections", "2"], &[]);
    let addr = served.addr.clone();
    let sessions: Vec<_> = (0..2)
        .map(|_| tungstenite::connect(format!("ws://{addr}/ws")).expect("websocket"))
        .collect();
    let r = get(&addr, &addr, "/healthz", &[]);
    assert_eq!(r.status, 503, "{}", r.head);
    assert!(r.body.contains("--serve-max-connections 2"), "{}", r.body);
    drop(sessions);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = get(&addr, &addr, "/healthz", &[]);
        if r.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no place after the sessions ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run(&[
        "--file",
        "x.f32",
        "--serve",
        "0",
        "--serve-max-connections",
        "0",
    ]);
    assert_clean_error(&out, 2, &["--serve-max-connections 0", "from 1 to"]);
    served.interrupt();
}

#[test]
fn a_token_guards_every_endpoint_and_prometheus_scrapes_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let token = "s3cr3t-t0ken_0123456789";
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let served = Served::start(&["--serve-token-file", file.to_str().unwrap()], &[]);
    let addr = served.addr.clone();
    let bearer = format!("Authorization: Bearer {token}");
    for path in [
        "/",
        "/app.js",
        "/healthz",
        "/metrics",
        "/api/streams",
        "/spectra",
    ] {
        let r = get(&addr, &addr, path, &[]);
        assert_eq!(r.status, 401, "{path}");
        assert!(r.body.contains("token"), "{}", r.body);
        assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"fftd\""));
        let wrong = get(
            &addr,
            &addr,
            path,
            &["Authorization: Bearer s3cr3t-t0ken_012345678"],
        );
        assert_eq!(wrong.status, 401, "{path}");
    }
    assert_eq!(websocket_status(&addr, &[]), 401);
    let with = format!("Bearer {token}");
    assert_eq!(websocket_status(&addr, &[("Authorization", &with)]), 101);
    // Prometheus' `authorization: {credentials_file: ...}` sends exactly this header
    let metrics = get(&addr, &addr, "/metrics", &[&bearer]);
    assert_eq!(metrics.status, 200);
    assert!(metrics.body.contains("fftd_frames_in_total"));
    if python_has("prometheus_client") {
        let path = dir.path().join("metrics.txt");
        std::fs::write(&path, &metrics.body).unwrap();
        let parsed = run_python(PARSE, &[path.to_str().unwrap()], "prometheus parser");
        assert!(parsed.contains("fftd_frames_in counter"), "{parsed}");
    }
    // a browser: /?token= once sets an HttpOnly SameSite=Strict cookie and drops it from the URL
    let r = get(&addr, &addr, &format!("/?stream=0&token={token}"), &[]);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/?stream=0"));
    let cookie = r.header("set-cookie").unwrap_or("").to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let page = get(&addr, &addr, "/", &[&format!("Cookie: {pair}")]);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("app.js"));
    assert_eq!(websocket_status(&addr, &[("Cookie", pair)]), 101);
    served.interrupt();

    // from the environment too; a token that cannot go in a header is refused up front
    let served = Served::start(&[], &[("FFTD_SERVE_TOKEN", token)]);
    assert_eq!(get(&served.addr, &served.addr, "/metrics", &[]).status, 401);
    assert_eq!(
        get(&served.addr, &served.addr, "/metrics", &[&bearer]).status,
        200
    );
    served.interrupt();
    let out = run(&["--file", "x.f32", "--serve", "0", "--serve-token", "a b"]);
    assert_clean_error(&out, 2, &["--serve-token", "letters, digits"]);
    let out = run(&["--file", "x.f32", "--serve-token", "abc"]);
    assert_clean_error(&out, 2, &["--serve-token needs --serve"]);
    // an empty one (`$(cat missing)`) is refused, not taken as none (helper-42: served open)
    let out = fftd()
        .args(["--file", "x.f32", "--serve", "0"])
        .env("FFTD_SERVE_TOKEN", "")
        .output()
        .expect("fftd runs");
    assert_clean_error(&out, 2, &["FFTD_SERVE_TOKEN", "at least one"]);
}

const PARSE: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for f in text_string_to_metric_families(open(sys.argv[1]).read()):
    print(f.name, f.type)
"#;

/// A self-signed certificate for 127.0.0.1 and its key, made by openssl.
pub(crate) fn certificate(dir: &Path) -> (String, String) {
    let cert = dir.join("cert.pem").to_str().unwrap().to_string();
    let key = dir.join("key.pem").to_str().unwrap().to_string();
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-keyout", &key, "-out", &cert])
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

/// GETs the URL with python's ssl module, verifying the server against the certificate.
const HTTPS_GET: &str = r#"
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2])
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[3]})
with urllib.request.urlopen(req, context=ctx, timeout=20) as r:
    print(r.status, r.headers.get("Strict-Transport-Security"), r.read().decode().strip())
"#;

#[test]
fn tls_serves_https_with_openssl_certificates_and_refuses_plain_http() {
    if !program_runs("openssl", &["version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let args = [
        "--serve-tls-cert",
        &cert,
        "--serve-tls-key",
        &key,
        "--serve-token",
        "tok",
    ];
    let served = Served::start(&args, &[("FFTD_SERVE_HEADER_TIMEOUT", "1")]);
    let addr = served.addr.clone();
    // a handshake that never comes is closed after the header timeout too
    let mut silent = slow(&addr, "");
    let got = run_python(
        HTTPS_GET,
        &[&format!("https://{addr}/healthz"), &cert, "tok"],
        "https GET",
    );
    assert_eq!(got.trim(), "200 max-age=31536000 ok");
    // plain HTTP to it gets no HTTP answer
    let plain = get(&addr, &addr, "/healthz", &["Authorization: Bearer tok"]);
    assert_eq!(plain.status, 0, "{}", plain.head);
    assert!(
        closed_by_server(&mut silent),
        "a silent TLS connection stayed open"
    );
    served.interrupt();

    // a key that is not one, or missing files: one line, before any output is touched
    let existing = dir.path().join("existing.npy");
    std::fs::write(&existing, b"precious").unwrap();
    let input = dir.path().join("x.f32");
    write_f32(&input, &[0.0; 1024]);
    let base = [
        "--file",
        input.to_str().unwrap(),
        "--format",
        "npy",
        "--output",
        existing.to_str().unwrap(),
        "--serve",
        "0",
        "--serve-tls-cert",
    ];
    // (usage errors, exit 2: files a flag names, read before the run)
    let out = run(&[&base[..], &[&cert, "--serve-tls-key", &cert]].concat());
    assert_clean_error(&out, 2, &["--serve-tls-key", "private key"]);
    let out = run(&[&base[..], &[&key, "--serve-tls-key", &key]].concat());
    assert_clean_error(&out, 2, &["--serve-tls-cert", "CERTIFICATE"]);
    // another certificate's key: named before the run, not at the first handshake
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let (_, other_key) = certificate(&other);
    let out = run(&[&base[..], &[&cert, "--serve-tls-key", &other_key]].concat());
    let not_its = format!("--serve-tls-key {other_key}: not the key of --serve-tls-cert {cert}");
    assert_clean_error(&out, 2, &[&not_its]);
    let locked = dir.path().join("locked.pem");
    let pem = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n";
    std::fs::write(&locked, pem).unwrap();
    let out = run(&[
        &base[..],
        &[&cert, "--serve-tls-key", locked.to_str().unwrap()],
    ]
    .concat());
    assert_clean_error(
        &out,
        2,
        &["--serve-tls-key", "an encrypted private key", "decrypted"],
    );
    let missing = dir.path().join("none.pem");
    let out = run(&[
        &base[..],
        &[missing.to_str().unwrap(), "--serve-tls-key", &key],
    ]
    .concat());
    assert_clean_error(&out, 2, &["none.pem"]);
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");
    let out = run(&[
        &base[..8],
        &["--serve-token-file", missing.to_str().unwrap()],
    ]
    .concat());
    assert_clean_error(&out, 2, &["--serve-token-file", "none.pem"]);
    let out = run(&["--file", "x.f32", "--serve", "0", "--serve-tls-cert", &cert]);
    assert_clean_error(&out, 2, &["--serve-tls-cert needs --serve-tls-key"]);
}

#[test]
fn ctrl_c_does_not_wait_for_a_half_sent_request() {
    // The bug waited out the header timeout of the half-sent requests: made 60 s here, so the
    // bug takes a minute (the 30 s tone, played out, half a minute) while the design stops
    // within a fraction of a second. 15 s tells them apart, with room for a busy machine.
    let served = Served::start(&[], &[("FFTD_SERVE_HEADER_TIMEOUT", "60")]);
    let addr = served.addr.clone();
    let _half = slow(&addr, &format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n"));
    let _idle = slow(&addr, "");
    let took = served.interrupt();
    assert!(took < Duration::from_secs(15), "Ctrl-C took {took:?}");
}
