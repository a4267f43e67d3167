//! NATS addresses as fftd takes them: `nats://[USER:PASSWORD@|TOKEN@]HOST[:PORT][,HOST[:PORT]...]/PATH`
//! or `tls://...` (TLS required). Several servers (nodes of one cluster) are tried in turn and
//! the client fails over between them and the nodes the cluster tells it of. PATH is a subject (`--output`, `fftd publish --to`) or
//! `STREAM/CONSUMER` (`--file`). The userinfo is a secret: `Display` never shows it
//! (`nats://***@host:4222/...`), so an address can go in any log line or in `--meta`.

use std::fmt;

/// The default NATS client port.
pub(crate) const DEFAULT_PORT: u16 = 4222;

/// Credentials written into the address itself.
#[derive(Clone, PartialEq, Eq)]
pub enum UrlAuth {
    None,
    UserPassword { user: String, password: String },
    Token(String),
}

/// A parsed NATS address.
#[derive(Clone, PartialEq, Eq)]
pub struct NatsUrl {
    /// `tls://`: the connection must be TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// issue 28: the servers after the first (`nats://a:4222,b:4222/...`).
    pub more: Vec<(String, u16)>,
    pub auth: UrlAuth,
    /// What follows `HOST:PORT/`, undecoded.
    pub path: String,
}

/// Whether `text` is meant as a NATS address (so a bad one is a usage error, not a missing file).
pub(crate) fn is_nats_url(text: &str) -> bool {
    text.starts_with("nats://") || text.starts_with("tls://")
}

impl NatsUrl {
    /// Parses an address; `flag` names the option in errors. The error never repeats the
    /// userinfo.
    pub fn parse(flag: &str, text: &str) -> Result<NatsUrl, String> {
        let (tls, rest) = if let Some(rest) = text.strip_prefix("nats://") {
            (false, rest)
        } else if let Some(rest) = text.strip_prefix("tls://") {
            (true, rest)
        } else {
            return Err(format!(
                "{flag}: expected nats://HOST:PORT/... or tls://HOST:PORT/..."
            ));
        };
        // as in any URL a '/' in a password must be written %2F: the authority ends at the first '/'
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let shown = redact_text(text);
        let auth = match userinfo {
            None => UrlAuth::None,
            Some(u) => match u.split_once(':') {
                Some((user, password)) if !user.is_empty() => UrlAuth::UserPassword {
                    user: percent_decoded(user),
                    password: percent_decoded(password),
                },
                None if !u.is_empty() => UrlAuth::Token(percent_decoded(u)),
                _ => return Err(format!("{flag} {shown}: empty user name before '@'")),
            },
        };
        // no '@' before the first '/' but one after it: a password with an unescaped '/'
        let cut_password = userinfo.is_none() && text.contains('@');
        let mut servers = Vec::new();
        for one in hostport.split(',') {
            servers.push(split_host_port(one).map_err(|what| match cut_password {
                // (a password with an unescaped '/' lands here: never repeat what was read as a port)
                true => {
                    format!("{flag} {shown}: bad host or port (write a '/' in a password as %2F)")
                }
                false => format!("{flag} {shown}: {what}"),
            })?);
        }
        let (host, port) = servers.remove(0);
        Ok(NatsUrl {
            tls,
            host,
            port,
            more: servers,
            auth,
            path: path.to_string(),
        })
    }

    /// The first server's address for the client: `nats://HOST:PORT` or `tls://HOST:PORT`, no
    /// secret.
    pub fn server(&self) -> String {
        self.servers().remove(0)
    }

    /// Every server's address for the client, the first first.
    pub fn servers(&self) -> Vec<String> {
        let scheme = if self.tls { "tls" } else { "nats" };
        std::iter::once((&self.host, self.port))
            .chain(self.more.iter().map(|(h, p)| (h, *p)))
            .map(|(host, port)| format!("{scheme}://{}", host_port(host, port)))
            .collect()
    }

    /// The path as one subject (`a.b.c`): non-empty, no spaces or slashes, no empty token.
    pub fn subject(&self, flag: &str) -> Result<String, String> {
        let s = self.path.as_str();
        let bad = s.is_empty()
            || s.contains(['/', ' ', '\t', '*', '>'])
            || s.split('.').any(str::is_empty);
        if bad {
            return Err(format!(
                "{flag} {self}: expected a subject after the address, as nats://HOST:PORT/spectra.site1 (no wildcards)"
            ));
        }
        Ok(s.to_string())
    }

    /// The path as `STREAM/CONSUMER` (JetStream names: no dots, spaces, wildcards or slashes).
    pub(crate) fn stream_and_consumer(&self, flag: &str) -> Result<(String, String), String> {
        let valid =
            |name: &str| !name.is_empty() && !name.contains(['.', ' ', '\t', '*', '>', '/', '\\']);
        match self.path.split_once('/') {
            Some((stream, consumer)) if valid(stream) && valid(consumer) => {
                Ok((stream.to_string(), consumer.to_string()))
            }
            _ => Err(format!(
                "{flag} {self}: expected nats://HOST:PORT/STREAM/CONSUMER (a JetStream stream and a durable pull consumer)"
            )),
        }
    }
}

/// `HOST:PORT`, `[IPv6]:PORT`.
fn host_port(host: &str, port: u16) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

/// `HOST`, `HOST:PORT`, `[IPv6]:PORT`.
fn split_host_port(text: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed '[' in the host")?;
        (host, after.strip_prefix(':'))
    } else {
        match text.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("bad port '{p}': expected 1 to 65535")),
        },
    };
    Ok((host.to_string(), port))
}

/// `text` with any userinfo (everything to the last '@') replaced by `***`.
pub(crate) fn redact_text(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    match rest.rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => text.to_string(),
    }
}

/// `%XX` escapes decoded (URL userinfo); anything else, and a bad escape, as written.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl fmt::Display for NatsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "tls" } else { "nats" };
        let secret = if self.auth == UrlAuth::None {
            ""
        } else {
            "***@"
        };
        let hosts: Vec<String> = std::iter::once((&self.host, self.port))
            .chain(self.more.iter().map(|(h, p)| (h, *p)))
            .map(|(host, port)| host_port(host, port))
            .collect();
        write!(f, "{scheme}://{secret}{}/{}", hosts.join(","), self.path)
    }
}

impl fmt::Debug for NatsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NatsUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts() {
        let u = NatsUrl::parse("--file", "nats://alice:s3cret@10.0.0.1:4333/FRAMES/workers")
            .expect("valid");
        assert_eq!(u.server(), "nats://10.0.0.1:4333");
        assert_eq!(
            u.stream_and_consumer("--file").expect("names"),
            ("FRAMES".into(), "workers".into())
        );
        let shown = format!("{u} {u:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("alice"),
            "{shown}"
        );
        let t = NatsUrl::parse("--output", "tls://tok@host/spectra.a").expect("valid");
        assert!(t.tls && t.auth == UrlAuth::Token("tok".into()) && t.port == DEFAULT_PORT);
        assert_eq!(t.subject("--output").expect("subject"), "spectra.a");
        // conservative: everything to the last '@' is hidden, a path's '@' too
        assert_eq!(redact_text("nats://u:p@h:1/x@y"), "nats://***@y");
        let escaped = NatsUrl::parse("--file", "nats://u:p%2Fw@h/S/C").expect("valid");
        assert!(
            matches!(&escaped.auth, UrlAuth::UserPassword { password, .. } if password == "p/w")
        );
    }

    #[test]
    fn bad_addresses_are_named_without_secrets() {
        for bad in [
            "nats://u:pw@:4222/x",
            "nats://u:pw@h:99999/x",
            "nats://u:pw@h:0/x",
            "nats://u:p/w@h/S/C", // an unescaped '/' in the password
            "nats://u:pw/x@h:4222/S/C",
        ] {
            let e = NatsUrl::parse("--file", bad).expect_err(bad);
            assert!(
                !e.contains("pw") && !e.contains("p/w") && !e.contains("w@"),
                "{e}"
            );
        }
        let several = NatsUrl::parse("--file", "nats://u:pw@a:1,b,[::1]:3/S/C").expect("valid");
        assert_eq!(
            several.servers(),
            ["nats://a:1", "nats://b:4222", "nats://[::1]:3"]
        );
        assert_eq!(several.to_string(), "nats://***@a:1,b:4222,[::1]:3/S/C");
        assert!(NatsUrl::parse("--file", "nats://a:1,/S/C").is_err());
        let u = NatsUrl::parse("--output", "nats://h/").expect("parses");
        assert!(u.subject("--output").is_err());
        let u = NatsUrl::parse("--file", "nats://h/ONLYSTREAM").expect("parses");
        assert!(u.stream_and_consumer("--file").is_err());
        assert!(NatsUrl::parse("--file", "http://h/x").is_err());
    }
}
