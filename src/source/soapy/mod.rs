//! `--file soapy://ARGS`: any SoapySDR receiver (HackRF, Airspy, LimeSDR, PlutoSDR, USRP,
//! bladeRF, RTL-SDR, …), named by SoapySDR's device arguments (`soapy://driver=hackrf,serial=…`),
//! read live as one complex I/Q stream. libSoapySDR is loaded at run time (`api`): fftd starts
//! without it, and a `soapy://` input on a machine without it is one error saying what to
//! install.
//!
//! On opening: `--rate` (default 2.048 MS/s), `--center-freq`, `--gain` (auto or dB) and
//! `--channel N` (the device's receive channel, default 0) are set on the device; the stream is
//! CF32 when the device offers it, else CS16 (scaled by 1/32768), converted by libSoapySDR from
//! the device's native format. Reads ask for at most the stream's MTU.
//!
//! Live as rtl_tcp: frames the analysis cannot keep up with are dropped and counted. An overflow
//! (the device or its driver lost samples) restarts framing and counts as one lost frame (the
//! device does not say how many samples it lost). No samples for `LOST_AFTER` is a lost device:
//! an error naming it, which `--retry` answers by opening it again.

pub(crate) mod api;

use super::rtl_tcp::Gain;
use super::{SampleSource, SourceInfo};
use crate::error::{FftdError, Result};
use crate::types::{shown, InputKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How an input names a SoapySDR device.
pub(crate) const SCHEME: &str = "soapy://";

/// Checks `soapy://ARGS`'s device arguments, `key=value` pairs joined by commas (none: the
/// first device found): a pair without a key is a malformed address (`soapy://=,,=` opened the
/// default device).
pub(crate) fn check_address(url: &str) -> Result<(), String> {
    let args = url.strip_prefix(SCHEME).unwrap_or(url);
    let mut pairs = args.split(',').filter(|pair| !pair.trim().is_empty());
    let keyless = |pair: &&str| pair.split('=').next().is_none_or(|k| k.trim().is_empty());
    match pairs.find(keyless) {
        Some(pair) => Err(format!(
            "--file {url}: '{pair}' is not a key=value device argument (as soapy://driver=hackrf,serial=…)"
        )),
        None => Ok(()),
    }
}

/// The rate asked for when `--rate` is not given (rtl_tcp's, a rate most receivers take).
pub(crate) const DEFAULT_RATE: f64 = 2_048_000.0;
/// How long one read waits before looking at the stop request again.
const READ_TIMEOUT_US: i64 = 100_000;
/// No samples for this long: the device is lost.
const LOST_AFTER: Duration = Duration::from_secs(5);
/// The most samples one read asks for (some modules stall on larger reads).
const MAX_READ: usize = 8192;

/// Whether an input path names a SoapySDR device.
pub(crate) fn is_soapy(path: &str) -> bool {
    path.starts_with(SCHEME)
}

/// `--sweep`'s settle when not given, for a SoapySDR receiver: 100 ms (devices buffer
/// differently; raise it for deeply buffered ones).
pub(crate) fn default_settle_samples(rate: f64) -> u64 {
    (0.1 * rate).ceil() as u64
}

/// What fftd asks the device for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request {
    pub rate: f64,
    pub center: Option<f64>,
    pub gain: Option<Gain>,
    /// The device's receive channel.
    pub channel: usize,
}

/// The device's samples as they come: the stream's format.
enum Samples {
    Cf32(Vec<f32>),
    Cs16(Vec<i16>),
}

/// A live SoapySDR receive stream.
pub(crate) struct SoapySource {
    info: SourceInfo,
    stream: api::Stream,
    channel: usize,
    samples: Samples,
    stop: Arc<AtomicBool>,
    /// Overflows since the reader last asked (`take_gap`), and in all.
    gap: u64,
    overflows: u64,
    received: u64,
    /// When samples last came (`silent_for`).
    last_data: Instant,
}

/// Opens the device `url` names, sets it up as `request` says and starts its stream.
pub(crate) fn open(url: &str, request: Request, stop: Arc<AtomicBool>) -> Result<SoapySource> {
    let fail = |what: String| FftdError::input(url, what);
    let args = url.strip_prefix(SCHEME).unwrap_or(url);
    let device = api::Device::make(args).map_err(fail)?;
    let channels = device.rx_channels();
    if request.channel >= channels {
        return Err(FftdError::Usage(format!(
            "--channel {}: {url} has {channels} receive channel(s), numbered from 0",
            request.channel
        )));
    }
    let ch = request.channel;
    device.set_rate(ch, request.rate).map_err(fail)?;
    let actual = device.rate(ch);
    if (actual - request.rate).abs() > 1e-6 * request.rate {
        return Err(FftdError::Usage(format!(
            "--rate {}: {url} runs at {} samples/s instead; give --rate {}",
            crate::types::shown(request.rate),
            crate::types::shown(actual),
            crate::types::shown(actual)
        )));
    }
    if let Some(hz) = request.center {
        device.set_frequency(ch, hz).map_err(fail)?;
    }
    if let Some(gain) = request.gain {
        set_gain(&device, ch, gain, url)?;
    }
    let formats = device.formats(ch);
    let format = ["CF32", "CS16"]
        .into_iter()
        .find(|f| formats.iter().any(|o| o == f))
        .ok_or_else(|| {
            fail(format!(
                "streams neither CF32 nor CS16 (it offers {})",
                formats.join(", ")
            ))
        })?;
    let stream = device.stream(ch, format).map_err(fail)?;
    let mtu = stream.mtu().clamp(1, MAX_READ);
    tracing::info!("{url}: channel {ch} of {channels}, {format}, up to {mtu} samples a read");
    Ok(SoapySource {
        info: SourceInfo {
            name: url.to_string(),
            rate: request.rate,
            channels: 1,
            kind: InputKind::Complex,
            live: true,
        },
        stream,
        channel: ch,
        samples: match format {
            "CF32" => Samples::Cf32(vec![0.0; 2 * mtu]),
            _ => Samples::Cs16(vec![0; 2 * mtu]),
        },
        stop,
        gap: 0,
        overflows: 0,
        received: 0,
        last_data: Instant::now(),
    })
}

/// Sets `--gain` on the channel, refused where the device cannot take it: a driver clips or
/// ignores a gain outside its range (any gain, where it has none) and ignores automatic gain
/// where it has no such mode, so the run would go on at another gain than the one asked for.
fn set_gain(device: &api::Device, ch: usize, gain: Gain, url: &str) -> Result<()> {
    let db = match gain {
        Gain::Auto if !device.has_automatic_gain(ch) => {
            let why = format!("--gain auto: {url} has no automatic gain; give a gain in dB");
            return Err(FftdError::Usage(why));
        }
        Gain::Auto => None,
        Gain::Db(db) => Some(db),
    };
    if let Some(db) = db {
        let (lo, hi) = device.gain_range(ch);
        let range = match lo == hi {
            true => format!("has no gain to set (its gain is {} dB)", shown(lo)),
            false => format!("takes gains from {} to {} dB", shown(lo), shown(hi)),
        };
        if !(lo..=hi).contains(&db) {
            return Err(FftdError::Usage(format!(
                "--gain {}: {url} {range}",
                shown(db)
            )));
        }
    }
    device
        .set_gain(ch, db)
        .map_err(|why| FftdError::input(url, why))
}

impl SoapySource {
    /// The error for a device that failed or went silent.
    fn lost(&self, why: String) -> FftdError {
        FftdError::input(
            &self.info.name,
            format!("device lost after {} I/Q samples: {why}", self.received),
        )
    }

    /// Reads once into the buffer: samples, or a negative SoapySDR code.
    fn read_once(&mut self, max: usize) -> i32 {
        let elements = max.clamp(1, self.capacity());
        let buffer = match &mut self.samples {
            Samples::Cf32(v) => v.as_mut_ptr().cast(),
            Samples::Cs16(v) => v.as_mut_ptr().cast(),
        };
        self.stream.read(buffer, elements, READ_TIMEOUT_US)
    }

    /// Samples the buffer holds.
    fn capacity(&self) -> usize {
        match &self.samples {
            Samples::Cf32(v) => v.len() / 2,
            Samples::Cs16(v) => v.len() / 2,
        }
    }

    /// Appends the first `n` samples of the buffer as f64 pairs.
    fn append(&self, out: &mut Vec<f64>, n: usize) {
        match &self.samples {
            Samples::Cf32(v) => out.extend(v[..2 * n].iter().map(|&x| f64::from(x))),
            Samples::Cs16(v) => out.extend(v[..2 * n].iter().map(|&x| f64::from(x) / 32768.0)),
        }
    }
}

impl SampleSource for SoapySource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        let silent_since = Instant::now();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            match self.read_once(max_frames) {
                n if n > 0 => {
                    let n = (n as usize).min(self.capacity());
                    self.append(out, n);
                    self.received += n as u64;
                    self.last_data = Instant::now();
                    return Ok(n);
                }
                0 | api::TIMEOUT if silent_since.elapsed() < LOST_AFTER => {}
                0 | api::TIMEOUT => {
                    let secs = LOST_AFTER.as_secs();
                    return Err(self.lost(format!("no samples for {secs} s")));
                }
                api::OVERFLOW => {
                    if self.overflows == 0 {
                        tracing::warn!(
                            "{}: overflow: the device dropped samples (each overflow counts as a lost frame in --stats)",
                            self.info.name
                        );
                    }
                    self.overflows += 1;
                    self.gap += 1;
                }
                code => return Err(self.lost(api::error_name(code))),
            }
        }
    }

    fn take_gap(&mut self) -> u64 {
        std::mem::take(&mut self.gap)
    }

    fn silent_for(&self) -> Duration {
        self.last_data.elapsed()
    }

    fn retune(&mut self, hz: f64) -> Result<()> {
        let failed = self.stream.retune(self.channel, hz);
        failed.map_err(|e| self.lost(e))
    }
}

/// Runs `f` with the process's stderr sent to /dev/null: SoapySDR's modules probe their hardware
/// when listing devices and print to stderr from C and C++ (ALSA's "ALSA lib …" lines through
/// the audio module's RtAudio, avahi's through the remote module), which is not fftd's output.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null");
    // SAFETY: dup of the open descriptor 2; -1 (failure) is checked below.
    let saved = unsafe { libc::dup(2) };
    let (Ok(null), true) = (null, saved >= 0) else {
        return f();
    };
    // SAFETY: both descriptors are open; 2 is restored from `saved` before returning.
    unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), 2) };
    let out = f();
    // SAFETY: `saved` is the original stderr, duplicated above and closed once here.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
    out
}

/// `fftd devices`: the SoapySDR devices the installed modules find, as `soapy://` inputs.
pub(crate) fn describe_devices() -> String {
    let mut s = String::from("SoapySDR receivers (--file soapy://ARGS):\n");
    if let Err(why) = api::available() {
        s.push_str(&format!("  none: {why}\n"));
        return s;
    }
    match quietly(|| api::enumerate("")) {
        Ok(devices) if devices.is_empty() => s.push_str(
            "  none found (a network device may need its address: soapy://driver=NAME,addr=HOST)\n",
        ),
        Ok(devices) => {
            for pairs in devices {
                let args: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("  soapy://{}\n", args.join(",")));
            }
        }
        Err(why) => s.push_str(&format!("  cannot list them: {why}\n")),
    }
    s
}
