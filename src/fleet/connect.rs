//! Connecting to NATS: credentials and TLS as NATS clients take them, a bounded connect, and the
//! tokio runtime the client lives on (the pipeline's stages are plain threads; they hand work to
//! this runtime with `block_on`/`spawn`).
//!
//! Credentials, in this order: `--nats-creds FILE` (a `.creds` file: JWT + nkey seed),
//! `--nats-token` / `$NATS_TOKEN`, `--nats-user` + `--nats-password` / `$NATS_USER` +
//! `$NATS_PASSWORD`, else what the address carries (`nats://USER:PASS@` or `nats://TOKEN@`).
//! TLS: `tls://` or `--nats-tls` require it; `--nats-ca` adds a root certificate, `--nats-cert`
//! with `--nats-key` a client certificate. No secret is ever logged: addresses are shown
//! redacted (`url::NatsUrl`'s Display) and errors name files, not their contents.

use super::outage::Outages;
use crate::error::{FftdError, Result};
use crate::types::nats_url::{NatsUrl, UrlAuth};
use crate::types::pem;
use async_nats::{Client, ConnectOptions, Event};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long a first connection may take before fftd gives up [default].
pub(crate) const CONNECT_TIMEOUT_S: f64 = 5.0;

/// How workers, `fftd publish` and `fftd fleet setup` connect: the `--nats-*` flags
/// (`app::fleet_args::NatsFlags`) as plain values.
#[derive(Clone, Default)]
pub struct NatsArgs {
    /// `--nats-creds`: a credentials file (.creds: JWT and nkey seed).
    pub nats_creds: Option<PathBuf>,
    /// `--nats-token` [default: `$NATS_TOKEN`, or TOKEN@ in the address].
    pub nats_token: Option<String>,
    /// `--nats-user` [default: `$NATS_USER`, or USER:PASS@ in the address].
    pub nats_user: Option<String>,
    /// `--nats-password` for the user [default: `$NATS_PASSWORD`].
    pub nats_password: Option<String>,
    /// `--nats-tls`: require TLS (as a tls:// address does).
    pub nats_tls: bool,
    /// `--nats-ca`: a root certificate (PEM) to trust.
    pub nats_ca: Option<PathBuf>,
    /// `--nats-cert`: a client certificate (PEM), with `nats_key`.
    pub nats_cert: Option<PathBuf>,
    /// `--nats-key`: the private key (PEM) of `nats_cert`.
    pub nats_key: Option<PathBuf>,
    /// `--connect-timeout`: seconds the first connection may take [default: 5].
    pub connect_timeout: Option<f64>,
}

impl NatsArgs {
    /// The files these flags name, each with its flag: a run's outputs must not overwrite them
    /// (`OutputSpec::also_read`).
    pub fn files_read(&self) -> Vec<(&'static str, PathBuf)> {
        let named = [
            ("--nats-creds", &self.nats_creds),
            ("--nats-ca", &self.nats_ca),
            ("--nats-cert", &self.nats_cert),
            ("--nats-key", &self.nats_key),
        ];
        (named.into_iter())
            .filter_map(|(flag, path)| Some((flag, path.clone()?)))
            .collect()
    }
}

/// The runtime the NATS client runs on: two threads of its own.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    runtime_with(2)
}

/// A runtime of `threads` threads (at least 2, at most the cores), for clients of several
/// connections (`fftd publish`: one per work shard), each writing its socket on its own.
pub(crate) fn runtime_with(threads: usize) -> Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.min(cores).max(2))
        .thread_name("fftd-nats")
        .enable_all()
        .build()
        .map_err(|e| FftdError::Runtime(format!("cannot start the NATS client's threads: {e}")))
}

/// Secrets shown as `***`: settings that hold these flags may be printed with `{:?}`.
impl std::fmt::Debug for NatsArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| "***");
        f.debug_struct("NatsArgs")
            .field("nats_creds", &self.nats_creds)
            .field("nats_token", &hidden(&self.nats_token))
            .field("nats_user", &self.nats_user)
            .field("nats_password", &hidden(&self.nats_password))
            .field("nats_tls", &self.nats_tls)
            .field("nats_ca", &self.nats_ca)
            .field("nats_cert", &self.nats_cert)
            .field("nats_key", &self.nats_key)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl NatsArgs {
    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.connect_timeout.unwrap_or(CONNECT_TIMEOUT_S))
    }

    /// Client options for `url`: credentials, TLS, timeouts, and connection events in the log
    /// (and in `outages`: a connection lost opens an outage, one made again ends it).
    fn options(
        &self,
        url: &NatsUrl,
        name: &str,
        outages: Option<Arc<Outages>>,
        loud: bool,
    ) -> Result<ConnectOptions> {
        self.check_one_way(url)?;
        let mut opts = match &self.nats_creds {
            Some(path) => credentials(path)?,
            None => ConnectOptions::new(),
        };
        if self.nats_creds.is_none() {
            opts = self.secret(opts, url);
        }
        if url.tls || self.nats_tls {
            opts = opts.require_tls(true);
        }
        if let Some(ca) = &self.nats_ca {
            pem::certificates("--nats-ca", ca).map_err(FftdError::Usage)?;
            opts = opts.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&self.nats_cert, &self.nats_key) {
            // (read and paired here, before connecting, where a TLS handshake's failure would
            // not name the file; async-nats reads them again with the same parser)
            pem::key_pair(("--nats-cert", cert), ("--nats-key", key)).map_err(FftdError::Usage)?;
            opts = opts.add_client_certificate(cert.clone(), key.clone());
        }
        // the servers of `nats://a,b/...` are tried in the order given (the client would shuffle
        // them): the first is the one a user means to use while it is up
        Ok(opts
            .name(name)
            .retain_servers_order()
            .connection_timeout(self.timeout())
            .request_timeout(Some(Duration::from_secs(10)))
            .event_callback(move |event| {
                let outages = outages.clone();
                async move {
                    match (&event, &outages) {
                        (Event::Disconnected, Some(o)) => o.lost(),
                        (Event::Connected, Some(o)) => o.reconnected(),
                        _ => {}
                    }
                    log_event(event, loud)
                }
            }))
    }

    /// `opts` with the token or user and password given by flag, else in `url`, else in the
    /// environment (`$NATS_TOKEN`, else `$NATS_USER` and `$NATS_PASSWORD`): the environment
    /// fills in only what is not given (`check_one_way` has refused two ways given).
    fn secret(&self, opts: ConnectOptions, url: &NatsUrl) -> ConnectOptions {
        let password = || {
            (self.nats_password.clone())
                .or_else(|| env("NATS_PASSWORD"))
                .unwrap_or_default()
        };
        if let Some(token) = &self.nats_token {
            return opts.token(token.clone());
        }
        if let Some(user) = self.nats_user.clone() {
            return opts.user_and_password(user, password());
        }
        match &url.auth {
            UrlAuth::UserPassword { user, password } => {
                return opts.user_and_password(user.clone(), password.clone())
            }
            UrlAuth::Token(token) => return opts.token(token.clone()),
            UrlAuth::None => {}
        }
        match (env("NATS_TOKEN"), env("NATS_USER")) {
            (Some(token), _) => opts.token(token),
            (None, Some(user)) => opts.user_and_password(user, password()),
            (None, None) => opts,
        }
    }

    /// The credentials are given one way: a .creds file, a token, or a user and password, by
    /// flag or in `url` (`USER:PASS@`, `TOKEN@`); any two together would leave one unused (the
    /// environment's `$NATS_*` only fill in what is not given). A usage error naming both.
    fn check_one_way(&self, url: &NatsUrl) -> Result<()> {
        let in_url = match &url.auth {
            UrlAuth::None => None,
            UrlAuth::UserPassword { .. } => Some("the address's USER:PASSWORD@"),
            UrlAuth::Token(_) => Some("the address's TOKEN@"),
        };
        let ways = [
            (self.nats_creds.is_some(), "--nats-creds"),
            (self.nats_token.is_some(), "--nats-token"),
            (
                self.nats_user.is_some() || self.nats_password.is_some(),
                "--nats-user/--nats-password",
            ),
            (in_url.is_some(), in_url.unwrap_or_default()),
        ];
        let given: Vec<&str> = ways.iter().filter(|w| w.0).map(|w| w.1).collect();
        if let [first, second, ..] = given[..] {
            return Err(FftdError::Usage(format!(
                "{first} and {second}: give the NATS credentials one way (a .creds file, a token, or a user and password)"
            )));
        }
        if self.nats_password.is_some() && self.nats_user.is_none() && env("NATS_USER").is_none() {
            return Err(FftdError::Usage(
                "--nats-password is the password of --nats-user: give the user too".into(),
            ));
        }
        Ok(())
    }

    /// Connects to `url`'s server within the connect timeout: exit 1 with one line when it
    /// cannot be reached (no retry of the first connection); reconnects on its own later.
    pub async fn connect(&self, url: &NatsUrl, name: &str) -> Result<Client> {
        self.connect_watched(url, name, None).await
    }

    /// As `connect`, with the connection's losses and returns in `outages` (`--retry`).
    pub(crate) async fn connect_watched(
        &self,
        url: &NatsUrl,
        name: &str,
        outages: Option<Arc<Outages>>,
    ) -> Result<Client> {
        self.connect_as(url, name, outages, true).await
    }

    /// As `connect_watched`, for a process's further connections to the same server (`fftd
    /// publish`'s, one per work shard): a connection lost is said once, by the first one.
    pub(crate) async fn connect_another(
        &self,
        url: &NatsUrl,
        name: &str,
        outages: Arc<Outages>,
    ) -> Result<Client> {
        self.connect_as(url, name, Some(outages), false).await
    }

    async fn connect_as(
        &self,
        url: &NatsUrl,
        name: &str,
        outages: Option<Arc<Outages>>,
        loud: bool,
    ) -> Result<Client> {
        let opts = self.options(url, name, outages, loud)?;
        let servers = url.servers();
        // every server given may be tried once within the timeout
        let limit = self.timeout() * servers.len() as u32 + Duration::from_secs(1);
        match tokio::time::timeout(limit, opts.connect(servers)).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(FftdError::Runtime(format!(
                "cannot connect to NATS at {url}: {}",
                one_line(&e.to_string())
            ))),
            Err(_) => Err(FftdError::Runtime(format!(
                "cannot connect to NATS at {url}: no answer within {} s",
                limit.as_secs()
            ))),
        }
    }
}

/// Client options carrying the user JWT and nkey seed of the .creds file at `path`; a file that
/// cannot be read or holds no JWT and seed is a usage error of one line naming the file (never
/// its contents: the seed is the secret).
fn credentials(path: &std::path::Path) -> Result<ConnectOptions> {
    let usage = |why: String| {
        FftdError::Usage(format!(
            "--nats-creds {}: {why}",
            crate::types::shown_path(path)
        ))
    };
    // read here rather than by async-nats, whose error names the file a second time
    let text = crate::types::small_file::read_text_at_most(path, 1 << 20)
        .map_err(|e| usage(e.to_string()))?;
    ConnectOptions::with_credentials(&text).map_err(|e| {
        usage(format!(
            "not a valid .creds file: {}",
            one_line(&e.to_string())
        ))
    })
}

/// A connection's event in the log; `loud`: a lost connection is a warning (else said by the
/// process's first connection already).
fn log_event(event: Event, loud: bool) {
    match event {
        Event::Disconnected if loud => tracing::warn!("NATS connection lost; reconnecting"),
        Event::Disconnected => tracing::debug!("NATS connection lost; reconnecting"),
        Event::Connected => tracing::debug!("NATS connection established"),
        Event::ServerError(e) => tracing::warn!("NATS server error: {e}"),
        // repeated on every reconnect attempt: the loss itself was said once above
        Event::ClientError(e) => tracing::debug!("NATS client error: {e}"),
        other => tracing::debug!("NATS event: {other}"),
    }
}

/// An error's text on one line.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
