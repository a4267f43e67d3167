//! `--serve` and its `--serve-*` flags checked into the live view's `ServeSettings`: the
//! address, who may connect (Host and Origin allow-lists, a bearer token from a flag,
//! `FFTD_SERVE_TOKEN` or a file), TLS files and the connection cap.

use super::options::Options;
use crate::error::{FftdError, Result};
use crate::serve::options::{ServeSettings, Token, DEFAULT_MAX_CONNECTIONS, MAX_CONNECTIONS};

/// `--serve` and the `--serve-*` options; `None` without `--serve` (then any `--serve-*` is a
/// usage error).
pub(crate) fn resolve(o: &Options) -> Result<Option<ServeSettings>> {
    let usage = |m: String| Err(FftdError::Usage(m));
    // a value out of range is named as such, with --serve or without
    let max_connections = match o.serve_max_connections {
        None => DEFAULT_MAX_CONNECTIONS,
        Some(n) if (1..=MAX_CONNECTIONS as i64).contains(&n) => n as usize,
        Some(n) => {
            return usage(format!(
                "--serve-max-connections {n}: must be a whole number of connections from 1 to {MAX_CONNECTIONS}"
            ))
        }
    };
    let Some(addr) = o.serve.as_deref() else {
        let given = [
            (!o.serve_allow_origin.is_empty(), "--serve-allow-origin"),
            (!o.serve_allow_host.is_empty(), "--serve-allow-host"),
            (o.serve_max_connections.is_some(), "--serve-max-connections"),
            (o.serve_token.is_some(), "--serve-token"),
            (o.serve_token_file.is_some(), "--serve-token-file"),
            (o.serve_tls_cert.is_some(), "--serve-tls-cert"),
            (o.serve_tls_key.is_some(), "--serve-tls-key"),
        ];
        return match given.iter().find(|(g, _)| *g) {
            Some((_, flag)) => usage(format!("{flag} needs --serve ADDR")),
            None => Ok(None),
        };
    };
    let addr = crate::serve::address::parse(addr).map_err(FftdError::Usage)?;
    let allow_origins = o
        .serve_allow_origin
        .iter()
        .map(|v| origin(v))
        .collect::<Result<_>>()?;
    let allow_hosts = o
        .serve_allow_host
        .iter()
        .map(|v| host(v))
        .collect::<Result<_>>()?;
    let tls = match (&o.serve_tls_cert, &o.serve_tls_key) {
        (Some(c), Some(k)) => Some((c.clone(), k.clone())),
        (None, None) => None,
        (Some(_), None) => return usage("--serve-tls-cert needs --serve-tls-key".into()),
        (None, Some(_)) => return usage("--serve-tls-key needs --serve-tls-cert".into()),
    };
    Ok(Some(ServeSettings {
        addr,
        allow_origins,
        allow_hosts,
        max_connections,
        token: token(o)?,
        tls,
    }))
}

/// The token of `--serve-token`, else `--serve-token-file`'s first line, else `FFTD_SERVE_TOKEN`.
fn token(o: &Options) -> Result<Option<Token>> {
    let (text, flag) = match (&o.serve_token, &o.serve_token_file) {
        (Some(_), Some(_)) => {
            return Err(FftdError::Usage(
                "use either --serve-token or --serve-token-file, not both".into(),
            ))
        }
        (Some(t), None) => (t.clone(), "--serve-token".to_string()),
        (None, Some(path)) => {
            let text =
                crate::types::small_file::read_text_at_most(path, 64 * 1024).map_err(|e| {
                    FftdError::Usage(format!(
                        "--serve-token-file {}: {e}",
                        crate::types::shown_path(path)
                    ))
                })?;
            let line = text.lines().next().unwrap_or("").trim().to_string();
            (
                line,
                format!("--serve-token-file {}", crate::types::shown_path(path)),
            )
        }
        (None, None) => match crate::knobs::serve_token() {
            Some(t) => (t, crate::knobs::SERVE_TOKEN.to_string()),
            None => return Ok(None),
        },
    };
    // RFC 6750's b64token: what an Authorization: Bearer header can carry as it is
    let fits = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b);
    if text.is_empty() || !text.bytes().all(fits) {
        return Err(FftdError::Usage(format!(
            "{flag}: the token must be letters, digits and -._~+/= only, at least one (e.g. from `openssl rand -hex 32`)"
        )));
    }
    Ok(Some(Token(text)))
}

/// `http[s]://HOST[:PORT]`, or `*`.
fn origin(text: &str) -> Result<String> {
    let v = text.trim().trim_end_matches('/').to_ascii_lowercase();
    let rest = v
        .strip_prefix("http://")
        .or_else(|| v.strip_prefix("https://"));
    match rest {
        _ if v == "*" => Ok(v),
        Some(h) if !h.is_empty() && !h.contains(['/', '?', '#', '@', ' ']) => Ok(v),
        _ => Err(FftdError::Usage(format!(
            "--serve-allow-origin {}: expected SCHEME://HOST[:PORT] as a browser sends it (e.g. https://example.org:8443), or *",
            shown(text)
        ))),
    }
}

/// `HOST` or `HOST:PORT` as a Host header carries it, or `*`.
fn host(text: &str) -> Result<String> {
    let v = text.trim().to_ascii_lowercase();
    let fits = |c: char| c.is_ascii_alphanumeric() || "-.:[]_".contains(c);
    if v == "*" || (!v.is_empty() && v.chars().all(fits)) {
        Ok(v)
    } else {
        Err(FftdError::Usage(format!(
            "--serve-allow-host {}: expected a host name or address as the Host header carries it (e.g. spectra.example.org), or *",
            shown(text)
        )))
    }
}

/// A flag's value in a message, cut at 60 characters.
fn shown(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}
