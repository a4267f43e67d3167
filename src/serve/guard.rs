//! Who may use the live view, checked on every request before any endpoint (an axum
//! middleware), and the security headers on every response.
//!
//! 1. `Host` (against DNS rebinding): an IP address (loopback, the bound one, or any when bound
//!    to 0.0.0.0 / ::), `localhost`, or a name given with `--serve-allow-host`; else 403.
//! 2. `Origin` on WebSocket upgrades: absent (not a browser), the page's own origin (scheme and
//!    host:port of the Host the request came to), or one given with `--serve-allow-origin`; else
//!    403.
//! 3. With a token: `Authorization: Bearer TOKEN`, the cookie that `/?token=TOKEN` sets, or
//!    `?token=TOKEN` on any other path; else 401. Compared in constant time.

use super::options::{ServeSettings, Token};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The page's Content-Security-Policy: its own script, styles and socket, nothing inline, no
/// frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub(super) struct Guard {
    bound: SocketAddr,
    tls: bool,
    any_host: bool,
    hosts: Vec<String>,
    any_origin: bool,
    origins: Vec<String>,
    token: Option<Token>,
    cookie: String,
}

impl Guard {
    pub(super) fn new(settings: &ServeSettings, bound: SocketAddr) -> Guard {
        Guard {
            bound,
            tls: settings.tls.is_some(),
            any_host: settings.allow_hosts.iter().any(|h| h == "*"),
            hosts: settings.allow_hosts.clone(),
            any_origin: settings.allow_origins.iter().any(|o| o == "*"),
            origins: settings.allow_origins.clone(),
            token: settings.token.clone(),
            // cookies are per host, not per port: one per port keeps two runs apart
            cookie: format!("fftd-token-{}", bound.port()),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let (name, _) = split_port(&host);
        if self.any_host || self.hosts.iter().any(|h| *h == host || h == name) {
            return true;
        }
        if name.trim_end_matches('.') == "localhost" {
            return true;
        }
        let ip = name.trim_start_matches('[').trim_end_matches(']');
        match ip.parse::<IpAddr>() {
            // a page from an IP address is of that origin: no DNS to rebind
            Ok(ip) => ip.is_loopback() || ip == self.bound.ip() || self.bound.ip().is_unspecified(),
            Err(_) => false,
        }
    }

    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.any_origin || self.origins.contains(&origin) {
            return true;
        }
        let (scheme, default_port) = if self.tls {
            ("https://", "443")
        } else {
            ("http://", "80")
        };
        let with_port = |h: &str| match split_port(h) {
            (name, Some(port)) => format!("{name}:{port}"),
            (name, None) => format!("{name}:{default_port}"),
        };
        match origin.strip_prefix(scheme) {
            Some(o) => with_port(o) == with_port(&host.to_ascii_lowercase()),
            None => false,
        }
    }

    /// The token given with the request: a Bearer header, the cookie, or `?token=`.
    fn offered<'a>(&self, headers: &'a HeaderMap, query: Option<&'a str>) -> Vec<&'a str> {
        let mut offered = Vec::new();
        for value in headers.get_all(header::AUTHORIZATION) {
            if let Some(t) = value.to_str().ok().and_then(bearer) {
                offered.push(t);
            }
        }
        for value in headers.get_all(header::COOKIE) {
            let pairs = value.to_str().unwrap_or("").split(';');
            offered.extend(pairs.filter_map(|p| {
                let (k, v) = p.trim().split_once('=')?;
                (k == self.cookie).then_some(v)
            }));
        }
        offered.extend(query_token(query));
        offered
    }
}

/// `Authorization: Bearer TOKEN` (the scheme in any case, RFC 7235).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|p| p.strip_prefix("token="))
}

/// `name` and `port` of `host[:port]` / `[v6][:port]`.
fn split_port(host: &str) -> (&str, Option<&str>) {
    let colon = match host.rfind(':') {
        Some(at) if !host[at..].contains(']') => at,
        _ => return (host, None),
    };
    if host.starts_with('[') || !host[..colon].contains(':') {
        (&host[..colon], Some(&host[colon + 1..]))
    } else {
        (host, None) // a bare IPv6 address
    }
}

fn same_token(offered: &str, token: &Token) -> bool {
    offered.as_bytes().ct_eq(token.0.as_bytes()).into()
}

fn refuse(status: StatusCode, why: String) -> Response {
    let mut response = (status, format!("fftd: {why}\n")).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"fftd\""),
        );
    }
    response
}

/// The middleware: checks, then the endpoint, then the headers.
pub(super) async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = match admit(&guard, &request) {
        Some(answer) => answer,
        None => next.run(request).await,
    };
    secure(response.headers_mut(), guard.tls);
    response
}

/// `Some`: the answer instead of the endpoint's (a refusal, or a redirect that sets the token's
/// cookie); `None`: go on.
fn admit(guard: &Guard, request: &Request) -> Option<Response> {
    let headers = request.headers();
    // (one name or origin each: a second could name another server, RFC 9112 section 3.2)
    for (name, shown) in [(header::HOST, "Host"), (header::ORIGIN, "Origin")] {
        if headers.get_all(name).iter().nth(1).is_some() {
            return Some(refuse(
                StatusCode::BAD_REQUEST,
                format!("more than one {shown} header"),
            ));
        }
    }
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return Some(refuse(
            StatusCode::BAD_REQUEST,
            "a Host header is required".into(),
        ));
    };
    if !guard.host_allowed(host) {
        let (name, _) = split_port(host);
        return Some(refuse(
            StatusCode::FORBIDDEN,
            format!("Host {host:.80} is not allowed (start fftd with --serve-allow-host {name:.80} to allow it)"),
        ));
    }
    if headers.contains_key(header::UPGRADE) {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("?");
            if !guard.origin_allowed(origin, host) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    format!("WebSocket from a page of {origin:.80} refused (not this server's origin; see --serve-allow-origin)"),
                ));
            }
        }
    }
    let Some(token) = &guard.token else {
        return None;
    };
    let query = request.uri().query();
    if !guard
        .offered(headers, query)
        .iter()
        .any(|t| same_token(t, token))
    {
        return Some(refuse(
            StatusCode::UNAUTHORIZED,
            "this live view needs its token: open /?token=TOKEN in a browser, or send Authorization: Bearer TOKEN".into(),
        ));
    }
    // the page opened with ?token=: a cookie keeps it, and the address loses it
    match query_token(query) {
        Some(t) if request.uri().path() == "/" && same_token(t, token) => {
            Some(with_cookie(guard, token, query))
        }
        _ => None,
    }
}

fn with_cookie(guard: &Guard, token: &Token, query: Option<&str>) -> Response {
    let rest: Vec<&str> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("token="))
        .collect();
    let location = match rest.is_empty() {
        true => "/".to_string(),
        false => format!("/?{}", rest.join("&")),
    };
    let secure = if guard.tls { "; Secure" } else { "" };
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict{secure}",
        guard.cookie, token.0
    );
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    // (both are made of checked characters: the token's, the query's)
    if let (Ok(location), Ok(cookie)) = (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&cookie),
    ) {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The standard security headers, on every response.
fn secure(headers: &mut HeaderMap, tls: bool) {
    let set = [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if tls {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str], origins: &[&str], bound: &str) -> Guard {
        let settings = ServeSettings {
            addr: bound.parse().unwrap(),
            allow_origins: origins.iter().map(|s| s.to_string()).collect(),
            allow_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            max_connections: 4,
            token: None,
            tls: None,
        };
        Guard::new(&settings, settings.addr)
    }

    #[test]
    fn hosts() {
        let g = guard(&["spectra.example.org"], &[], "127.0.0.1:8080");
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "127.0.0.2",
            "spectra.example.org",
            "spectra.example.org:443",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1:8080",
            "localhost.evil",
        ] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
        let any = guard(&[], &[], "0.0.0.0:80");
        assert!(any.host_allowed("192.168.1.7") && !any.host_allowed("evil.example"));
        assert!(guard(&["*"], &[], "127.0.0.1:1").host_allowed("evil.example"));
    }

    #[test]
    fn origins() {
        let g = guard(&[], &["https://ok.example"], "127.0.0.1:8080");
        assert!(g.origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(g.origin_allowed("http://localhost", "localhost:80"));
        assert!(g.origin_allowed("https://ok.example/", "127.0.0.1:8080"));
        for bad in [
            "http://127.0.0.1:8081",
            "https://127.0.0.1:8080",
            "null",
            "http://evil.example",
        ] {
            assert!(!g.origin_allowed(bad, "127.0.0.1:8080"), "{bad}");
        }
        assert!(guard(&[], &["*"], "127.0.0.1:1").origin_allowed("null", "x"));
    }

    #[test]
    fn ports_split_off() {
        assert_eq!(split_port("a:1"), ("a", Some("1")));
        assert_eq!(split_port("[::1]:9"), ("[::1]", Some("9")));
        assert_eq!(split_port("[::1]"), ("[::1]", None));
        assert_eq!(split_port("::1"), ("::1", None));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(query_token(Some("stream=1&token=x")), Some("x"));
    }
}
