//! Options: defined once (`Options`, whose doc comments are the `--help` text and whose field
//! names are the config-file keys), merged as CLI > config file by `merge`; `config` validates
//! the result into the run's spec.

use super::units;
use crate::fft::router::DeviceChoice;
use crate::fft::Scale;
use crate::frame::{FrameSize, Tail};
use crate::products::average::{AverageMode, AverageSpec};
use crate::products::bands::BandSpec;
use crate::sink::png::{DbRange, PngSize};
use crate::sink::OutputFormat;
use crate::source::channels::ChannelSelect;
use crate::source::InputFormat;
use crate::types::Precision;
use crate::window::WindowKind;
use serde::{Deserialize, Deserializer};
use std::path::PathBuf;

/// Implements serde's Deserialize through FromStr, accepting a TOML string or integer (and a
/// float where `floats` is given: a fraction's key); any other value is "expected WHAT" (what
/// the key takes, in the help text's words).
macro_rules! deserialize_from_str {
    ($ty:ty, $what:expr) => {
        deserialize_from_str!($ty, $what, false);
    };
    ($ty:ty, $what:expr, floats) => {
        deserialize_from_str!($ty, $what, true);
    };
    ($ty:ty, $what:expr, $floats:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum StrOrInt {
                    Str(String),
                    Int(u64),
                    Float(f64),
                }
                let text = match StrOrInt::deserialize(d) {
                    Ok(StrOrInt::Str(s)) => s,
                    Ok(StrOrInt::Int(i)) => i.to_string(),
                    Ok(StrOrInt::Float(f)) if $floats => f.to_string(),
                    _ => return Err(serde::de::Error::custom(concat!("expected ", $what))),
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
deserialize_from_str!(
    crate::source::sweep::plan::SweepRange,
    "\"LOW:HIGH:BIN\" in Hz, such as \"88M:108M:10k\""
);
deserialize_from_str!(
    crate::source::sweep::plan::Crop,
    "a fraction such as 0.2 or a percentage such as \"20%\"",
    floats
);
deserialize_from_str!(
    crate::source::sweep::plan::Settle,
    "a duration such as \"150ms\""
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
// issue 28: rows batched into NATS messages
deserialize_from_str!(
    crate::fleet::batch::RowsPerMessage,
    "a number of rows from 1 or \"max\""
);
// issue 27: the daemon's options
deserialize_from_str!(
    crate::alerts::rule::AlertRule,
    "a rule such as \"name=hum,band=900-1100,above=-20\""
);
deserialize_from_str!(
    crate::sink::rotate::RotateSpec,
    "a duration such as \"1h\" or a size such as \"500MB\""
);
deserialize_from_str!(
    crate::source::retry_policy::RetryPolicy,
    "\"forever\", a number of attempts or a duration such as \"1h\""
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
    /// .ogg/.oga/.opus ogg, .aiff/.aif/.aifc aiff, .caf caf, .m4a/.m4b/.mp4/.aac m4a; else by content
    /// (audio and WAV headers), then text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,

    /// Sample rate in Hz (a k, M or G suffix scales it: 2.4M) for inputs without a header (text,
    /// raw, stdin), the microphone and receivers [default: 1 for files, so bins are in
    /// cycles/sample; the device's rate for --mic; 2048000 for rtl_tcp:// and soapy://].
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = units::rate_hz)]
    #[serde(default, deserialize_with = "units::config_rate")]
    pub rate: Option<f64>,

    /// Tuner gain of an rtl_tcp:// or soapy:// receiver: auto, or DB (such as 29.7; the tuner takes
    /// its nearest step) [default: as the receiver has it].
    #[arg(long, value_name = "DB|auto")]
    pub gain: Option<crate::source::rtl_tcp::Gain>,

    /// Survey a band wider than the receiver (rtl_tcp:// or soapy://): LOW:HIGH:BIN in Hz with k, M,
    /// G suffixes (rtl_power's -f), retuning hop after hop; one row per hop, frames of the
    /// smallest power of two whose bins are at most BIN wide (docs/radio.md).
    #[arg(long, value_name = "LOW:HIGH:BIN")]
    pub sweep: Option<crate::source::sweep::plan::SweepRange>,

    /// --sweep: the share of each hop's bins left out at its edges, where the receiver's filter
    /// rolls off: a fraction (0.2) or a percentage (20%) (rtl_power's -c) [default: 0].
    #[arg(long, value_name = "FRACTION")]
    pub crop: Option<crate::source::sweep::plan::Crop>,

    /// --sweep: how long the samples after each retune are left out (they may have been taken at
    /// the old frequency): 150ms, 0.2s, 0; at most 60 s [default: rtl_tcp:// 20 ms plus two of
    /// its 131072-sample transfers, 148 ms at 2.048 MS/s; soapy:// 100 ms].
    #[arg(long, value_name = "DURATION")]
    pub settle: Option<crate::source::sweep::plan::Settle>,

    /// --sweep: stop after N full sweeps [default: sweep until stopped].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub sweeps: Option<i64>,

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

    /// Samples after the last whole frame: pad (one last zero-padded frame, where the next frame
    /// starts inside the input) or drop [default: pad].
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

    /// Only the bins at or above this frequency in Hz (k, M or G: 100k).
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = units::hz)]
    #[serde(default, deserialize_with = "units::config_hz")]
    pub fmin: Option<f64>,

    /// Only the bins at or below this frequency in Hz (k, M or G: 100k).
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = units::hz)]
    #[serde(default, deserialize_with = "units::config_hz")]
    pub fmax: Option<f64>,

    /// Band powers instead of bins: mel:N[,htk][,norm=slaney|none][,fmin=HZ][,fmax=HZ] (librosa's
    /// filters), octave or third-octave[:fmin=HZ,fmax=HZ] (IEC 61260-1 base-10 bands).
    #[arg(long, value_name = "SPEC")]
    pub bands: Option<BandSpec>,

    /// The level in dB a full-scale sine (amplitude 1.0) reads: levels and bins in dB SPL (or
    /// --unit) instead of dBFS (docs/measure.md).
    #[arg(long, value_name = "DB", allow_negative_numbers = true, value_parser = units::calibration_db)]
    #[serde(default, deserialize_with = "units::config_calibration")]
    pub calibration: Option<f64>,

    /// A microphone's response, corrected per bin: lines of `Hz dB` (UMIK-1/REW files, comments
    /// and a `Sens Factor` header allowed), interpolated in log-frequency.
    #[arg(long, value_name = "PATH")]
    #[serde(default, deserialize_with = "units::config_path")]
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
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = units::tone_hz)]
    #[serde(default, deserialize_with = "units::config_tone")]
    pub tone: Option<f64>,
    /// Centre frequency the input was tuned to, in Hz: bins are labelled in absolute frequency
    /// (csv header, ndjson center_hz, --meta, PNG axis, live view, rtl-power), and an rtl_tcp://
    /// or soapy:// receiver is tuned to it [default: SigMF's core:frequency, else none: bins in
    /// baseband Hz].
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = units::center_hz)]
    #[serde(default, deserialize_with = "units::config_center")]
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
    #[serde(default, deserialize_with = "units::config_path")]
    pub output: Option<PathBuf>,

    /// Write one output file per stream into DIR.
    #[arg(long, value_name = "DIR")]
    #[serde(default, deserialize_with = "units::config_path")]
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
    #[serde(default, deserialize_with = "units::config_path")]
    pub meta: Option<PathBuf>,

    /// Print frames in/out, drops, samples/s, latency percentiles, where each thread kind's time
    /// went and the stage that bounds the run to stderr at exit (docs/tracing.md).
    #[arg(long)]
    #[serde(default)]
    pub stats: bool,

    /// Write a timeline of the run to PATH: Chrome trace-event JSON (Perfetto, chrome://tracing),
    /// a span per batch and stage on one track per thread (docs/tracing.md).
    #[arg(long, value_name = "PATH")]
    #[serde(default, deserialize_with = "units::config_path")]
    pub trace: Option<PathBuf>,

    /// No progress display on stderr (it shows only on a terminal, for file inputs, anyway).
    #[arg(long)]
    #[serde(default)]
    pub quiet: bool,

    /// Stop each stream after N frames.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole_number)]
    pub max_frames: Option<i64>,

    /// Analyse only the first SECONDS of each stream (of signal time; live input stops then too),
    /// or a duration with a unit (500ms, 10min, 2h).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = units::duration_s)]
    #[serde(default, deserialize_with = "units::config_duration")]
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

    /// Longest a frame waits for its batch to fill before it is sent anyway, in ms (or with a
    /// unit: 0.5s) [default: 5].
    #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = units::max_latency_ms)]
    #[serde(default, deserialize_with = "units::config_max_latency")]
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
    #[serde(default, deserialize_with = "units::config_path")]
    pub serve_token_file: Option<PathBuf>,

    /// --serve: serve HTTPS with this certificate chain (PEM); needs --serve-tls-key.
    #[arg(long, value_name = "PATH")]
    #[serde(default, deserialize_with = "units::config_path")]
    pub serve_tls_cert: Option<PathBuf>,

    /// --serve: the private key (PEM) of --serve-tls-cert.
    #[arg(long, value_name = "PATH")]
    #[serde(default, deserialize_with = "units::config_path")]
    pub serve_tls_key: Option<PathBuf>,

    /// Read file and stdin inputs at their sample rate, as if they were live (to watch a recording).
    #[arg(long)]
    #[serde(default)]
    pub realtime: bool,

    /// Fleet workers (--file nats://HOST:PORT/STREAM/CONSUMER): exit once no block has come for
    /// SECONDS (or with a unit: 2min) [default: run until Ctrl-C].
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = units::idle_exit_s)]
    #[serde(default, deserialize_with = "units::config_idle_exit")]
    pub idle_exit: Option<f64>,

    // issue 27: the daemon (docs/daemon.md)
    /// Split each output file every DURATION (30s, 10min, 1h, 1d: clock-aligned periods) or at
    /// SIZE (500MB, 64KiB); --output/--output-dir are then a name pattern: %Y %m %d %H %M %S %j
    /// %s (UTC time of the file's first row) and {seq} (file number) [default: one file; SIGHUP
    /// still closes and reopens every output].
    #[arg(long, value_name = "DURATION|SIZE")]
    pub rotate: Option<crate::sink::rotate::RotateSpec>,

    /// An alert rule (repeatable): name=NAME,band=LO-HI,above=DB|below=DB[,hysteresis=DB]
    /// [,hold=DURATION]: the band's power in dB (a full-scale sine reads -3.01 dB; with
    /// --calibration/--weighting calibrated and weighted, in the run's unit); peak=LO-HI (with
    /// --peaks) or level=leq|lfmax|lfmin|lsmax|lsmin (with --levels) instead of band=; with
    /// --bands or --fmin/--fmax the band is still the full spectrum's bins (inside --fmin/--fmax);
    /// each start and end is an event (--events, the live view's /events and /metrics, the log).
    #[arg(long = "alert", value_name = "RULE")]
    #[serde(default)]
    pub alert: Vec<crate::alerts::rule::AlertRule>,

    /// Where alert events (and --retry's gap events) go, one JSON object a line: a file
    /// (appended to), - for stdout, or nats://HOST:PORT/SUBJECT (with the --nats-* flags)
    /// [default: the log and the live view only].
    #[arg(long, value_name = "PATH|-|nats://HOST:PORT/SUBJECT")]
    pub events: Option<String>,

    /// Record the raw samples around each alert into DIR: WAV (SigMF for I/Q) named by time,
    /// rule and stream, from --pre before its start to --post after its end.
    #[arg(long, value_name = "DIR")]
    #[serde(default, deserialize_with = "units::config_path")]
    pub record_on_alert: Option<PathBuf>,

    /// --record-on-alert: seconds kept before an alert's start, as 500ms or 2s [default: 0s].
    #[arg(long, value_name = "DURATION")]
    pub pre: Option<String>,

    /// --record-on-alert: seconds kept after an alert's end [default: 0s].
    #[arg(long, value_name = "DURATION")]
    pub post: Option<String>,

    /// Reopen a live input that fails (the microphone, an rtl_tcp:// server, a soapy:// device, a named FIFO whose
    /// writer went away) instead of ending the run: forever, N attempts in a row, or for at most
    /// a DURATION per outage (90s, 1h); waits 0.5 s doubling to 30 s between attempts. Each gap
    /// is a log line, a "gap" event (--events) and a /metrics counter [default: a failure ends
    /// the input].
    #[arg(long, value_name = "forever|N|DURATION")]
    pub retry: Option<crate::source::retry_policy::RetryPolicy>,

    // issue 28: rows batched into NATS messages
    /// --output nats://: rows per message, a number or max (as many as fit the server's
    /// max_payload; a fleet worker: at most a block's); 1 sends one message per row
    /// (docs/fleet.md) [default: max].
    #[arg(long, value_name = "N|max")]
    pub rows_per_message: Option<crate::fleet::batch::RowsPerMessage>,
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
