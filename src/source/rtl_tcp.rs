//! `--file rtl_tcp://HOST[:PORT]`: a live RTL-SDR served by `rtl_tcp` (or anything speaking its
//! protocol), read as one complex I/Q stream.
//!
//! The protocol, as rtl_tcp (librtlsdr) speaks it:
//! - on connecting, the server sends a 12-byte dongle-info header: the magic `RTL0`, then the
//!   tuner type and the number of gain steps it has, both big-endian u32;
//! - the client sends 5-byte commands: a command byte and a big-endian u32 parameter. fftd sends
//!   set-sample-rate (0x02) from `--rate` (default 2048000, rtl_tcp's own), set-frequency (0x01)
//!   from `--center-freq` when given, and from `--gain`: gain mode (0x03) 0 for `auto`, else 1
//!   then tuner gain (0x04) in tenths of a dB (a signed value, as rtl_tcp reads it);
//! - the server streams unsigned 8-bit I/Q pairs (cu8), I first; each value becomes
//!   `(v - 127.5) / 127.5`, so 0 and 255 are -1 and +1.
//!
//! rtl_tcp has no acknowledgement: the first samples may predate the commands taking effect.
//! The stream is live (frames the analysis cannot keep up with are dropped and counted, as for
//! `--mic`); SIGINT/SIGTERM end it cleanly. The connection closing or failing is an error naming
//! the address and how many samples came, and so is a connection that stays open with no samples
//! for 5 s (`SILENCE`); `--retry` reconnects after either.

use super::{SampleSource, SourceInfo};
use crate::error::{FftdError, Result};
use crate::types::{shown, InputKind};
use serde::{Deserialize, Deserializer};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How an input names an rtl_tcp server.
pub(crate) const SCHEME: &str = "rtl_tcp://";
/// rtl_tcp's default port.
const DEFAULT_PORT: u16 = 1234;
/// rtl_tcp's default sample rate, used when `--rate` is not given.
pub(crate) const DEFAULT_RATE: f64 = 2_048_000.0;
/// Longest wait for the connection and for the dongle-info header.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// How often a read waiting for data looks at the stop request.
const STOP_POLL: Duration = Duration::from_millis(50);
/// Longest wait for samples once streaming: a receiver that keeps its connection open but sends
/// nothing for this long has stopped (a dongle pulled out under rtl_tcp, a stalled server), as a
/// SoapySDR device has (`soapy::LOST_AFTER`). At rtl_tcp's lowest rate (225 kS/s) a real one
/// sends a USB transfer every 0.3 s.
const SILENCE: Duration = Duration::from_secs(5);
/// The most bytes one read asks for.
const MAX_READ: usize = 1 << 20;

/// Whether an input path names an rtl_tcp server.
pub(crate) fn is_rtl_tcp(path: &str) -> bool {
    path.starts_with(SCHEME)
}

/// `--gain`: the tuner's automatic gain, or a gain in dB.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gain {
    Auto,
    Db(f64),
}

/// What a `--gain` value must be.
const GAIN_VALUES: &str = "expected auto or a tuner gain in dB from -100 to 100 (such as 29.7)";

impl FromStr for Gain {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("auto") {
            return Ok(Gain::Auto);
        }
        match text.parse::<f64>() {
            Ok(db) if (-100.0..=100.0).contains(&db) => Ok(Gain::Db(db)),
            _ => Err(GAIN_VALUES.into()),
        }
    }
}

impl<'de> Deserialize<'de> for Gain {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Value {
            Text(String),
            Number(f64),
        }
        let text = match Value::deserialize(d) {
            Ok(Value::Text(t)) => t,
            Ok(Value::Number(n)) => n.to_string(),
            Err(_) => return Err(serde::de::Error::custom(GAIN_VALUES)),
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What fftd asks the receiver for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Samples per second.
    pub rate: f64,
    /// Centre frequency in Hz, when given.
    pub center: Option<f64>,
    pub gain: Option<Gain>,
}

impl Tuning {
    /// The 5-byte commands that ask for this tuning, in the order they are sent; a value the
    /// protocol cannot carry is a usage error naming its flag.
    pub(crate) fn commands(&self) -> Result<Vec<[u8; 5]>> {
        let mut commands = vec![command(0x02, whole_hz("--rate", self.rate)?)];
        if let Some(center) = self.center {
            commands.push(command(0x01, whole_hz("--center-freq", center)?));
        }
        match self.gain {
            None => {}
            Some(Gain::Auto) => commands.push(command(0x03, 0)),
            Some(Gain::Db(db)) => {
                commands.push(command(0x03, 1));
                let tenths = (db * 10.0).round() as i32;
                commands.push(command(0x04, tenths as u32));
            }
        }
        Ok(commands)
    }
}

/// `v` as the protocol carries it, a whole number of Hz; else a usage error naming `flag`.
pub(crate) fn whole_hz(flag: &str, v: f64) -> Result<u32> {
    let ok = v.fract() == 0.0 && v >= 1.0 && v <= f64::from(u32::MAX);
    ok.then_some(v as u32).ok_or_else(|| {
        FftdError::Usage(format!(
            "{flag} {}: rtl_tcp takes a whole number of Hz from 1 to {}",
            crate::types::shown(v),
            u32::MAX
        ))
    })
}

/// The samples a sweep leaves out after each retune when `--settle` is not given: two of the
/// 131072-sample USB transfers rtl_tcp's librtlsdr fills (the one being filled and one queued
/// hold samples taken before the retune), plus 20 ms for the tuner's PLL to lock — 148 ms at
/// 2.048 MS/s.
pub(crate) fn default_settle_samples(rate: f64) -> u64 {
    2 * 131_072 + (0.02 * rate).ceil() as u64
}

/// One command: its byte, then the parameter big-endian.
fn command(code: u8, param: u32) -> [u8; 5] {
    let p = param.to_be_bytes();
    [code, p[0], p[1], p[2], p[3]]
}

/// The server's address in `url` (`rtl_tcp://HOST[:PORT]`, an IPv6 host in brackets).
pub(crate) fn address(url: &str) -> Result<(String, u16)> {
    let bad = |why: &str| {
        FftdError::Usage(format!(
            "--file {url}: {why} (expected rtl_tcp://HOST:PORT, such as rtl_tcp://127.0.0.1:1234)"
        ))
    };
    let rest = url
        .strip_prefix(SCHEME)
        .ok_or_else(|| bad("not an rtl_tcp address"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']').ok_or_else(|| bad("no closing ']'"))?;
            (host, after.strip_prefix(':'))
        }
        None => match rest.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        },
    };
    if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
        return Err(bad("no host name"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?,
    };
    Ok((host.to_string(), port))
}

/// The dongle-info header's tuner names (rtl_tcp's `enum rtlsdr_tuner`).
fn tuner_name(tuner: u32) -> &'static str {
    match tuner {
        1 => "E4000",
        2 => "FC0012",
        3 => "FC0013",
        4 => "FC2580",
        5 => "R820T",
        6 => "R828D",
        _ => "unknown",
    }
}

/// The sample rates an RTL2832U takes (librtlsdr's `rtlsdr_set_sample_rate`); rtl_tcp reports
/// one it cannot set on its own console only, and goes on at its old rate.
const RTL2832U_RATES: [(f64, f64); 2] = [(225_001.0, 300_000.0), (900_001.0, 3_200_000.0)];

/// Why a `rate` an RTL2832U dongle (a `tuner` librtlsdr names) cannot take is worth a warning:
/// its bins would be labelled with a rate the samples do not have. Not refused: servers of the
/// protocol for other hardware (airspy_tcp, hackrf_tcp, rsp_tcp) say R820T too, and take others.
fn check_rate(tuner: u32, rate: f64) -> std::result::Result<(), String> {
    let rtl = tuner_name(tuner) != "unknown";
    if !rtl
        || RTL2832U_RATES
            .iter()
            .any(|(lo, hi)| (*lo..=*hi).contains(&rate))
    {
        return Ok(());
    }
    Err(format!(
        "--rate {}: an RTL2832U ({} tuner) takes 225001 to 300000 or 900001 to 3200000 samples/s, and rtl_tcp would go on at its old rate under these labels (a server for other hardware that says {} may take it)",
        crate::types::shown(rate),
        tuner_name(tuner),
        tuner_name(tuner)
    ))
}

/// The lowest and highest gain, in dB, librtlsdr gives a tuner it names
/// (`rtlsdr_get_tuner_gains`).
fn gain_range(tuner: u32) -> Option<(f64, f64)> {
    match tuner {
        1 => Some((-1.0, 42.0)),
        2 => Some((-9.9, 19.2)),
        3 => Some((-9.9, 19.7)),
        4 => Some((0.0, 0.0)),
        5 | 6 => Some((0.0, 49.6)),
        _ => None,
    }
}

/// Why a `--gain` in dB outside the range of a tuner librtlsdr names is worth a warning: the
/// tuner cannot take it, and rtl_tcp says so on its own console only. Not refused, as for
/// `check_rate`.
fn check_gain(tuner: u32, gain: Option<Gain>) -> std::result::Result<(), String> {
    let (Some(Gain::Db(db)), Some((lo, hi))) = (gain, gain_range(tuner)) else {
        return Ok(());
    };
    if (lo..=hi).contains(&db) {
        return Ok(());
    }
    let name = tuner_name(tuner);
    let takes = match lo == hi {
        true => format!("has one gain only, {} dB", shown(lo)),
        false => format!("takes gains from {} to {} dB", shown(lo), shown(hi)),
    };
    let db = shown(db);
    Err(format!(
        "--gain {db}: an RTL2832U's {name} tuner {takes}, so the gain librtlsdr sets is not {db} dB (a server for other hardware that says {name} may take it)"
    ))
}

/// Connects to `url`, reads its dongle-info header, sends the `tuning` commands and returns the
/// live I/Q source. `stop` ends the handshake and the stream (no error).
pub(crate) fn open(url: &str, tuning: Tuning, stop: Arc<AtomicBool>) -> Result<RtlTcpSource> {
    let commands = tuning.commands()?;
    let (host, port) = address(url)?;
    let fail = |what: String| FftdError::input(url, what);
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| fail(format!("cannot resolve {host}: {e}")))?
        .collect();
    let mut last = None;
    let mut socket = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, HANDSHAKE) {
            Ok(s) => {
                socket = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut socket = socket.ok_or_else(|| {
        let why = last.map_or("no address".to_string(), |e| e.to_string());
        fail(format!("cannot connect: {why}"))
    })?;
    socket
        .set_read_timeout(Some(STOP_POLL))
        .and_then(|()| socket.set_nodelay(true))
        .map_err(|e| fail(format!("cannot set up the connection: {e}")))?;
    let header = read_header(&mut socket, url, &stop)?;
    if &header[..4] != b"RTL0" {
        return Err(fail(
            "not an rtl_tcp server: it did not start with the \"RTL0\" dongle-info header".into(),
        ));
    }
    let tuner = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let gains = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    tracing::info!(
        "{url}: {} tuner ({tuner}), {gains} gain steps",
        tuner_name(tuner)
    );
    if let Err(why) = check_rate(tuner, tuning.rate) {
        tracing::warn!("{url}: {why}");
    }
    if let Err(why) = check_gain(tuner, tuning.gain) {
        tracing::warn!("{url}: {why}");
    }
    if matches!(tuning.gain, Some(Gain::Db(_))) && gains == 0 {
        tracing::warn!("{url}: the tuner reports no gain steps; --gain may have no effect");
    }
    for c in &commands {
        socket
            .write_all(c)
            .map_err(|e| fail(format!("connection lost while sending commands: {e}")))?;
    }
    Ok(RtlTcpSource {
        info: SourceInfo {
            name: url.to_string(),
            rate: tuning.rate,
            channels: 1,
            kind: InputKind::Complex,
            live: true,
        },
        socket,
        stop,
        bytes: Vec::new(),
        carry: None,
        received: 0,
        last_data: Instant::now(),
    })
}

/// The 12-byte dongle-info header, within `HANDSHAKE`.
fn read_header(socket: &mut TcpStream, url: &str, stop: &AtomicBool) -> Result<[u8; 12]> {
    let mut header = [0u8; 12];
    let mut got = 0;
    let started = Instant::now();
    while got < header.len() {
        if stop.load(Ordering::Relaxed) {
            return Err(FftdError::Stopped(format!(
                "stopped before {url} sent its dongle-info header"
            )));
        }
        match socket.read(&mut header[got..]) {
            Ok(0) => {
                return Err(FftdError::input(
                    url,
                    format!("connection closed after {got} bytes of the 12-byte dongle-info header (is it an rtl_tcp server?)"),
                ))
            }
            Ok(n) => got += n,
            Err(e) if waiting(&e) && started.elapsed() < HANDSHAKE => {}
            Err(e) if waiting(&e) => {
                return Err(FftdError::input(
                    url,
                    format!("no dongle-info header within {} s (is it an rtl_tcp server?)", HANDSHAKE.as_secs()),
                ))
            }
            Err(e) => return Err(FftdError::input(url, format!("connection lost: {e}"))),
        }
    }
    Ok(header)
}

/// Why a connection with no samples for `SILENCE` is given up.
fn silent() -> String {
    format!(
        "no samples for {} s: the receiver stopped sending",
        SILENCE.as_secs()
    )
}

/// A read that timed out (or was interrupted): nothing has come yet.
fn waiting(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The live I/Q stream of an rtl_tcp server.
pub(crate) struct RtlTcpSource {
    info: SourceInfo,
    socket: TcpStream,
    stop: Arc<AtomicBool>,
    bytes: Vec<u8>,
    /// The I byte of a pair whose Q has not come yet.
    carry: Option<u8>,
    /// I/Q bytes received so far.
    received: u64,
    /// When bytes last came (`silent_for`).
    last_data: Instant,
}

impl RtlTcpSource {
    /// The error for a connection that ended or failed.
    fn lost(&self, why: String) -> FftdError {
        FftdError::input(
            &self.info.name,
            format!(
                "connection lost after {} I/Q samples: {why}",
                self.received / 2
            ),
        )
    }
}

/// A cu8 value as a sample: 0 is -1, 255 is +1, 127.5 would be 0.
pub(crate) fn cu8_value(b: u8) -> f64 {
    (f64::from(b) - 127.5) / 127.5
}

impl SampleSource for RtlTcpSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        // at most `max_frames` pairs, counting a carried I byte; 0 only when stopped
        let want =
            max_frames.max(1).saturating_mul(2).min(MAX_READ) - self.carry.is_some() as usize;
        self.bytes.resize(want.max(1), 0);
        let start = out.len();
        let asked = Instant::now();
        while out.len() == start {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            let got = match self.socket.read(&mut self.bytes) {
                Ok(0) => return Err(self.lost("closed by the server".into())),
                Ok(n) => n,
                Err(e) if waiting(&e) && asked.elapsed() < SILENCE => continue,
                Err(e) if waiting(&e) => return Err(self.lost(silent())),
                Err(e) => return Err(self.lost(e.to_string())),
            };
            self.received += got as u64;
            self.last_data = Instant::now();
            let mut bytes = &self.bytes[..got];
            if let Some(i) = self.carry.take() {
                out.extend([cu8_value(i), cu8_value(bytes[0])]);
                bytes = &bytes[1..];
            }
            let pairs = bytes.chunks_exact(2);
            self.carry = pairs.remainder().first().copied();
            out.extend(pairs.flat_map(|p| [cu8_value(p[0]), cu8_value(p[1])]));
        }
        Ok((out.len() - start) / 2)
    }

    fn silent_for(&self) -> Duration {
        self.last_data.elapsed()
    }

    /// Sends set-frequency (0x01); rtl_tcp acknowledges nothing, so samples that follow may
    /// predate it (a sweep leaves them out).
    fn retune(&mut self, hz: f64) -> Result<()> {
        let c = command(0x01, whole_hz("--sweep", hz)?);
        self.socket
            .write_all(&c)
            .map_err(|e| self.lost(format!("cannot send a retune: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_an_rtl2832u_cannot_take_is_warned_of_where_the_tuner_is_one() {
        for rate in [225_001.0, 300_000.0, 900_001.0, 2_048_000.0, 3_200_000.0] {
            assert_eq!(check_rate(5, rate), Ok(()), "{rate}");
        }
        let why = check_rate(5, 100.0).expect_err("too slow");
        assert!(why.contains("--rate 100") && why.contains("R820T"), "{why}");
        assert!(check_rate(1, 10_000_000.0).is_err());
        // a tuner librtlsdr does not name: another device's server
        assert_eq!(check_rate(0, 10_000_000.0), Ok(()));
    }

    #[test]
    fn a_gain_a_named_tuner_cannot_take_is_warned_of() {
        for (tuner, db) in [
            (5, 0.0),
            (5, 49.6),
            (6, 29.7),
            (1, -1.0),
            (2, 19.2),
            (4, 0.0),
        ] {
            assert_eq!(
                check_gain(tuner, Some(Gain::Db(db))),
                Ok(()),
                "{tuner} {db}"
            );
        }
        let why = check_gain(5, Some(Gain::Db(-99.0))).expect_err("below");
        assert!(
            why.starts_with("--gain -99: an RTL2832U's R820T tuner takes gains from 0 to 49.6 dB")
        );
        assert!(check_gain(1, Some(Gain::Db(45.0))).is_err());
        assert!(check_gain(4, Some(Gain::Db(10.0))).is_err());
        // automatic gain, and a tuner librtlsdr does not name (another device's server)
        assert_eq!(check_gain(5, Some(Gain::Auto)), Ok(()));
        assert_eq!(check_gain(0, Some(Gain::Db(90.0))), Ok(()));
        assert_eq!(check_gain(5, None), Ok(()));
    }

    #[test]
    fn addresses_parse_and_bad_ones_are_named() {
        assert_eq!(
            address("rtl_tcp://127.0.0.1:1234").expect("ok"),
            ("127.0.0.1".into(), 1234)
        );
        assert_eq!(
            address("rtl_tcp://radio.local").expect("ok"),
            ("radio.local".into(), 1234)
        );
        assert_eq!(
            address("rtl_tcp://[::1]:7373/").expect("ok"),
            ("::1".into(), 7373)
        );
        for bad in [
            "rtl_tcp://",
            "rtl_tcp://:1234",
            "rtl_tcp://h:0",
            "rtl_tcp://h:x",
            "rtl_tcp://[::1",
        ] {
            let e = address(bad).expect_err(bad).to_string();
            assert!(e.starts_with(&format!("--file {bad}: ")), "{e}");
        }
    }

    #[test]
    fn commands_follow_the_protocol() {
        let t = Tuning {
            rate: 2_400_000.0,
            center: Some(100_000_000.0),
            gain: Some(Gain::Db(29.7)),
        };
        let c = t.commands().expect("ok");
        assert_eq!(
            c,
            vec![
                [0x02, 0x00, 0x24, 0x9f, 0x00],
                [0x01, 0x05, 0xf5, 0xe1, 0x00],
                [0x03, 0, 0, 0, 1],
                [0x04, 0, 0, 1, 41],
            ]
        );
        let auto = Tuning {
            gain: Some(Gain::Auto),
            center: None,
            ..t
        };
        assert_eq!(auto.commands().expect("ok")[1], [0x03, 0, 0, 0, 0]);
        let negative = Tuning {
            gain: Some(Gain::Db(-1.0)),
            ..t
        };
        assert_eq!(
            negative.commands().expect("ok")[3],
            [0x04, 0xff, 0xff, 0xff, 0xf6]
        );
        let fractional = Tuning {
            rate: 1e6 + 0.5,
            ..t
        };
        assert!(fractional.commands().is_err());
    }

    #[test]
    fn gains_parse() {
        assert_eq!("auto".parse::<Gain>(), Ok(Gain::Auto));
        assert_eq!("-3.5".parse::<Gain>(), Ok(Gain::Db(-3.5)));
        assert!("loud".parse::<Gain>().is_err());
        assert!("1000".parse::<Gain>().is_err());
        assert!("nan".parse::<Gain>().is_err());
    }

    #[test]
    fn cu8_spans_minus_one_to_one() {
        assert_eq!(cu8_value(0), -1.0);
        assert_eq!(cu8_value(255), 1.0);
        assert_eq!(cu8_value(128), 0.5 / 127.5);
    }
}
