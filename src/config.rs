//! Options: defined once (`Options`, whose doc comments are the `--help` text and whose field names
//! are the config-file keys), merged as CLI > config file > default, and validated into `Settings`.

use crate::error::{FftdError, Result};
use crate::fft::router::DeviceChoice;
use crate::fft::Scale;
use crate::fleet::worker::FleetIo;
use crate::frame::{FrameSize, Tail};
use crate::limits;
use crate::products::average::{AverageMode, AverageSpec};
use crate::products::bands::BandSpec;
use crate::products::ProductOptions;
use crate::sink::png::{DbRange, PngOptions, PngSize};
use crate::sink::OutputFormat;
use crate::source::channels::ChannelSelect;
use crate::source::InputFormat;
use crate::window::WindowKind;
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};

pub use crate::config_file::{load_config_file, parse_config};

/// Arithmetic precision of the transform (`--precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    F32,
    F64,
}

/// Implements serde's Deserialize through FromStr, accepting a TOML string or integer; any other
/// value is "expected WHAT" (what the key takes, in the help text's words).
macro_rules! deserialize_from_str {
    ($ty:ty, $what:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum StrOrInt {
                    Str(String),
                    Int(u64),
                }
                let text = match StrOrInt::deserialize(d) {
                    Ok(StrOrInt::Str(s)) => s,
                    Ok(StrOrInt::Int(i)) => i.to_string(),
                    Err(_) => return Err(serde::de::Error::custom(concat!("expected ", $what))),
                };
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
deserialize_from_str!(
    crate::products::measure::cross::CrossSpec,
    "two 0-based channels such as \"0,1\""
);
deserialize_from_str!(FrameSize, "a number of samples (2 or more) or \"whole\"");
deserialize_from_str!(
    AverageSpec,
    "a number of frames or a duration such as \"250ms\""
);
deserialize_from_str!(
    AverageMode,
    "one of mean, median, max, min, peak or exp:ALPHA"
);
deserialize_from_str!(
    BandSpec,
    "a band spec such as \"mel:40\", \"octave\" or \"third-octave\""
);
deserialize_from_str!(
    ChannelSelect,
    "\"mix\", \"all\" or a channel number (0 is the first)"
);
deserialize_from_str!(
    DeviceChoice,
    "one of auto, cpu, gpu, gpu:all, opencl:P:D or a comma list"
);
deserialize_from_str!(PngSize, "\"WxH\" in pixels, such as \"1200x600\"");
deserialize_from_str!(DbRange, "\"MIN:MAX\" in dB, such as \"-120:0\"");
// issue 27: the daemon's options
deserialize_from_str!(
    crate::alerts::rule::AlertRule,
    "a rule such as \"name=hum,band=900-1100,above=-20\""
);
deserialize_from_str!(
    crate::sink::rotate::RotateSpec,
    "a duration such as \"1h\" or a size such as \"500MB\""
);

/// Every option of the analysis, as flags and as config-file keys (kebab-case).
/// Unset fields fall back to the config file, then to the default named in each help text.
#[derive(clap::Args, Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Options {
    /// Input file (repeatable: each file is its own stream); `-` reads stdin.
    #[arg(long = "file", value_name = "PATH")]
    #[serde(default)]
    pub file: Vec<String>,

    /// Capture live from a microphone: default input device, or DEVICE (index or name substring
    /// from `fftd devices`).
    #[arg(
        long,
        value_name = "DEVICE",
        num_args = 0..=1,
        default_missing_value = "",
        allow_negative_numbers = true
    )]
    pub mic: Option<String>,

    /// Input file format [default: by extension: .wav wav, .f32 f32, .s16 s16, .cf32 cf32, .cu8
    /// cu8, .cs8 cs8, .cs16 cs16, .sigmf-meta/.sigmf-data sigmf, .flac flac, .mp3 mp3,
    /// .ogg/.oga/.opus ogg, .aiff/.aif/.aifc aiff, .caf caf, .m4a/.mp4/.aac m4a; else by content
    /// (audio and WAV headers), then text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,

    /// Sample rate in Hz for inputs without a header (text, raw, stdin) and for the microphone
    /// [default: 1 for files, so bins are in cycles/sample; the device's rate for --mic].
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = number)]
    pub rate: Option<f64>,

    /// Tuner gain of an rtl_tcp:// receiver: auto, or DB (such as 29.7; the tuner takes its
    /// nearest step) [default: as the server has it].
    #[arg(long, value_name = "DB|auto")]
    pub gain: Option<crate::source::rtl_tcp::Gain>,

    /// Interleaved channels in raw (f32/s16/cf32) files; channels to capture with --mic [default: 1
    /// for raw files; the device's default for --mic].
    #[arg(long, value_name = "C", allow_negative_numbers = true, value_parser = whole_number)]
    pub channels: Option<i64>,

    /// Which channel(s) to analyse: mix (average), N (0-based), all (one stream each) [default: mix].
    #[arg(long, value_name = "mix|N|all")]
    pub channel: Option<ChannelSelect>,

    /// Samples per frame (any N >= 2), or `whole`: the whole input as one frame zero-padded to the
    /// next power of two [default: 4096].
    #[arg(long, value_name = "N|whole", allow_negative_numbers = true)]
    pub frame: Option<FrameSize>,

    /// Samples between frame starts [default: the frame size].
    #[arg(long, value_name = "H", allow_negative_numbers = true, value_parser = whole_number)]
    pub hop: Option<i64>,

    /// Samples after the last whole frame: pad (one last zero-padded frame) or drop [default: pad].
    #[arg(long, value_enum)]
    pub tail: Option<Tail>,

    /// Window, periodic as scipy.signal.get_window [default: hann; rect with --frame whole].
    #[arg(long, value_enum)]
    pub window: Option<WindowKind>,

    /// Output values: magnitude |X|, db, power |X|², spectrum or density (scipy's one-sided
    /// scalings), or complex (re, im of X, as np.fft.rfft) [default: magnitude].
    #[arg(long, value_enum)]
    pub scale: Option<Scale>,

    /// One row per N frames or per DURATION (250ms, 1s, 2min) instead of one per frame, reduced in
    /// the power domain by --average-mode; the row's time is the start of its interval.
    #[arg(long, value_name = "N|DURATION")]
    pub average: Option<AverageSpec>,

    /// How --average reduces a group: mean, median (scipy welch's, bias-corrected), max, min,
    /// peak (hold since the start), exp:ALPHA (moving average) [default: mean].
    #[arg(long, value_name = "MODE")]
    pub average_mode: Option<AverageMode>,

    /// Only the bins at or above this frequency in Hz.
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = number)]
    pub fmin: Option<f64>,

    /// Only the bins at or below this frequency in Hz.
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = number)]
    pub fmax: Option<f64>,

    /// Band powers instead of bins: mel:N[,htk][,norm=slaney|none][,fmin=HZ][,fmax=HZ] (librosa's
    /// filters), octave or third-octave[:fmin=HZ,fmax=HZ] (IEC 61260-1 base-10 bands).
    #[arg(long, value_name = "SPEC")]
    pub bands: Option<BandSpec>,

    /// The level in dB a full-scale sine (amplitude 1.0) reads: levels and bins in dB SPL (or
    /// --unit) instead of dBFS (docs/measure.md).
    #[arg(long, value_name = "DB", allow_negative_numbers = true, value_parser = number)]
    pub calibration: Option<f64>,

    /// A microphone's response, corrected per bin: lines of `Hz dB` (UMIK-1/REW files, comments
    /// and a `Sens Factor` header allowed), interpolated in log-frequency.
    #[arg(long, value_name = "PATH")]
    pub calibration_file: Option<PathBuf>,

    /// Frequency weighting of power before bands, levels and dB (IEC 61672-1:2013): a, c or z.
    #[arg(long, value_enum)]
    pub weighting: Option<crate::products::measure::weighting::Weighting>,

    /// Name of the calibrated level unit [default: "dB SPL" with --calibration, else "dBFS"].
    #[arg(long, value_name = "NAME")]
    pub unit: Option<String>,

    /// Sound-level meter readings in each row: leq, lfmax, lfmin, lsmax, lsmin (Fast 125 ms,
    /// Slow 1 s) per --average interval, per frame without it [default: false].
    #[arg(long)]
    #[serde(default)]
    pub levels: bool,

    /// The N strongest peaks of each row, frequency and level interpolated (peakI_hz, peakI_db).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub peaks: Option<i64>,

    /// THD, THD+N, SINAD and SNR of each row's strongest tone (or --tone), harmonics 2 to 10
    /// [default: false].
    #[arg(long)]
    #[serde(default)]
    pub distortion: bool,

    /// Two channels A,B (0-based) of a multi-channel input: Welch cross-spectral density,
    /// coherence and the H1 transfer function B/A per bin, as scipy.signal.csd/coherence
    /// (csd, coherence, h1_db, h1_deg); --average groups the frames [default: the whole input].
    #[arg(long, value_name = "A,B")]
    pub cross: Option<crate::products::measure::cross::CrossSpec>,

    /// The fundamental --distortion measures, in Hz [default: the strongest tone].
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = number)]
    pub tone: Option<f64>,
    /// Centre frequency the input was tuned to, in Hz: bins are labelled in absolute frequency
    /// (csv header, ndjson center_hz, --meta, PNG axis, live view, rtl-power), and an
    /// rtl_tcp:// receiver is tuned to it [default: SigMF's core:frequency, else none: bins in
    /// baseband Hz].
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = number)]
    pub center_freq: Option<f64>,

    /// Subtract each frame's mean (I and Q apart) before the window: removes the DC spike of I/Q
    /// receivers, as scipy welch's detrend='constant' [default: false].
    #[arg(long)]
    #[serde(default)]
    pub dc_remove: bool,

    /// Complex input: write bins with DC in the centre (as numpy.fft.fftshift) [default: false].
    #[arg(long)]
    #[serde(default)]
    pub fftshift: bool,

    /// Arithmetic precision [default: f32].
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,

    /// Output format [default: text].
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,

    /// Output file [default: stdout], or nats://HOST:PORT/SUBJECT: each row a JetStream message
    /// (f32 by default; docs/fleet.md).
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// Write one output file per stream into DIR.
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,

    /// Size of --format png images in pixels, from 320x240 to 16384 per side and 64 megapixels
    /// (2^26 pixels) in all [default: 1200x600].
    #[arg(long, value_name = "WxH")]
    pub png_size: Option<PngSize>,

    /// Levels the colours of --format png span, in dB [default: the image's maximum and 100 dB
    /// below it].
    #[arg(long, value_name = "MIN:MAX", allow_hyphen_values = true)]
    pub png_db: Option<DbRange>,

    /// Write a JSON sidecar describing the output (rate, frame, hop, window, scale, bins, Hz per bin,
    /// inputs).
    #[arg(long, value_name = "PATH")]
    pub meta: Option<PathBuf>,

    /// Print frames in/out, drops, samples/s, latency percentiles, where each thread kind's time
    /// went and the stage that bounds the run to stderr at exit (docs/tracing.md).
    #[arg(long)]
    #[serde(default)]
    pub stats: bool,

    /// Write a timeline of the run to PATH: Chrome trace-event JSON (Perfetto, chrome://tracing),
    /// a span per batch and stage on one track per thread (docs/tracing.md).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,

    /// No progress display on stderr (it shows only on a terminal, for file inputs, anyway).
    #[arg(long)]
    #[serde(default)]
    pub quiet: bool,

    /// Stop each stream after N frames.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub max_frames: Option<i64>,

    /// Analyse only the first SECONDS of each stream (of signal time; live input stops then too).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = number)]
    pub duration: Option<f64>,

    /// Transform engine: auto (the faster for each batch, measured, on every GPU worth it), cpu,
    /// gpu (best OpenCL device), gpu:all (every GPU), opencl:P:D (platform P, device D from
    /// `fftd devices`), or a comma list of cpu, gpu and opencl:P:D (batches spread over them in
    /// proportion to their measured rates) [default: auto].
    #[arg(long, value_name = "auto|cpu|gpu|gpu:all|opencl:P:D|LIST")]
    pub device: Option<DeviceChoice>,

    /// Frames per FFT batch [default: 0 = auto, about 2^18 samples per batch].
    #[arg(long, value_name = "B", allow_negative_numbers = true, value_parser = whole_number)]
    pub batch: Option<i64>,

    /// Longest a frame waits for its batch to fill before it is sent anyway, in ms [default: 5].
    #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = number)]
    pub max_latency: Option<f64>,

    /// FFT worker threads per device [default: 0 = one per CPU core].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub workers: Option<i64>,

    /// Serve a live view on ADDR (HOST:PORT, or a PORT on 127.0.0.1): web page with spectrum and
    /// waterfall, /spectra (NDJSON rows), /metrics (Prometheus), /healthz. After the input ends it
    /// keeps serving until Ctrl-C.
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,

    /// --serve: also accept WebSocket connections from pages of ORIGIN (SCHEME://HOST[:PORT],
    /// repeatable; * for any) [default: the page's own origin only].
    #[arg(long, value_name = "ORIGIN")]
    #[serde(default)]
    pub serve_allow_origin: Vec<String>,

    /// --serve: also accept requests whose Host header names HOST (repeatable; * for any), e.g.
    /// behind a reverse proxy [default: localhost and IP addresses only, against DNS rebinding].
    #[arg(long, value_name = "HOST")]
    #[serde(default)]
    pub serve_allow_host: Vec<String>,

    /// --serve: connections open at once (page, WebSocket, /spectra, /metrics) [default: 64];
    /// when full, a newcomer replaces a connection that has not sent a whole request.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub serve_max_connections: Option<i64>,

    /// --serve: require this bearer token (also FFTD_SERVE_TOKEN): scripts send `Authorization:
    /// Bearer TOKEN`, a browser opens /?token=TOKEN once (a cookie keeps it).
    #[arg(long, value_name = "TOKEN")]
    pub serve_token: Option<String>,

    /// --serve: read the token from the first line of PATH (as --serve-token).
    #[arg(long, value_name = "PATH")]
    pub serve_token_file: Option<PathBuf>,

    /// --serve: serve HTTPS with this certificate chain (PEM); needs --serve-tls-key.
    #[arg(long, value_name = "PATH")]
    pub serve_tls_cert: Option<PathBuf>,

    /// --serve: the private key (PEM) of --serve-tls-cert.
    #[arg(long, value_name = "PATH")]
    pub serve_tls_key: Option<PathBuf>,

    /// Read file and stdin inputs at their sample rate, as if they were live (to watch a recording).
    #[arg(long)]
    #[serde(default)]
    pub realtime: bool,

    /// Fleet workers (--file nats://HOST:PORT/STREAM/CONSUMER): exit once no block has come for
    /// SECONDS [default: run until Ctrl-C].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = number)]
    pub idle_exit: Option<f64>,

    // issue 27: the daemon (docs/daemon.md)
    /// Split each output file every DURATION (30s, 10min, 1h, 1d: clock-aligned periods) or at
    /// SIZE (500MB, 64KiB); --output/--output-dir are then a name pattern: %Y %m %d %H %M %S %j
    /// %s (UTC time of the file's first row) and {seq} (file number) [default: one file; SIGHUP
    /// still closes and reopens every output].
    #[arg(long, value_name = "DURATION|SIZE")]
    pub rotate: Option<crate::sink::rotate::RotateSpec>,

    /// An alert rule (repeatable): name=NAME,band=LO-HI,above=DB|below=DB[,hysteresis=DB]
    /// [,hold=DURATION]: the band's power in dB (a full-scale sine reads -3.01 dB); each start
    /// and end is an event (--events, the live view's /events and /metrics, the log).
    #[arg(long = "alert", value_name = "RULE")]
    #[serde(default)]
    pub alert: Vec<crate::alerts::rule::AlertRule>,

    /// Where alert events go, one JSON object a line: a file (appended to), - for stdout, or
    /// nats://HOST:PORT/SUBJECT [default: the log and the live view only].
    #[arg(long, value_name = "PATH|-|nats://HOST:PORT/SUBJECT")]
    pub events: Option<String>,

    /// Record the raw samples around each alert into DIR: WAV (SigMF for I/Q) named by time,
    /// rule and stream, from --pre before its start to --post after its end.
    #[arg(long, value_name = "DIR")]
    pub record_on_alert: Option<PathBuf>,

    /// --record-on-alert: seconds kept before an alert's start, as 500ms or 2s [default: 0s].
    #[arg(long, value_name = "DURATION")]
    pub pre: Option<String>,

    /// --record-on-alert: seconds kept after an alert's end [default: 0s].
    #[arg(long, value_name = "DURATION")]
    pub post: Option<String>,
}

/// Parses an integer flag value of either sign; the range is checked in `Settings::from_options`,
/// which also checks the config file's values, so both are answered with the same message.
fn whole_number(text: &str) -> std::result::Result<i64, String> {
    use std::num::IntErrorKind;
    text.trim()
        .parse()
        .map_err(|e: std::num::ParseIntError| match e.kind() {
            IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => {
                "too large a number".to_string()
            }
            _ => "expected a whole number".to_string(),
        })
}

/// Parses a number flag value of either sign (range checked in `Settings::from_options`).
fn number(text: &str) -> std::result::Result<f64, String> {
    text.trim()
        .parse()
        .map_err(|_| "expected a number".to_string())
}

/// A number as a user would write it (1e300, not 300 digits).
pub(crate) fn shown(v: f64) -> String {
    let mut text = ryu::Buffer::new().format(v).to_string();
    if text.ends_with(".0") {
        text.truncate(text.len() - 2);
    }
    text
}

/// `value` when it lies in `lo..=hi` (`hi` None: no upper bound), else a usage error naming the
/// flag, the value and the range.
fn in_range(flag: &str, value: i64, lo: i64, hi: Option<u64>, unit: &str) -> Result<usize> {
    match usize::try_from(value) {
        Ok(v) if value >= lo && hi.is_none_or(|hi| v as u64 <= hi) => Ok(v),
        _ => Err(FftdError::Usage(match hi {
            Some(hi) => {
                format!("{flag} {value}: must be a whole number of {unit} from {lo} to {hi}")
            }
            None => format!("{flag} {value}: must be a whole number of {unit}, at least {lo}"),
        })),
    }
}

/// `--center-freq` must be a frequency; `--gain` needs an rtl_tcp:// input to set, which
/// `--realtime` cannot pace.
fn check_radio(center_freq: Option<f64>, gain: bool, realtime: bool, input: &Input) -> Result<()> {
    if let Some(hz) = center_freq {
        if !(hz.is_finite() && hz >= 0.0) {
            return Err(FftdError::Usage(format!(
                "--center-freq {}: must be a frequency of 0 Hz or more",
                shown(hz)
            )));
        }
    }
    let rtl_tcp = crate::source::rtl_tcp::among(input);
    if realtime && rtl_tcp {
        return Err(FftdError::Usage(
            "--realtime paces file and stdin inputs; an rtl_tcp:// input is live already".into(),
        ));
    }
    if gain && !rtl_tcp {
        return Err(FftdError::Usage(
            "--gain sets the tuner gain of an rtl_tcp:// input: give --file rtl_tcp://HOST:PORT"
                .into(),
        ));
    }
    Ok(())
}

/// Fills every unset field of `cli` from `file`. Flags (`fftshift`, `stats`) are on when either is.
fn merge(cli: Options, file: Options) -> Options {
    macro_rules! pick {
        ($($field:ident),*) => {
            Options {
                file: if cli.file.is_empty() { file.file } else { cli.file },
                fftshift: cli.fftshift || file.fftshift,
                levels: cli.levels || file.levels,
                distortion: cli.distortion || file.distortion,
                stats: cli.stats || file.stats,
                quiet: cli.quiet || file.quiet,
                realtime: cli.realtime || file.realtime,
                dc_remove: cli.dc_remove || file.dc_remove,
                serve_allow_origin: if cli.serve_allow_origin.is_empty() { file.serve_allow_origin } else { cli.serve_allow_origin },
                serve_allow_host: if cli.serve_allow_host.is_empty() { file.serve_allow_host } else { cli.serve_allow_host },
                alert: if cli.alert.is_empty() { file.alert } else { cli.alert }, // issue 27
                $($field: cli.$field.or(file.$field),)*
            }
        };
    }
    pick!(
        mic,
        input_format,
        rate,
        center_freq,
        gain,
        channels,
        channel,
        frame,
        hop,
        tail,
        window,
        scale,
        average,
        average_mode,
        fmin,
        fmax,
        bands,
        calibration,
        calibration_file,
        weighting,
        unit,
        peaks,
        tone,
        cross,
        precision,
        format,
        output,
        output_dir,
        png_size,
        png_db,
        meta,
        trace,
        max_frames,
        duration,
        device,
        batch,
        max_latency,
        workers,
        serve,
        serve_max_connections,
        serve_token,
        serve_token_file,
        serve_tls_cert,
        serve_tls_key,
        idle_exit,
        rotate, // issue 27
        events,
        record_on_alert,
        pre,
        post
    )
}

/// A fleet worker's addresses (`--file nats://HOST:PORT/STREAM/CONSUMER`,
/// `--output nats://HOST:PORT/SUBJECT`), and the flags a worker cannot take refused: everything
/// that needs a whole stream in one process (averages, limits, images, the live view).
fn check_fleet(o: &Options) -> Result<Option<FleetIo>> {
    use crate::fleet::url::{is_nats_url, NatsUrl};
    let usage = |m: &str| Err(FftdError::Usage(m.to_string()));
    let idle_exit = match o.idle_exit {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 => Some(std::time::Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(FftdError::Usage(format!(
                "--idle-exit {}: must be a positive number of seconds",
                shown(s)
            )))
        }
    };
    let nats_inputs = o.file.iter().filter(|f| is_nats_url(f)).count();
    let output = o
        .output
        .as_ref()
        .and_then(|p| p.to_str())
        .filter(|p| is_nats_url(p));
    match (nats_inputs, output) {
        // a local run (publishing its rows with --output nats://: `nats_output`)
        (0, _) => {
            if o.idle_exit.is_some() {
                return usage("--idle-exit is for fleet workers (--file nats://HOST:PORT/STREAM/CONSUMER)");
            }
            return Ok(None);
        }
        (_, None) => return usage(
            "a fleet worker (--file nats://...) publishes its rows: give --output nats://HOST:PORT/SUBJECT",
        ),
        _ => {}
    }
    if o.file.len() > 1 {
        return usage("a fleet worker reads one work stream: one --file nats://HOST:PORT/STREAM/CONSUMER and no other --file");
    }
    let refused = [
        (o.mic.is_some(), "--mic"),
        (o.output_dir.is_some(), "--output-dir"),
        (o.average.is_some() || o.average_mode.is_some(), "--average"),
        (
            o.max_frames.is_some() || o.duration.is_some(),
            "--max-frames/--duration",
        ),
        (o.serve.is_some(), "--serve"),
        (o.realtime, "--realtime"),
        (
            o.calibration.is_some()
                || o.calibration_file.is_some()
                || o.weighting.is_some()
                || o.levels
                || o.peaks.is_some()
                || o.distortion
                || o.cross.is_some(),
            "--cross/--calibration/--weighting/--levels/--peaks/--distortion (measurements follow a whole stream: run fftd locally)",
        ),
        (o.frame == Some(FrameSize::Whole), "--frame whole"),
        (
            matches!(o.format, Some(OutputFormat::Npy | OutputFormat::Png)),
            "--format npy/png (one message per row: text, csv, ndjson or f32)",
        ),
        // the blocks carry these: fftd publish takes them
        (
            o.channel.is_some() || o.channels.is_some(),
            "--channel/--channels (give them to fftd publish)",
        ),
        (
            o.input_format.is_some() || o.rate.is_some(),
            "--input-format/--rate (give them to fftd publish)",
        ),
        (o.tail.is_some(), "--tail (give it to fftd publish)"),
        (
            o.dc_remove || o.center_freq.is_some(),
            "--dc-remove/--center-freq (radio options of local runs, docs/radio.md)",
        ),
        // one engine, one thread: run more workers instead
        (
            o.workers.is_some() || o.batch.is_some() || o.max_latency.is_some(),
            "--workers/--batch/--max-latency (a worker transforms a block at a time on one engine: start more workers)",
        ),
        (
            matches!(o.device, Some(DeviceChoice::AllGpus | DeviceChoice::List(_))),
            "--device gpu:all or a device list (a worker drives one device: start one worker per device)",
        ),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        return Err(FftdError::Usage(format!(
            "{flag} is not available to fleet workers (docs/fleet.md)"
        )));
    }
    let input = NatsUrl::parse("--file", &o.file[0]).map_err(FftdError::Usage)?;
    let (stream, consumer) = input
        .stream_and_consumer("--file")
        .map_err(FftdError::Usage)?;
    let output =
        NatsUrl::parse("--output", output.unwrap_or_default()).map_err(FftdError::Usage)?;
    let subject = output.subject("--output").map_err(FftdError::Usage)?;
    Ok(Some(FleetIo {
        input,
        stream,
        consumer,
        output,
        subject,
        idle_exit,
    }))
}

/// A local run's rows published to NATS (`--output nats://HOST:PORT/SUBJECT` with file or
/// microphone input), one message per row as a fleet worker publishes them (`sink::nats`).
#[derive(Clone, Debug)]
pub struct NatsOutput {
    pub url: crate::fleet::url::NatsUrl,
    pub subject: String,
    /// Credentials and TLS (the command line's `--nats-*` flags, set by `main`).
    pub nats: crate::fleet::connect::NatsArgs,
}

/// `--output nats://...` of a local run: its subject, and the formats it cannot take refused
/// (one message per row: no whole-file formats). Rows default to f32.
fn nats_output(o: &mut Options) -> Result<Option<NatsOutput>> {
    use crate::fleet::url::{is_nats_url, NatsUrl};
    let Some(text) = o.output.as_ref().and_then(|p| p.to_str()) else {
        return Ok(None);
    };
    if !is_nats_url(text) {
        return Ok(None);
    }
    let url = NatsUrl::parse("--output", text).map_err(FftdError::Usage)?;
    let subject = url.subject("--output").map_err(FftdError::Usage)?;
    if let Some(format @ (OutputFormat::Npy | OutputFormat::Png)) = o.format {
        return Err(FftdError::Usage(format!(
            "--format {} cannot go to --output nats://... (one message per row: text, csv, ndjson or f32)",
            format.name()
        )));
    }
    o.format = Some(o.format.unwrap_or(OutputFormat::F32));
    o.output = None;
    Ok(Some(NatsOutput {
        url,
        subject,
        nats: Default::default(),
    }))
}

/// Where the signal comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Files(Vec<String>),
    /// Live capture; the string selects the device ("" = default).
    Mic(String),
    /// A fleet worker's work stream (`Settings::fleet` says the rest).
    Nats(crate::fleet::url::NatsUrl),
}

/// Validated settings with every default applied.
#[derive(Clone, Debug)]
pub struct Settings {
    pub input: Input,
    pub input_format: Option<InputFormat>,
    /// Rate given by the user (None: 1 Hz for files, the device rate for the mic, WAV header).
    pub rate: Option<f64>,
    /// `--gain`: an rtl_tcp:// receiver's tuner gain.
    pub gain: Option<crate::source::rtl_tcp::Gain>,
    pub channels: Option<usize>,
    pub channel: ChannelSelect,
    pub frame: FrameSize,
    pub hop: Option<usize>,
    pub tail: Tail,
    pub window: WindowKind,
    pub scale: Scale,
    /// Averages, bands, frequency range (`products`).
    pub products: ProductOptions,
    pub fftshift: bool,
    /// `--center-freq`: where the input was tuned, Hz (SigMF inputs may say it themselves).
    pub center_freq: Option<f64>,
    /// `--dc-remove`: each frame's mean subtracted before the window (`source::dc`).
    pub dc_remove: bool,
    pub precision: Precision,
    pub format: OutputFormat,
    pub output: Option<PathBuf>,
    pub output_dir: Option<PathBuf>,
    /// Image size and colour range of `--format png`.
    pub png: PngOptions,
    pub meta: Option<PathBuf>,
    /// The config file the options were read from (an input: never overwritten).
    pub config: Option<PathBuf>,
    pub stats: bool,
    /// `--trace`: where the run's timeline goes.
    pub trace: Option<PathBuf>,
    pub quiet: bool,
    pub max_frames: Option<u64>,
    pub duration: Option<f64>,
    pub device: DeviceChoice,
    /// Frames per batch; 0 = auto.
    pub batch: usize,
    pub max_latency_ms: f64,
    pub workers: usize,
    /// `--workers` as given (engines per OpenCL device too); None: `limits::DEVICE_WORKERS`.
    pub device_workers: Option<usize>,
    /// Default batches sized for OpenCL devices (`batch_frames`): `--device` names them, or
    /// `auto` on files, where GPUs may join (the pipeline turns it off when `auto` runs a job on
    /// the CPU engines alone).
    pub device_batches: bool,
    /// `--serve` and its `--serve-*` options: where the live view listens, who may look.
    pub serve: Option<crate::serve::options::ServeSettings>,
    pub realtime: bool,
    /// A fleet worker: where it takes blocks and publishes rows (`--file nats://...`).
    pub fleet: Option<FleetIo>,
    /// A local run publishing its rows to NATS (`--output nats://...`).
    pub nats_output: Option<NatsOutput>,
    // issue 27: the daemon
    /// `--rotate`: when each output file ends (`sink::rotate`).
    pub rotate: Option<crate::sink::rotate::RotateSpec>,
    /// `--alert`, `--events` (`alerts`).
    pub alerts: crate::alerts::AlertOptions,
    /// `--record-on-alert`, `--pre`, `--post` (`record`).
    pub record: Option<crate::record::RecordOptions>,
}

impl Settings {
    /// CLI options merged over the config file (when given), validated.
    pub fn resolve(cli: Options, config: Option<&Path>) -> Result<Settings> {
        Self::resolve_keys(cli, config, |o| o)
    }

    /// `resolve` using only the config-file keys `keep` leaves (`fftd check`: the file is a
    /// run's, every key checked when it is read, the output ones then left out).
    pub fn resolve_keys(
        cli: Options,
        config: Option<&Path>,
        keep: impl Fn(Options) -> Options,
    ) -> Result<Settings> {
        let file = match config {
            Some(path) => keep(load_config_file(path)?),
            None => Options::default(),
        };
        let mut settings = Self::from_options(merge(cli, file))?;
        settings.config = config.map(Path::to_path_buf);
        Ok(settings)
    }

    pub fn from_options(mut o: Options) -> Result<Settings> {
        let usage = |m: String| Err(FftdError::Usage(m));
        let fleet = check_fleet(&o)?;
        if let Some(io) = &fleet {
            o.file.clear();
            o.output = None;
            o.format = Some(o.format.unwrap_or(OutputFormat::F32));
            o.input_format = None;
            o.idle_exit = None;
            return Ok(Settings {
                input: Input::Nats(io.input.clone()),
                fleet,
                ..Self::from_options(Options {
                    file: vec!["-".into()],
                    ..o
                })?
            });
        }
        if o.output.is_some() && o.output_dir.is_some() {
            return usage("use either --output or --output-dir, not both".into());
        }
        let nats_output = nats_output(&mut o)?;
        // issue 27: --rotate needs files whose names it can make
        crate::sink::rotate::check_rotate(o.rotate, o.output.as_deref(), o.output_dir.as_deref())
            .map_err(FftdError::Usage)?;
        let to_stdout = o.output.is_none() && o.output_dir.is_none() && nats_output.is_none();
        let alert_conflicts = [
            (o.bands.is_some(), "--bands"),
            (o.fmin.is_some() || o.fmax.is_some(), "--fmin/--fmax"),
            (
                o.calibration.is_some() || o.calibration_file.is_some() || o.weighting.is_some(),
                "--calibration/--weighting",
            ),
            (
                o.levels || o.peaks.is_some() || o.distortion || o.cross.is_some(),
                "--levels/--peaks/--distortion/--cross",
            ),
            (o.frame == Some(FrameSize::Whole), "--frame whole"),
        ];
        let conflict = alert_conflicts.iter().find(|c| c.0).map(|c| c.1);
        let alerts =
            crate::alerts::check_alerts(&o.alert, o.events.as_deref(), to_stdout, conflict)
                .map_err(FftdError::Usage)?;
        let record = crate::record::check_record(
            o.record_on_alert.as_deref(),
            o.pre.as_deref(),
            o.post.as_deref(),
            !alerts.rules.is_empty(),
        )
        .map_err(FftdError::Usage)?;
        let serve = crate::serve::options::resolve(&o)?;
        let measure = Self::measure_options(&o)?;
        let input = match (o.file.is_empty(), o.mic) {
            (false, Some(_)) => return usage("use either --file or --mic, not both".into()),
            (false, None) => Input::Files(o.file),
            (true, Some(dev)) => Input::Mic(dev),
            (true, None) => {
                return usage(
                    "no input: give --file PATH (repeatable, - for stdin) or --mic [DEVICE]".into(),
                )
            }
        };
        if let Some(rate) = o.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return usage(format!(
                    "--rate {}: the sample rate must be a positive number of Hz",
                    shown(rate)
                ));
            }
        }
        check_radio(o.center_freq, o.gain.is_some(), o.realtime, &input)?;
        let channels = o
            .channels
            .map(|c| {
                in_range(
                    "--channels",
                    c,
                    1,
                    Some(limits::MAX_CHANNELS as u64),
                    "channels",
                )
            })
            .transpose()?;
        let frame = o.frame.unwrap_or(FrameSize::Fixed(4096));
        if let FrameSize::Fixed(n) = frame {
            if n > limits::MAX_FRAME_SAMPLES {
                return usage(format!(
                    "--frame {n}: at most {} samples (2^26) per frame, the largest batch buffer",
                    limits::MAX_FRAME_SAMPLES
                ));
            }
        }
        let hop = o
            .hop
            .map(|h| in_range("--hop", h, 1, None, "samples"))
            .transpose()?;
        if frame == FrameSize::Whole && hop.is_some() {
            return usage("--hop has no meaning with --frame whole (one frame per input)".into());
        }
        if let Some(d) = o.duration {
            if !(d.is_finite() && d > 0.0) {
                return usage(format!(
                    "--duration {}: must be a positive number of seconds",
                    shown(d)
                ));
            }
        }
        let max_frames = o
            .max_frames
            .map(|m| in_range("--max-frames", m, 1, None, "frames"))
            .transpose()?;
        let max_latency_ms = o.max_latency.unwrap_or(5.0);
        if !(0.0..=limits::MAX_LATENCY_MS).contains(&max_latency_ms) {
            return usage(format!(
                "--max-latency {}: must be a number of ms from 0 to {}",
                shown(max_latency_ms),
                shown(limits::MAX_LATENCY_MS)
            ));
        }
        let format = o.format.unwrap_or(OutputFormat::Text);
        let to_stdout =
            o.output_dir.is_none() && o.output.as_ref().is_none_or(|p| p.as_os_str() == "-");
        if format == OutputFormat::Npy && to_stdout {
            return usage(
                "--format npy cannot go to stdout (the header is rewritten at the end with the frame count): use --output PATH or --output-dir DIR".into(),
            );
        }
        let png = Self::check_png(format, to_stdout, o.png_size, o.png_db)?;
        let window = o.window.unwrap_or(if frame == FrameSize::Whole {
            WindowKind::Rect
        } else {
            WindowKind::Hann
        });
        let max_workers = limits::max_workers();
        let workers = match in_range(
            "--workers",
            o.workers.unwrap_or(0),
            0,
            Some(max_workers as u64),
            "threads",
        )
        .map_err(|e| {
            FftdError::Usage(format!(
                "{e} ({} per CPU core; 0 = one per core)",
                limits::WORKERS_PER_CORE
            ))
        })? {
            0 => limits::cores(),
            n => n,
        };
        if o.average_mode.is_some() && o.average.is_none() {
            return usage(
                "--average-mode needs --average N|DURATION (how many frames or how long a row averages)".into(),
            );
        }
        let products = ProductOptions {
            average: o.average,
            mode: o.average_mode.unwrap_or_default(),
            fmin: o.fmin,
            fmax: o.fmax,
            bands: o.bands,
            measure,
        };
        products.check().map_err(FftdError::Usage)?;
        crate::sink::rtl_power::check(
            o.format,
            &mut o.scale,
            products.bands.is_some(),
            &mut o.fftshift,
        )?;
        let scale = o.scale.unwrap_or(Scale::Magnitude);
        let image = o.format == Some(OutputFormat::Png);
        if let Some(cross) = o.cross {
            if matches!(
                o.channel,
                Some(ChannelSelect::Mix | ChannelSelect::Index(_))
            ) {
                return usage(format!(
                    "--cross {cross} reads two channels: leave --channel out or give --channel all"
                ));
            }
            if o.serve.is_some() {
                return usage(format!("--cross {cross}: the live view does not draw transfer functions yet; write them to a file"));
            }
        }
        let bands = products.bands.is_some();
        (products.measure)
            .check(scale, bands, image)
            .map_err(FftdError::Usage)?;
        if scale == Scale::Complex && products.in_power_domain() {
            // (a fleet worker would otherwise learn it only from its first block)
            return usage(crate::products::COMPLEX_NEEDS_POWER.into());
        }
        if !products.is_plain() && frame == FrameSize::Whole {
            return usage(
                "--average, --bands, --fmin, --fmax and the measurements (--levels, --weighting, ...) need a fixed --frame N, not whole".into(),
            );
        }
        if o.realtime && matches!(input, Input::Mic(_)) {
            return usage("--realtime paces file and stdin inputs; --mic is live already".into());
        }
        let precision = o.precision.unwrap_or(Precision::F32);
        let batch = Self::check_batch(o.batch.unwrap_or(0), frame, precision, workers)?;
        let device = o.device.unwrap_or(DeviceChoice::Auto);
        let auto_on_files = device == DeviceChoice::Auto && matches!(input, Input::Files(_));
        let device_batches = device.names_a_device() || auto_on_files;
        Ok(Settings {
            input,
            input_format: o.input_format,
            rate: o.rate,
            gain: o.gain,
            channels,
            channel: o.channel.unwrap_or(match o.cross {
                Some(_) => ChannelSelect::All,
                None => ChannelSelect::Mix,
            }),
            frame,
            hop,
            tail: o.tail.unwrap_or(Tail::Pad),
            window,
            scale,
            products,
            fftshift: o.fftshift,
            center_freq: o.center_freq,
            dc_remove: o.dc_remove,
            precision,
            format,
            output: o.output.filter(|p| p.as_os_str() != "-"),
            output_dir: o.output_dir,
            png,
            meta: o.meta,
            config: None,
            stats: o.stats,
            trace: o.trace,
            quiet: o.quiet,
            max_frames: max_frames.map(|m| m as u64),
            duration: o.duration,
            device,
            batch,
            max_latency_ms,
            workers,
            device_workers: o.workers.filter(|&w| w > 0).map(|w| w as usize),
            device_batches,
            serve,
            realtime: o.realtime,
            fleet: None,
            nats_output,
            rotate: o.rotate, // issue 27
            alerts,
            record,
        })
    }

    /// `--format png`'s options: an image needs a file, and its options need the format.
    fn check_png(
        format: OutputFormat,
        to_stdout: bool,
        size: Option<PngSize>,
        db: Option<DbRange>,
    ) -> Result<PngOptions> {
        let png = format == OutputFormat::Png;
        if png && to_stdout {
            return Err(FftdError::Usage(
                "--format png cannot go to stdout (an image is written whole at the end): use --output PATH or --output-dir DIR".into(),
            ));
        }
        if !png && (size.is_some() || db.is_some()) {
            return Err(FftdError::Usage(
                "--png-size and --png-db need --format png".into(),
            ));
        }
        let defaults = PngOptions::default();
        Ok(PngOptions {
            size: size.unwrap_or(defaults.size),
            db: db.or(defaults.db),
        })
    }

    /// The measurement flags (`products::measure`); the calibration file is read here.
    fn measure_options(o: &Options) -> Result<crate::products::measure::MeasureOptions> {
        use crate::products::measure::calibration::CalibrationCurve;
        let calibration_file = match &o.calibration_file {
            Some(path) => Some(CalibrationCurve::load(path).map_err(FftdError::Usage)?),
            None => None,
        };
        Ok(crate::products::measure::MeasureOptions {
            calibration_db: o.calibration,
            calibration_file,
            weighting: o.weighting,
            unit: o.unit.clone(),
            levels: o.levels,
            peaks: in_range("--peaks", o.peaks.unwrap_or(0), 0, Some(100), "peaks")?,
            distortion: o.distortion,
            tone_hz: o.tone,
            cross: o.cross,
        })
    }

    /// `--batch`: 0 (auto) up to the largest batch whose buffers fit this machine
    /// (`limits::max_batch_frames`).
    fn check_batch(
        batch: i64,
        frame: FrameSize,
        precision: Precision,
        workers: usize,
    ) -> Result<usize> {
        let sample_bytes = match precision {
            Precision::F32 => 4,
            Precision::F64 => 8,
        };
        // --frame whole: one frame per input, so a batch holds at most a frame or two
        let n = match frame {
            FrameSize::Fixed(n) => n,
            FrameSize::Whole => 2,
        };
        let max = limits::max_batch_frames(n, sample_bytes, workers);
        in_range("--batch", batch, 0, Some(max as u64), "frames").map_err(|e| {
            FftdError::Usage(format!(
                "{e} (0 = auto; at most {} samples per batch, and every batch in flight within half of this machine's memory)",
                limits::MAX_BATCH_SAMPLES
            ))
        })
    }

    /// Frames per batch for frames of `n` samples: `--batch`, or by default about
    /// `limits::CPU_BATCH_SAMPLES` samples, `DEVICE_BATCH_SAMPLES` with `device_batches`.
    pub fn batch_frames(&self, n: usize) -> usize {
        let (samples, most) = match self.device_batches {
            true => (limits::DEVICE_BATCH_SAMPLES, 16384),
            false => (limits::CPU_BATCH_SAMPLES, 1024),
        };
        match self.batch {
            0 => (samples / n.max(1)).clamp(1, most),
            b => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_config_parses_and_equals_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/fftd.toml");
        let file = load_config_file(&path).expect("config/fftd.toml parses");
        let cli = Options {
            file: vec!["x.txt".into()],
            ..Options::default()
        };
        let from_file = Settings::from_options(merge(cli.clone(), file)).expect("valid");
        let defaults = Settings::from_options(cli).expect("valid");
        assert_eq!(format!("{from_file:?}"), format!("{defaults:?}"));
    }

    #[test]
    fn cli_beats_file() {
        let file: Options =
            toml::from_str("frame = 1024\nhop = 256\nwindow = \"hamming\"").expect("toml");
        let cli = Options {
            file: vec!["x.txt".into()],
            frame: Some(FrameSize::Fixed(512)),
            ..Options::default()
        };
        let s = Settings::from_options(merge(cli, file)).expect("valid");
        assert_eq!(s.frame, FrameSize::Fixed(512));
        assert_eq!(s.hop, Some(256));
        assert_eq!(s.window, WindowKind::Hamming);
    }

    #[test]
    fn unknown_key_and_bad_type_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "frame = 64\nfram = 3\n").expect("write");
        let err = load_config_file(&path)
            .expect_err("unknown key")
            .to_string();
        assert!(err.contains("fram") && err.contains(":2"), "{err}");
        std::fs::write(&path, "hop = \"many\"\n").expect("write");
        let err = load_config_file(&path).expect_err("bad type").to_string();
        assert!(err.contains("hop") || err.contains("integer"), "{err}");
        assert!(err.contains(":1"), "{err}");
    }
}
