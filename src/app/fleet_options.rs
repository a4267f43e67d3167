//! The fleet's flags of a run checked: a worker's addresses (`--file nats://...`, with the
//! options a worker cannot take refused) and a local run's `--output nats://...`.

use super::options::Options;
use crate::error::{FftdError, Result};
use crate::fft::router::DeviceChoice;
use crate::fleet::output::NatsOutput;
use crate::fleet::worker::FleetIo;
use crate::frame::FrameSize;
use crate::sink::OutputFormat;

/// A fleet worker's addresses (`--file nats://HOST:PORT/STREAM/CONSUMER`,
/// `--output nats://HOST:PORT/SUBJECT`), and the flags a worker cannot take refused: everything
/// that needs a whole stream in one process (averages, limits, images, the live view).
pub(super) fn check_fleet(o: &Options) -> Result<Option<FleetIo>> {
    use crate::types::nats_url::{is_nats_url, NatsUrl};
    let usage = |m: &str| Err(FftdError::Usage(m.to_string()));
    // (its range checked where it is read: app::units)
    let idle_exit = o.idle_exit.map(std::time::Duration::from_secs_f64);
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
    let refused = refused_for_workers(o);
    if let Some(flag) = refused {
        return Err(FftdError::Usage(format!(
            "{flag} is not available to fleet workers (docs/fleet.md)"
        )));
    }
    // issue 28: averaging in workers, whole groups a block
    if let Some(mode) = o.average_mode {
        crate::fleet::average::check_mode(mode).map_err(FftdError::Usage)?;
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
        rows_per_message: o.rows_per_message.unwrap_or_default(),
        retry: o.retry,
    }))
}

/// The first option given that a fleet worker cannot take, with why (None: all fine).
fn refused_for_workers(o: &Options) -> Option<&'static str> {
    let refused = [
        (o.mic.is_some(), "--mic"),
        (o.output_dir.is_some(), "--output-dir"),
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
    refused
        .iter()
        .find(|(given, _)| *given)
        .map(|(_, flag)| *flag)
}

/// `--output nats://...` of a local run: its subject, and the formats it cannot take refused
/// (one message per row: no whole-file formats). Rows default to f32.
pub(super) fn nats_output(o: &mut Options) -> Result<Option<NatsOutput>> {
    use crate::types::nats_url::{is_nats_url, NatsUrl};
    let text = o.output.as_ref().and_then(|p| p.to_str()).unwrap_or("");
    if !is_nats_url(text) {
        return match o.rows_per_message {
            Some(_) => Err(FftdError::Usage(
                "--rows-per-message is for --output nats://HOST:PORT/SUBJECT".into(),
            )),
            None => Ok(None),
        };
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
        rows_per_message: o.rows_per_message.unwrap_or_default(),
        retry: o.retry,
    }))
}
