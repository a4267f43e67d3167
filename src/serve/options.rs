//! What the live view is given (`ServeSettings`): the address, who may connect (Host and Origin
//! allow-lists, a bearer token), TLS files and the connection cap; `app::serve_options` checks
//! the `--serve-*` flags into it. The timeouts come from the environment (`Timeouts::from_env`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Connections at once by default (`--serve-max-connections`).
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// The largest `--serve-max-connections`.
pub(crate) const MAX_CONNECTIONS: usize = 10_000;

#[derive(Clone, Debug, PartialEq)]
pub struct ServeSettings {
    pub addr: SocketAddr,
    /// `--serve-allow-origin`, lower case without a trailing `/`; `*` allows every origin.
    pub allow_origins: Vec<String>,
    /// `--serve-allow-host`, lower case; `*` allows every Host.
    pub allow_hosts: Vec<String>,
    pub max_connections: usize,
    pub token: Option<Token>,
    /// `--serve-tls-cert`, `--serve-tls-key` (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// The bearer token; never printed (Debug shows only that there is one).
#[derive(Clone, PartialEq)]
pub struct Token(pub String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// How long a connection may take over a request head, and stay idle between requests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// From a connection's accept (or the first byte of a later request) to its whole head.
    pub header: Duration,
    /// A kept-alive connection with no request in flight and no byte of the next one.
    pub idle: Duration,
}

impl Timeouts {
    /// 10 s and 60 s, or `FFTD_SERVE_HEADER_TIMEOUT` / `FFTD_SERVE_IDLE_TIMEOUT` (seconds).
    pub(crate) fn from_env() -> Timeouts {
        Timeouts {
            header: crate::knobs::serve_header_timeout().unwrap_or(Duration::from_secs(10)),
            idle: crate::knobs::serve_idle_timeout().unwrap_or(Duration::from_secs(60)),
        }
    }
}
