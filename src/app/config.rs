//! The options (`options::Options`, merged as CLI > config file > default) validated into
//! `Settings`: the run's spec for each stage (`RunSpec`), built one stage at a time, and a fleet
//! worker's addresses. Every usage error names the flag and the value.

use super::applies::Given;
use super::fleet_options::{check_fleet, nats_output};
use super::merge::{from_file, input_from_the_command_line, merge};
pub use super::options::Options;
use crate::app::publish::PublishArgs;
use crate::error::{FftdError, Result};
use crate::fft::router::DeviceChoice;
use crate::fft::spec::EngineSpec;
use crate::fft::Scale;
use crate::fleet::worker::FleetIo;
use crate::frame::{FrameSize, Tail};
use crate::limits;
use crate::pipeline::spec::{ReportSpec, RunSpec};
use crate::sink::analysis::Analysis;
use crate::sink::png::{DbRange, PngOptions, PngSize};
use crate::sink::spec::OutputSpec;
use crate::sink::OutputFormat;
use crate::source::channels::ChannelSelect;
use crate::source::spec::{Input, SourceSpec};
use crate::types::Precision;
use crate::window::WindowKind;
use std::path::Path;
use std::sync::Arc;

pub use crate::app::config_file::parse_config;
pub(crate) use crate::app::config_file::ConfigFile;

/// `value` when it lies in `lo..=hi` (`hi` None: no upper bound), else a usage error naming the
/// flag, the value and the range.
pub(super) fn in_range(
    flag: &str,
    value: i64,
    lo: i64,
    hi: Option<u64>,
    unit: &str,
) -> Result<usize> {
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

/// `--gain` needs a receiver (rtl_tcp://, soapy://) to set, which `--realtime` cannot pace.
/// (`--rate`'s and `--center-freq`'s ranges are checked where they are read: `app::units`.)
fn check_radio(gain: bool, realtime: bool, input: &Input) -> Result<()> {
    let receiver = input.has_receiver();
    if realtime && receiver {
        return Err(FftdError::Usage(
            "--realtime paces file and stdin inputs; a receiver (rtl_tcp://, soapy://) is live already".into(),
        ));
    }
    if gain && !receiver {
        return Err(FftdError::Usage(
            "--gain sets the tuner gain of a receiver: give --file rtl_tcp://HOST:PORT or --file soapy://ARGS"
                .into(),
        ));
    }
    Ok(())
}

/// A run's config file as `fftd check` validates it: every value, but not the files only the run
/// reads on its own host and as its own user (a token kept mode 600 for the service, a recording
/// folder, TLS files, a microphone's response), nor a run's microphone (check reads `--file`).
fn run_keys_for_check(o: Options) -> Options {
    Options {
        mic: None,
        serve_token_file: None,
        serve_tls_cert: None,
        serve_tls_key: None,
        record_on_alert: None,
        pre: None,
        post: None,
        calibration_file: None,
        ..o
    }
}

/// Validated settings with every default applied: the run's spec for each stage, and a fleet
/// worker's addresses.
#[derive(Clone, Debug)]
pub struct Settings {
    pub run: RunSpec,
    /// A fleet worker: where it takes blocks and publishes rows (`--file nats://...`).
    pub fleet: Option<FleetIo>,
    /// The config file the settings took keys from, and those keys: a usage error found once
    /// the inputs are open (`--bands` against their frame, `--channel` against their channels)
    /// is placed in it as the ones found here are (`placed`).
    config: Option<Arc<(ConfigFile, Vec<String>)>>,
}

impl std::ops::Deref for Settings {
    type Target = RunSpec;
    fn deref(&self) -> &RunSpec {
        &self.run
    }
}

impl std::ops::DerefMut for Settings {
    fn deref_mut(&mut self) -> &mut RunSpec {
        &mut self.run
    }
}

/// `fftd publish`'s input and framing flags as a run's spec (validated as a run's are).
pub fn publish_spec(args: &PublishArgs) -> Result<RunSpec> {
    let options = Options {
        file: args.file.clone(),
        mic: args.mic.clone(),
        input_format: args.input_format,
        rate: args.rate,
        channels: args.channels,
        channel: args.channel,
        frame: args.frame,
        hop: args.hop,
        tail: args.tail,
        quiet: true,
        ..Options::default()
    };
    let settings = Settings::from_options(options)?.run;
    if settings.analysis.frame == FrameSize::Whole {
        return Err(FftdError::Usage(
            "fftd publish needs a fixed --frame N (blocks hold whole frames)".into(),
        ));
    }
    Ok(settings)
}

impl Settings {
    /// CLI options merged over the config file (when given), validated.
    pub fn resolve(cli: Options, config: Option<&Path>) -> Result<Settings> {
        let file = config.map(ConfigFile::read).transpose()?;
        Self::resolve_file(cli, file.as_ref(), |o| o)
    }

    /// `fftd check`'s settings: `resolve` using only the config-file keys `keep` leaves. The file
    /// is a run's: every key's value is checked first as a run would check it (with check's input
    /// in place of a run's microphone), then the keys `keep` drops are left out.
    pub fn resolve_keys(
        cli: Options,
        config: Option<&Path>,
        keep: impl Fn(Options) -> Options,
    ) -> Result<Settings> {
        let file = config.map(ConfigFile::read).transpose()?;
        if file.is_some() {
            Self::resolve_file(cli.clone(), file.as_ref(), run_keys_for_check)?;
        }
        Self::resolve_file(cli, file.as_ref(), keep)
    }

    /// `cli` merged over the keys of `file` that `keep` leaves, validated; a usage error about a
    /// value from the file is placed in it (`ConfigFile::place`).
    fn resolve_file(
        cli: Options,
        file: Option<&ConfigFile>,
        keep: impl Fn(Options) -> Options,
    ) -> Result<Settings> {
        let Some(file) = file else {
            return Self::from_options(cli);
        };
        let keys = input_from_the_command_line(&cli, keep(file.options.clone()));
        let keys = super::unused_keys::left_out(&cli, keys); // (a shared file's keys need not fit every run)
        let given = Given::of(&cli);
        let from_file = from_file(&cli, &keys);
        let mut settings =
            Self::from_given_options(merge(cli, keys), given).map_err(|e| match e {
                FftdError::Usage(message) => FftdError::Usage(file.place(&message, &from_file)),
                other => other,
            })?;
        settings.run.output.config = Some(file.path().to_path_buf());
        settings.config = Some(Arc::new((file.clone(), from_file)));
        Ok(settings)
    }

    /// `e`, a usage error found once the run's inputs are open, placed in the config file when
    /// the first flag it names took its value from there (`ConfigFile::place`).
    pub fn placed(&self, e: FftdError) -> FftdError {
        match (e, &self.config) {
            (FftdError::Usage(message), Some(config)) => {
                FftdError::Usage(config.0.place(&message, &config.1))
            }
            (e, _) => e,
        }
    }

    /// The settings `o` gives, every value of which the user gave for this run.
    pub fn from_options(o: Options) -> Result<Settings> {
        let given = Given::of(&o);
        Self::from_given_options(o, given)
    }

    /// The settings `o` gives; `given` says which of the flags that only some inputs use were
    /// given for this run (`applies`).
    fn from_given_options(mut o: Options, given: Given) -> Result<Settings> {
        if let Some(io) = check_fleet(&o)? {
            return Self::fleet_worker(o, io);
        }
        if o.output.is_some() && o.output_dir.is_some() {
            return usage("use either --output or --output-dir, not both".into());
        }
        let nats_output = nats_output(&mut o)?;
        let alerts = alert_options(&o, nats_output.is_none())?;
        let events_to_nats = alerts.events_to_nats();
        super::applies::check_flags_apply(&o, given, nats_output.is_some() || events_to_nats)?;
        let record = crate::record::check_record(
            o.record_on_alert.as_deref(),
            o.pre.as_deref(),
            o.post.as_deref(),
            !alerts.rules.is_empty(),
        )
        .map_err(FftdError::Usage)?;
        let serve = super::serve_options::resolve(&o)?;
        let measure = super::product_options::measure_options(&o)?;
        let sweep = super::sweep_options::resolve(&mut o)?;
        let mut source = source_spec(&mut o)?;
        source.sweep = sweep;
        let (frame, hop) = frame_and_hop(&o)?;
        if frame == FrameSize::Whole && source.input.is_live() && source.duration.is_none() {
            return usage("--frame whole is one frame of an input's every sample: a microphone or receiver never ends; give --duration SECONDS, or a fixed --frame N".into());
        }
        let format = o.format.unwrap_or(OutputFormat::Text);
        let output = output_spec(&mut o, format)?;
        let first_input = (output.meta.as_deref()).zip(source.input.first_name());
        if let Some(why) = first_input.and_then(|(meta, first)| {
            crate::sink::sigmf_meta::refusal(meta, &first, source.input_format)
        }) {
            return usage(why);
        }
        let window = o.window.unwrap_or(match frame {
            FrameSize::Whole => WindowKind::Rect,
            FrameSize::Fixed(_) => WindowKind::Hann,
        });
        let (products, scale) = super::product_options::products_and_scale(&mut o, measure, frame)?;
        whole_frame_window_and_scale(frame, window, scale)?;
        if o.realtime && matches!(source.input, Input::Mic(_)) {
            return usage("--realtime paces file and stdin inputs; --mic is live already".into());
        }
        if source.input.has_receiver() {
            products.check_receiver().map_err(FftdError::Usage)?;
        }
        let precision = o.precision.unwrap_or(Precision::F32);
        let engine = engine_spec(&o, &source.input, frame, precision)?;
        let analysis = Analysis {
            frame,
            hop,
            tail: o.tail.unwrap_or(Tail::Pad),
            window,
            scale,
            precision,
            fftshift: o.fftshift,
            dc_remove: o.dc_remove,
            products,
            format,
        };
        let report = ReportSpec {
            stats: o.stats,
            trace: o.trace,
            quiet: o.quiet,
        };
        let run = RunSpec {
            analysis,
            source,
            engine,
            output,
            report,
            serve,
            nats_output,
            alerts,
            record,
        };
        Ok(Settings {
            run,
            fleet: None,
            config: None,
        })
    }

    /// A fleet worker's settings: its blocks come from `io.input`, its rows go to NATS.
    fn fleet_worker(mut o: Options, io: FleetIo) -> Result<Settings> {
        o.file.clear();
        o.output = None;
        o.format = Some(o.format.unwrap_or(OutputFormat::F32));
        o.input_format = None;
        o.idle_exit = None;
        o.rows_per_message = None;
        let mut settings = Self::from_options(Options {
            file: vec!["-".into()],
            ..o
        })?;
        settings.run.source.input = Input::Nats(io.input.clone());
        settings.fleet = Some(io);
        Ok(settings)
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
                "{e} (0 = auto; at most {} samples per batch, and every batch in flight within half of the memory fftd may use)",
                limits::MAX_BATCH_SAMPLES
            ))
        })
    }
}

pub(super) fn usage<T>(message: String) -> Result<T> {
    Err(FftdError::Usage(message))
}

/// The inputs and how to read them: `--file`/`--mic`, rate, radio flags, channels and limits.
fn source_spec(o: &mut Options) -> Result<SourceSpec> {
    let input = match (o.file.is_empty(), o.mic.take()) {
        (false, Some(_)) => return usage("use either --file or --mic, not both".into()),
        (false, None) if o.file.iter().any(String::is_empty) => {
            return usage(
                "--file '': give a file's path, - for stdin, or a receiver's address".into(),
            )
        }
        (false, None) => Input::Files(std::mem::take(&mut o.file)),
        (true, Some(dev)) => Input::Mic(dev),
        (true, None) => {
            return usage(
                "no input: give --file PATH (repeatable, - for stdin) or --mic [DEVICE]".into(),
            )
        }
    };
    check_radio(o.gain.is_some(), o.realtime, &input)?;
    if let Input::Files(files) = &input {
        let soapy = files.iter().filter(|f| crate::source::soapy::is_soapy(f));
        for url in soapy {
            crate::source::soapy::check_address(url).map_err(FftdError::Usage)?;
        }
    }
    if let Some(format) = o.input_format.filter(|_| !input.takes_input_format()) {
        return usage(format!("--input-format {}: reads files and stdin; the microphone and receivers (rtl_tcp://, soapy://) send their own format", format.name()));
    }
    let max_channels = Some(limits::MAX_CHANNELS as u64);
    let channels = (o.channels)
        .map(|c| in_range("--channels", c, 1, max_channels, "channels"))
        .transpose()?;
    if let (Some(c), Some(ChannelSelect::All)) = (channels, o.channel) {
        if c > limits::MAX_CHANNEL_STREAMS {
            return usage(format!(
                "--channels {c} with --channel all: a stream of each channel, at most {} (give --channel N for one)",
                limits::MAX_CHANNEL_STREAMS
            ));
        }
    }
    let max_frames = (o.max_frames)
        .map(|m| in_range("--max-frames", m, 1, None, "frames"))
        .transpose()?;
    let receiver_channel = receiver_channel(o, &input)?;
    Ok(SourceSpec {
        input,
        input_format: o.input_format,
        rate: o.rate,
        gain: o.gain,
        channels,
        channel: o.channel.unwrap_or(match o.cross {
            Some(_) => ChannelSelect::All,
            None => ChannelSelect::Mix,
        }),
        center_freq: o.center_freq,
        realtime: o.realtime,
        max_frames: max_frames.map(|m| m as u64),
        duration: o.duration,
        retry: o.retry,
        receiver_channel,
        sweep: None,
    })
}

/// A SoapySDR device's `--channel N` is its receive channel, read as the one stream: taken out of
/// `--channel` (which picks among a stream's interleaved channels).
fn receiver_channel(o: &mut Options, input: &Input) -> Result<usize> {
    if !input.has_soapy() {
        return Ok(0);
    }
    match o.channel.take() {
        None | Some(ChannelSelect::Mix) => Ok(0),
        Some(ChannelSelect::Index(n)) => Ok(n),
        Some(ChannelSelect::All) => usage(
            "--channel all: a soapy:// input reads one receive channel; give --channel N".into(),
        ),
    }
}

/// `--frame` (default 4096) and `--hop`.
fn frame_and_hop(o: &Options) -> Result<(FrameSize, Option<usize>)> {
    let frame = o.frame.unwrap_or(FrameSize::Fixed(4096));
    if let FrameSize::Fixed(n) = frame {
        if n > limits::MAX_FRAME_SAMPLES {
            return usage(format!(
                "--frame {n}: at most {} samples (2^26) per frame, the largest batch buffer",
                limits::MAX_FRAME_SAMPLES
            ));
        }
    }
    let hop = (o.hop)
        .map(|h| in_range("--hop", h, 1, None, "samples"))
        .transpose()?;
    if frame == FrameSize::Whole && hop.is_some() {
        return usage("--hop has no meaning with --frame whole (one frame per input)".into());
    }
    if frame == FrameSize::Whole && o.tail.is_some() {
        return usage(
            "--tail has no meaning with --frame whole (one frame per input, no tail)".into(),
        );
    }
    Ok((frame, hop))
}

/// `--frame whole` zero-pads the input to a power of two: a window other than rect would span
/// the padding (half a Hann on the samples), and the spectrum and density scales would divide by
/// the padded frame's window sums, not the samples' (helper-38: scipy's periodogram with that
/// nfft reads 2x and 4x higher). Refused rather than written wrong.
fn whole_frame_window_and_scale(frame: FrameSize, window: WindowKind, scale: Scale) -> Result<()> {
    if frame != FrameSize::Whole {
        return Ok(());
    }
    if window != WindowKind::Rect {
        return usage(format!(
            "--window {}: --frame whole zero-pads the input to a power of two, so a window would span the padding; use --window rect, or a fixed --frame N",
            window.name()
        ));
    }
    if matches!(scale, Scale::Spectrum | Scale::Density) {
        return usage(format!(
            "--scale {}: --frame whole zero-pads the input to a power of two, and this scale's window sums would count the padding; use magnitude, power, db or complex, or a fixed --frame N",
            scale.name()
        ));
    }
    Ok(())
}

/// `--rotate` needs files whose names it can make; `--alert` rules and `--events` (issue 27).
fn alert_options(o: &Options, no_nats_output: bool) -> Result<crate::alerts::AlertOptions> {
    crate::sink::rotate::check_rotate(o.rotate, o.output.as_deref(), o.output_dir.as_deref())
        .map_err(FftdError::Usage)?;
    // (`--output -` and `--output /dev/stdout` are stdout too)
    let stdout_named = |p: &std::path::Path| p.as_os_str() == "-" || crate::stdio::names_stdout(p);
    let to_stdout =
        o.output.as_deref().is_none_or(stdout_named) && o.output_dir.is_none() && no_nats_output;
    let alert_conflicts = [
        (o.cross.is_some(), "--cross"),
        (o.frame == Some(FrameSize::Whole), "--frame whole"),
    ];
    let conflict = alert_conflicts.iter().find(|c| c.0).map(|c| c.1);
    let mut options = crate::alerts::check_alerts(
        &o.alert,
        o.events.as_deref(),
        to_stdout,
        conflict,
        o.retry.is_some(),
        (o.levels, o.peaks.is_some_and(|p| p > 0)),
    )
    .map_err(FftdError::Usage)?;
    crate::alerts::level::check_band_columns(&o.alert, o.fmin, o.fmax).map_err(FftdError::Usage)?;
    options.retry = o.retry; // --events nats://: how long a server gone is waited for
    Ok(options)
}

/// Where rows go: `--output`/`--output-dir` (stdout without), `--meta`, the image's options.
fn output_spec(o: &mut Options, format: OutputFormat) -> Result<OutputSpec> {
    let to_stdout =
        o.output_dir.is_none() && o.output.as_ref().is_none_or(|p| p.as_os_str() == "-");
    if format == OutputFormat::Npy && to_stdout {
        return usage(
            "--format npy cannot go to stdout (the header is rewritten at the end with the frame count): use --output PATH or --output-dir DIR".into(),
        );
    }
    let png = Settings::check_png(format, to_stdout, o.png_size, o.png_db)?;
    // ("-" is stdin or stdout elsewhere: as a file's name here it would be a file called "-")
    for (flag, path) in [("--meta", &o.meta), ("--trace", &o.trace)] {
        if path.as_ref().is_some_and(|p| p.as_os_str() == "-") {
            return usage(format!(
                "{flag} -: give a file's path (stdout is the spectra's)"
            ));
        }
    }
    let read = [
        ("--calibration-file", &o.calibration_file),
        ("--serve-token-file", &o.serve_token_file),
        ("--serve-tls-cert", &o.serve_tls_cert),
        ("--serve-tls-key", &o.serve_tls_key),
    ];
    let also_read = (read.into_iter())
        .filter_map(|(flag, path)| Some((flag, path.clone()?)))
        .collect();
    Ok(OutputSpec {
        also_read,
        output: o.output.take().filter(|p| p.as_os_str() != "-"),
        output_dir: o.output_dir.take(),
        meta: o.meta.take(),
        png,
        config: None,
        rotate: o.rotate,
    })
}

/// Engines and batching: `--device`, `--workers`, `--batch`, `--max-latency`.
fn engine_spec(
    o: &Options,
    input: &Input,
    frame: FrameSize,
    precision: Precision,
) -> Result<EngineSpec> {
    // (its range checked where it is read: app::units)
    let max_latency_ms = o.max_latency.unwrap_or(5.0);
    let max_workers = Some(limits::max_workers() as u64);
    let workers = in_range(
        "--workers",
        o.workers.unwrap_or(0),
        0,
        max_workers,
        "threads",
    )
    .map_err(|e| {
        FftdError::Usage(format!(
            "{e} ({} per CPU core; 0 = one per core)",
            limits::WORKERS_PER_CORE
        ))
    })?;
    let workers = match workers {
        0 => limits::cores(),
        n => n,
    };
    let batch = Settings::check_batch(o.batch.unwrap_or(0), frame, precision, workers)?;
    let device = o.device.clone().unwrap_or(DeviceChoice::Auto);
    let auto_on_files = device == DeviceChoice::Auto && matches!(input, Input::Files(_));
    let device_batches = device.names_a_device() || auto_on_files;
    Ok(EngineSpec {
        device,
        batch,
        max_latency_ms,
        workers,
        device_workers: o.workers.filter(|&w| w > 0).map(|w| w as usize),
        device_batches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_config_parses_and_equals_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/fftd.toml");
        let file = ConfigFile::read(&path)
            .map(|f| f.options)
            .expect("config/fftd.toml parses");
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
        assert_eq!(s.analysis.frame, FrameSize::Fixed(512));
        assert_eq!(s.analysis.hop, Some(256));
        assert_eq!(s.analysis.window, WindowKind::Hamming);
    }

    #[test]
    fn unknown_key_and_bad_type_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "frame = 64\nfram = 3\n").expect("write");
        let err = ConfigFile::read(&path)
            .map(|f| f.options)
            .expect_err("unknown key")
            .to_string();
        assert!(err.contains("fram") && err.contains(":2"), "{err}");
        std::fs::write(&path, "hop = \"many\"\n").expect("write");
        let err = ConfigFile::read(&path)
            .map(|f| f.options)
            .expect_err("bad type")
            .to_string();
        assert!(err.contains("hop") || err.contains("integer"), "{err}");
        assert!(err.contains(":1"), "{err}");
    }
}
