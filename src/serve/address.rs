//! `--serve ADDR`: what the user may write (HOST:PORT, IP:PORT, [IPv6]:PORT, :PORT or PORT, the
//! last two on loopback) and the one-line errors for anything else.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

pub(crate) fn parse(text: &str) -> Result<SocketAddr, String> {
    let bad = |why: &str| {
        format!(
            "--serve {text}: {why} (use HOST:PORT, e.g. 127.0.0.1:8080, or a PORT for loopback)"
        )
    };
    let trimmed = text.trim();
    let port_only = trimmed.strip_prefix(':').unwrap_or(trimmed);
    if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
        let port = port_only
            .parse::<u16>()
            .map_err(|_| bad("the port must be from 0 to 65535"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(addr) = trimmed.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = trimmed.rsplit_once(':') else {
        return Err(bad("no port"));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad("not an address"));
    }
    let mut found = (host, port.parse::<u16>().unwrap_or(0))
        .to_socket_addrs()
        .map_err(|_| bad("unknown host"))?;
    found.next().ok_or_else(|| bad("unknown host"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_alone_mean_loopback() {
        assert_eq!(parse("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(parse(":0").unwrap().to_string(), "127.0.0.1:0");
        assert_eq!(parse("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
        assert_eq!(parse("[::1]:9").unwrap().to_string(), "[::1]:9");
        assert!(parse("localhost:8080").unwrap().ip().is_loopback());
    }

    #[test]
    fn bad_addresses_say_what_to_write() {
        for bad in [
            "",
            "host",
            "1.2.3.4:99999",
            "70000",
            "nope.invalid:80",
            ":x",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--serve {bad}:")), "{e}");
            assert!(e.contains("HOST:PORT"), "{e}");
        }
    }
}
