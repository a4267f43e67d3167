//! Fleet mode against nats-servers that require credentials or TLS (Debian's nats-server on
//! loopback, certificates made here with the openssl CLI): user/password and a token, in the
//! address, by flag or from the environment; a wrong secret is one line, exit 1, never showing the
//! secret; an end-to-end run with credentials equals a local run and its `--meta` holds no secret;
//! `tls://` with `--nats-ca`, without it (a certificate error, bounded), and client certificates.
//! Not tested: `--nats-creds` (a .creds file needs an operator/JWT server, made with `nsc`, which
//! Debian does not package).

mod common;
mod fleet_common;

use common::*;
use fleet_common::*;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const USER: &str = "fleet-user";
const PASSWORD: &str = "pw-Hunter2-4711";
const TOKEN: &str = "tok-S3cret-0815";

/// fftd without any `$NATS_*` of the caller, plus `env`.
fn fftd_env(env: &[(&str, &str)]) -> Command {
    let mut cmd = fftd();
    for name in ["NATS_USER", "NATS_PASSWORD", "NATS_TOKEN"] {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().copied()).stdin(Stdio::null());
    cmd
}

fn setup_with(server: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    fftd_env(env)
        .args(["fleet", "setup", "--server", server])
        .args(extra)
        .output()
        .expect("fftd runs")
}

fn assert_ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", stderr_text(out));
}

/// One line, exit 1, naming the connection, not showing `secret`, within `limit`.
fn assert_refused(out: &Output, started: Instant, needles: &[&str], secret: &str) {
    assert_clean_error(out, 1, needles);
    let err = stderr_text(out);
    assert!(!err.contains(secret), "secret shown: {err}");
    assert!(started.elapsed() < Duration::from_secs(8), "not bounded");
}

fn setup_refused(server: &str, extra: &[&str], env: &[(&str, &str)], secret: &str) {
    let started = Instant::now();
    let mut args = extra.to_vec();
    args.extend(["--connect-timeout", "2"]);
    let out = setup_with(server, &args, env);
    assert_refused(&out, started, &["cannot connect"], secret);
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[test]
fn user_and_password_in_the_address_by_flag_and_from_the_environment() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let auth = ClientAuth::UserPassword(USER.into(), PASSWORD.into());
    let server =
        NatsServer::start_with(dir.path(), &os(&["--user", USER, "--pass", PASSWORD]), auth);
    let port = server.port;
    let with =
        |user: &str, pw: &str, path: &str| format!("nats://{user}:{pw}@127.0.0.1:{port}/{path}");
    assert_ok(&setup_with(&with(USER, PASSWORD, ""), &[], &[]), "setup");
    // wrong secrets, and none at all
    setup_refused(&with(USER, "wrong-Pa55", ""), &[], &[], "wrong-Pa55");
    setup_refused(
        &server.url(""),
        &["--nats-user", USER, "--nats-password", "wrong-Pa55"],
        &[],
        "wrong-Pa55",
    );
    setup_refused(
        &server.url(""),
        &[],
        &[("NATS_USER", USER), ("NATS_PASSWORD", "wrong-Pa55")],
        "wrong-Pa55",
    );
    setup_refused(&server.url(""), &[], &[], PASSWORD);

    // end to end: the publisher by flags, the worker from the environment
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 30_000); // 231 frames, 15 blocks
    let out = fftd_env(&[])
        .args([
            "publish",
            "--to",
            &server.url("frames.site1"),
            "--source-id",
            "rec",
        ])
        .args(["--nats-user", USER, "--nats-password", PASSWORD])
        .arg("--file")
        .arg(&wav)
        .args(FRAMING)
        .args(["--block-frames", "16"])
        .output()
        .expect("publisher runs");
    assert_ok(&out, "publish");
    assert!(!stderr_text(&out).contains(PASSWORD));
    let meta = dir.path().join("meta.json");
    let out = fftd_env(&[("NATS_USER", USER), ("NATS_PASSWORD", PASSWORD)])
        .args(["--file", &server.url("FRAMES/workers")])
        // the address may carry them too: --meta must not show them
        .args(["--output", &with(USER, PASSWORD, "spectra.site1")])
        .args(FRAMING)
        .args(["--device", "cpu", "--idle-exit", "2", "--stats", "--meta"])
        .arg(&meta)
        .output()
        .expect("worker runs");
    assert_ok(&out, "worker");
    assert!(!stderr_text(&out).contains(PASSWORD));
    let meta = std::fs::read_to_string(&meta).expect("--meta written");
    assert!(!meta.contains(PASSWORD) && !meta.contains(USER), "{meta}");
    assert!(meta.contains("nats://***@127.0.0.1"), "{meta}");
    assert_equals_local(&server, &wav);
}

#[test]
fn a_token_in_the_address_by_flag_and_from_the_environment() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = NatsServer::start_with(
        dir.path(),
        &os(&["--auth", TOKEN]),
        ClientAuth::Token(TOKEN.into()),
    );
    let in_address = |token: &str| format!("nats://{token}@127.0.0.1:{}/", server.port);
    assert_ok(
        &setup_with(&in_address(TOKEN), &[], &[]),
        "token in the address",
    );
    assert_ok(
        &setup_with(&server.url(""), &["--nats-token", TOKEN], &[]),
        "--nats-token",
    );
    assert_ok(
        &setup_with(&server.url(""), &[], &[("NATS_TOKEN", TOKEN)]),
        "$NATS_TOKEN",
    );
    setup_refused(&in_address("tok-Wr0ng-1"), &[], &[], "tok-Wr0ng-1");
    setup_refused(
        &server.url(""),
        &["--nats-token", "tok-Wr0ng-1"],
        &[],
        "tok-Wr0ng-1",
    );
    setup_refused(
        &server.url(""),
        &[],
        &[("NATS_TOKEN", "tok-Wr0ng-1")],
        "tok-Wr0ng-1",
    );
    setup_refused(&server.url(""), &[], &[], TOKEN);
}

/// A CA, a server certificate for 127.0.0.1/localhost and a client certificate, in `dir`.
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            stderr_text(&out)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=fftd test CA"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca-key.pem", "-out", "ca.pem"]);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    ca.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    openssl(&ca);
    for (name, usage) in [("server", "serverAuth"), ("client", "clientAuth")] {
        let key = format!("{name}-key.pem");
        let csr = format!("{name}.csr");
        let mut req = vec![
            "req",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &key,
            "-out",
            &csr,
        ];
        req.extend(ec);
        openssl(&req);
        let ext = format!("{name}.ext");
        let text = format!(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n"
        );
        std::fs::write(dir.join(&ext), text).expect("extensions");
        let pem = format!("{name}.pem");
        openssl(&[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-extfile",
            &ext,
            "-out",
            &pem,
        ]);
    }
}

#[test]
fn tls_with_the_ca_without_it_and_with_client_certificates() {
    if !have_server() || !program_runs("openssl", &["version"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path();
    make_certificates(certs);
    let file = |name: &str| certs.join(name).to_str().expect("utf-8 path").to_string();
    let (ca, cert, key) = (file("ca.pem"), file("client.pem"), file("client-key.pem"));
    let (server_cert, server_key) = (file("server.pem"), file("server-key.pem"));

    let plain_dir = tempfile::tempdir().expect("tempdir");
    let server = NatsServer::start_with(
        plain_dir.path(),
        &os(&["--tls", "--tlscert", &server_cert, "--tlskey", &server_key]),
        ClientAuth::None,
    );
    let tls = format!("tls://127.0.0.1:{}/", server.port);
    assert_ok(
        &setup_with(&tls, &["--nats-ca", &ca], &[]),
        "tls:// --nats-ca",
    );
    let nats = server.url("");
    assert_ok(
        &setup_with(&nats, &["--nats-tls", "--nats-ca", &ca], &[]),
        "--nats-tls",
    );
    let started = Instant::now();
    let out = setup_with(&tls, &["--connect-timeout", "2"], &[]);
    assert_refused(&out, started, &["cannot connect", "certificate"], "BEGIN");

    let verify_dir = tempfile::tempdir().expect("tempdir");
    let verifying = NatsServer::start_with(
        verify_dir.path(),
        &os(&[
            "--tlsverify",
            "--tlscert",
            &server_cert,
            "--tlskey",
            &server_key,
            "--tlscacert",
            &ca,
        ]),
        ClientAuth::None,
    );
    let tls = format!("tls://127.0.0.1:{}/", verifying.port);
    let client = ["--nats-ca", &ca, "--nats-cert", &cert, "--nats-key", &key];
    assert_ok(&setup_with(&tls, &client, &[]), "client certificate");
    let started = Instant::now();
    let out = setup_with(&tls, &["--nats-ca", &ca, "--connect-timeout", "2"], &[]);
    assert_refused(&out, started, &["cannot connect"], "BEGIN");
}

#[test]
fn unreadable_credentials_and_certificates_are_usage_errors() {
    // no server needed: the files are checked before connecting
    let missing = "/nonexistent/fftd-test.pem";
    for flags in [
        vec!["--nats-creds", missing],
        vec!["--nats-ca", missing],
        vec!["--nats-cert", missing, "--nats-key", missing],
    ] {
        let out = setup_with("tls://127.0.0.1:1/", &flags, &[]);
        assert_clean_error(&out, 2, &[flags[0], missing]);
    }
}
