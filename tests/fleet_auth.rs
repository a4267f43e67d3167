//! Fleet mode against nats-servers that require credentials or TLS (Debian's nats-server on
//! loopback, certificates made here with the openssl CLI): user/password and a token, in the
//! address, by flag or from the environment; a wrong secret is one line, exit 1, never showing the
//! secret; an end-to-end run with credentials equals a local run and its `--meta` holds no secret;
//! `tls://` with `--nats-ca`, without it (a certificate error, bounded), client certificates, and
//! an end-to-end run over TLS. `--nats-creds`: a server in operator (JWT) mode whose operator,
//! account and user JWTs the test signs itself with the nkeys crate (nsc, which would make them,
//! is not packaged by Debian); an end-to-end run with a .creds file equals a local run and shows
//! neither seed nor JWT; another user's seed is refused (one line, exit 1); a file that is no
//! .creds file is a usage error.

use crate::common;
use crate::fleet_common;

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
    // A refusal ends the run at the first answer (or at the 2 s --connect-timeout each caller
    // gives); the bug is a client that reconnects for ever (async-nats's default). 20 s tells
    // them apart with 18 s to spare for a busy machine.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "not bounded: {took:?}");
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
    // what is given by flag or in the address is never overridden by the environment, which
    // only fills in what is not given (a password for --nats-user)
    let other = [
        ("NATS_TOKEN", "tok-Wr0ng-1"),
        ("NATS_USER", "someone"),
        ("NATS_PASSWORD", "wrong-Pa55"),
    ];
    assert_ok(
        &setup_with(&with(USER, PASSWORD, ""), &[], &other),
        "the address's user beside $NATS_*",
    );
    let flags = ["--nats-user", USER, "--nats-password", PASSWORD];
    assert_ok(
        &setup_with(&server.url(""), &flags, &other),
        "flags beside $NATS_*",
    );
    assert_ok(
        &setup_with(
            &server.url(""),
            &["--nats-user", USER],
            &[("NATS_PASSWORD", PASSWORD)],
        ),
        "--nats-user with $NATS_PASSWORD",
    );

    // end to end: the publisher by flags, the worker from the environment
    let wav = dir.path().join("rec.wav");
    write_wav(&wav, 30_000); // 232 frames (the last one padded), 15 blocks
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

    // a local run publishing its rows, the secret in the address: not in stderr nor --meta
    let local_meta = dir.path().join("local-meta.json");
    let out = fftd_env(&[])
        .arg("--file")
        .arg(&wav)
        .args(["--output", &with(USER, PASSWORD, "spectra.local")])
        .args(FRAMING)
        .args(["--stats", "--meta"])
        .arg(&local_meta)
        .output()
        .expect("local run");
    assert_ok(&out, "local run to NATS");
    assert!(!stderr_text(&out).contains(PASSWORD));
    let meta = std::fs::read_to_string(&local_meta).expect("--meta written");
    assert!(!meta.contains(PASSWORD) && !meta.contains(USER), "{meta}");
    assert!(meta.contains("nats://***@127.0.0.1"), "{meta}");
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
    // a token given by flag or in the address is never overridden by the environment's
    let other = [("NATS_TOKEN", "tok-Wr0ng-1"), ("NATS_USER", USER)];
    assert_ok(
        &setup_with(&in_address(TOKEN), &[], &other),
        "the address's token beside $NATS_TOKEN",
    );
    assert_ok(
        &setup_with(&server.url(""), &["--nats-token", TOKEN], &other),
        "--nats-token beside $NATS_TOKEN",
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

/// `fftd fleet setup`, `fftd publish` and one worker (`--idle-exit`, `--meta`) with `flags`, all
/// on the server at `url(path)`; the three runs' stderr, and the worker's `--meta`.
fn end_to_end(dir: &Path, url: impl Fn(&str) -> String, flags: &[&str]) -> (Vec<String>, String) {
    let setup = setup_with(&url(""), flags, &[]);
    assert_ok(&setup, "setup");
    let wav = dir.join("rec.wav");
    write_wav(&wav, 30_000); // 232 frames (the last one padded), 15 blocks
    let publish = fftd_env(&[])
        .args([
            "publish",
            "--to",
            &url("frames.site1"),
            "--source-id",
            "rec",
        ])
        .args(flags)
        .arg("--file")
        .arg(&wav)
        .args(FRAMING)
        .args(["--block-frames", "16"])
        .output()
        .expect("publisher runs");
    assert_ok(&publish, "publish");
    let meta = dir.join("meta.json");
    let worker = fftd_env(&[])
        .args(["--file", &url("FRAMES/workers")])
        .args(["--output", &url("spectra.site1")])
        .args(flags)
        .args(FRAMING)
        .args(["--device", "cpu", "--idle-exit", "2", "--stats", "--meta"])
        .arg(&meta)
        .output()
        .expect("worker runs");
    assert_ok(&worker, "worker");
    let stderr = [&setup, &publish, &worker].map(stderr_text).to_vec();
    let meta = std::fs::read_to_string(&meta).expect("--meta written");
    (stderr, meta)
}

/// Base64url without padding, as JWTs are encoded.
fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A JWT of nats-io/jwt v2's format: header `{"typ":"JWT","alg":"ed25519-nkey"}`, the claims, and
/// the ed25519 signature by `issuer` of "header.claims". (nsc makes `jti` a hash of the claims;
/// nats-server does not check it.)
fn sign_jwt(issuer: &nkeys::KeyPair, subject: &str, name: &str, nats: serde_json::Value) -> String {
    let iat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let claims = serde_json::json!({
        "jti": format!("fftd-test-{name}-{subject}"),
        "iat": iat,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let header = b64(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let signed = format!("{header}.{}", b64(claims.to_string().as_bytes()));
    let signature = issuer
        .sign(signed.as_bytes())
        .expect("an nkey with its seed signs");
    format!("{signed}.{}", b64(&signature))
}

/// The account claims (`nats`) of an account: no limits on connections, subscriptions, data,
/// imports and exports; with `jetstream`, unlimited memory and file storage, streams and
/// consumers (a JetStream limit other than 0 is what enables JetStream for an account).
fn account_claims(jetstream: bool) -> serde_json::Value {
    let js = if jetstream { -1 } else { 0 };
    serde_json::json!({
        "limits": {
            "subs": -1, "data": -1, "payload": -1,
            "imports": -1, "exports": -1, "wildcards": true, "conn": -1, "leaf": -1,
            "mem_storage": js, "disk_storage": js, "streams": js, "consumer": js,
        },
        "default_permissions": { "pub": {}, "sub": {} },
        "type": "account",
        "version": 2,
    })
}

/// A user JWT of `account` for `user`, no limits, and its .creds file text carrying `seed`.
fn user_creds(account: &nkeys::KeyPair, user: &nkeys::KeyPair, seed: &str) -> (String, String) {
    let claims = serde_json::json!({
        "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
        "type": "user", "version": 2,
    });
    let jwt = sign_jwt(account, &user.public_key(), "fleet-user", claims);
    let creds = format!(
        "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\n\
         -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
         *************************************************************\n"
    );
    (jwt, creds)
}

/// What `operator_mode` made.
struct Operator {
    /// The server's arguments (`-c CONFIG`).
    args: Vec<OsString>,
    /// The account's key pair, to sign more users.
    account: nkeys::KeyPair,
    /// The user's JWT, nkey seed, and .creds file text.
    jwt: String,
    seed: String,
    creds: String,
}

/// A server in operator (JWT) mode, configured as `nsc generate config --mem-resolver` would:
/// an operator, a system account, an account with JetStream and one user of it, the account JWTs
/// preloaded into a MEMORY resolver; the operator JWT and the config file are written to `dir`.
fn operator_mode(dir: &Path) -> Operator {
    let operator = nkeys::KeyPair::new_operator();
    let system = nkeys::KeyPair::new_account();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    let operator_jwt = sign_jwt(
        &operator,
        &operator.public_key(),
        "fftd-test-operator",
        serde_json::json!({
            "system_account": system.public_key(),
            "type": "operator",
            "version": 2,
        }),
    );
    let system_jwt = sign_jwt(
        &operator,
        &system.public_key(),
        "SYS",
        account_claims(false),
    );
    let account_jwt = sign_jwt(
        &operator,
        &account.public_key(),
        "FLEET",
        account_claims(true),
    );
    let seed = user.seed().expect("a new key has its seed");
    let (jwt, creds) = user_creds(&account, &user, &seed);
    let operator_file = dir.join("operator.jwt");
    std::fs::write(&operator_file, &operator_jwt).expect("operator JWT written");
    // JetStream and its store directory come from NatsServer's `-js -sd` (the file may not
    // name the store directory a second time)
    let config = format!(
        "operator: \"{}\"\n\
         system_account: {}\n\
         resolver: MEMORY\n\
         resolver_preload: {{\n  {}: \"{system_jwt}\"\n  {}: \"{account_jwt}\"\n}}\n",
        operator_file.display(),
        system.public_key(),
        system.public_key(),
        account.public_key(),
    );
    let config_file = dir.join("operator.conf");
    std::fs::write(&config_file, config).expect("server config written");
    Operator {
        args: vec!["-c".into(), config_file.into()],
        account,
        jwt,
        seed,
        creds,
    }
}

#[test]
fn a_creds_file_against_a_server_in_operator_mode() {
    if !have_server() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let op = operator_mode(dir.path());
    let creds = dir.path().join("fleet-user.creds");
    std::fs::write(&creds, &op.creds).expect("creds written");
    let creds = creds.to_str().expect("utf-8 path").to_string();
    let server = NatsServer::start_with(dir.path(), &op.args, ClientAuth::Creds(op.creds.clone()));

    let port = server.port;
    let url = |path: &str| format!("nats://127.0.0.1:{port}/{path}");
    let (stderr, meta) = end_to_end(dir.path(), url, &["--nats-creds", &creds]);
    for text in stderr.iter().chain([&meta]) {
        assert!(!text.contains(&op.seed), "seed shown: {text}");
        assert!(!text.contains(&op.jwt), "JWT shown: {text}");
    }
    assert_equals_local(&server, &dir.path().join("rec.wav"));

    // no credentials, and a valid user JWT with another user's seed: refused by the server
    setup_refused(&url(""), &[], &[], &op.seed);
    let other_seed = nkeys::KeyPair::new_user()
        .seed()
        .expect("a new key has its seed");
    let (_, mismatched) = user_creds(&op.account, &nkeys::KeyPair::new_user(), &other_seed);
    let wrong = dir.path().join("wrong-seed.creds");
    std::fs::write(&wrong, mismatched).expect("creds written");
    let wrong = wrong.to_str().expect("utf-8 path");
    let started = Instant::now();
    let out = setup_with(
        &url(""),
        &["--nats-creds", wrong, "--connect-timeout", "2"],
        &[],
    );
    assert_refused(
        &out,
        started,
        &["cannot connect", "authorization violation"],
        &other_seed,
    );
    assert!(!stderr_text(&out).contains(&op.seed));
    let log = std::fs::read_to_string(&server.log).expect("server log");
    assert_eq!(log.matches("authentication error").count(), 2, "{log}");
}

#[test]
fn an_end_to_end_run_over_tls() {
    if !have_server() || !program_runs("openssl", &["version"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    make_certificates(dir.path());
    let file = |name: &str| {
        dir.path()
            .join(name)
            .to_str()
            .expect("utf-8 path")
            .to_string()
    };
    let ca = file("ca.pem");
    // a server that takes TLS connections only
    let server = NatsServer::start_with(
        dir.path(),
        &os(&[
            "--tls",
            "--tlscert",
            &file("server.pem"),
            "--tlskey",
            &file("server-key.pem"),
        ]),
        ClientAuth::TlsCa(ca.clone().into()),
    );
    let port = server.port;
    let url = |path: &str| format!("tls://127.0.0.1:{port}/{path}");
    let (_, meta) = end_to_end(dir.path(), url, &["--nats-ca", &ca]);
    assert!(meta.contains("tls://127.0.0.1"), "{meta}");
    assert_equals_local(&server, &dir.path().join("rec.wav"));
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
        // the file is named once ("--nats-creds FILE: why")
        assert_eq!(stderr_text(&out).matches(missing).count(), 1);
    }

    // files that are no .creds file: garbage, a seed that is no nkey, a directory
    let dir = tempfile::tempdir().expect("tempdir");
    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().expect("a new key has its seed");
    let (_, creds) = user_creds(&nkeys::KeyPair::new_account(), &user, &seed);
    // the seed's last letter changed: no longer an nkey seed (encoding or checksum)
    let last = if seed.ends_with('A') { "B" } else { "A" };
    let broken = seed[..seed.len() - 1].to_string() + last;
    let files = [
        ("garbage.creds", "not a credentials file\n".to_string()),
        ("broken-seed.creds", creds.replace(&seed, &broken)),
    ];
    for (name, text) in &files {
        std::fs::write(dir.path().join(name), text).expect("file written");
    }
    let invalid = "not a valid .creds file";
    for (name, why) in [
        ("garbage.creds", invalid),
        ("broken-seed.creds", invalid),
        ("", "directory"),
    ] {
        let path = dir.path().join(name);
        let path = path.to_str().expect("utf-8 path");
        let out = setup_with("nats://127.0.0.1:1/", &["--nats-creds", path], &[]);
        assert_clean_error(&out, 2, &["--nats-creds", path, why]);
        let err = stderr_text(&out);
        assert_eq!(err.matches(path).count(), 1, "{err}");
        assert!(
            !err.contains(&broken) && !err.contains(&seed),
            "seed shown: {err}"
        );
    }

    // PEM files with no certificate or key in them, refused before connecting (a run's
    // `--output nats://` and `fftd publish` check them as setup does)
    std::fs::write(dir.path().join("garbage.pem"), "not a certificate\n").expect("written");
    let garbage = dir.path().join("garbage.pem");
    let garbage = garbage.to_str().expect("utf-8 path");
    let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    std::fs::write(dir.path().join("cert.pem"), cert).expect("written");
    let cert = dir.path().join("cert.pem");
    let cert = cert.to_str().expect("utf-8 path");
    let samples = dir.path().join("in.txt");
    std::fs::write(&samples, "1\n2\n3\n4\n").expect("written");
    let samples = samples.to_str().expect("utf-8 path");
    // an OpenSSL traditional key with a passphrase (as `openssl genrsa -aes128` writes)
    let locked = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
                  DEK-Info: AES-128-CBC,0123456789ABCDEF0123456789ABCDEF\n\nMIIB\n\
                  -----END RSA PRIVATE KEY-----\n";
    std::fs::write(dir.path().join("locked.pem"), locked).expect("written");
    let locked = dir.path().join("locked.pem");
    let locked = locked.to_str().expect("utf-8 path");
    let with_key = |key| {
        let setup = ["fleet", "setup", "--server", "tls://127.0.0.1:1/"];
        [&setup[..], &["--nats-cert", cert, "--nats-key", key]].concat()
    };
    let runs: [(Vec<&str>, &[&str]); 5] = [
        (
            vec![
                "fleet",
                "setup",
                "--server",
                "tls://127.0.0.1:1/",
                "--nats-ca",
                garbage,
            ],
            &["--nats-ca", garbage, "no PEM certificate"],
        ),
        (
            with_key(garbage),
            &["--nats-key", garbage, "no PEM private key"],
        ),
        (
            with_key(locked),
            &[
                "--nats-key",
                locked,
                "an encrypted private key",
                "decrypted",
            ],
        ),
        (
            vec![
                "--file",
                samples,
                "--output",
                "nats://127.0.0.1:1/x",
                "--nats-ca",
                garbage,
            ],
            &["--nats-ca", "no PEM certificate"],
        ),
        (
            vec![
                "publish",
                "--file",
                samples,
                "--frame",
                "2",
                "--to",
                "nats://127.0.0.1:1/x",
                "--nats-ca",
                garbage,
            ],
            &["--nats-ca", "no PEM certificate"],
        ),
    ];
    for (args, needles) in runs {
        let out = fftd().args(&args).output().expect("fftd runs");
        assert_clean_error(&out, 2, needles);
    }

    // credentials given two ways: one would be dropped unused (no server needed)
    let twice: [(&str, &[&str], &[&str]); 4] = [
        (
            "nats://127.0.0.1:1/",
            &[
                "--nats-token",
                "t",
                "--nats-user",
                "u",
                "--nats-password",
                "p",
            ],
            &["--nats-token and --nats-user/--nats-password", "one way"],
        ),
        (
            "nats://u:p@127.0.0.1:1/",
            &["--nats-user", "v"],
            &["--nats-user/--nats-password and the address's USER:PASSWORD@"],
        ),
        (
            "nats://tok@127.0.0.1:1/",
            &["--nats-password", "zz"],
            &["the address's TOKEN@"],
        ),
        (
            "nats://127.0.0.1:1/",
            &["--nats-password", "secretpw"],
            &["--nats-password is the password of --nats-user"],
        ),
    ];
    for (server, flags, needles) in twice {
        let out = setup_with(server, flags, &[]);
        assert_clean_error(&out, 2, needles);
        assert!(
            !stderr_text(&out).contains("secretpw"),
            "{}",
            stderr_text(&out)
        );
    }
}

/// A client certificate with another certificate's key is refused before connecting, naming
/// both files (async-nats would fail the handshake in words that name neither).
#[test]
fn a_client_key_that_is_not_the_certificates_is_refused() {
    if !program_runs("openssl", &["version"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, _) = crate::serve_safe::certificate(dir.path());
    let other = dir.path().join("other");
    std::fs::create_dir(&other).expect("mkdir");
    let (_, other_key) = crate::serve_safe::certificate(&other);
    let flags = ["--nats-cert", &cert, "--nats-key", &other_key];
    let out = setup_with("tls://127.0.0.1:1/", &flags, &[]);
    let not_its = format!("--nats-key {other_key}: not the key of --nats-cert {cert}");
    assert_clean_error(&out, 2, &[&not_its]);
}
