//! Fleet mode: many fftd processes on many hosts sharing the work through NATS JetStream
//! (docs/fleet.md).
//!
//! edge capture → `fftd publish` (`publish`: frame-aligned sample `block`s cut by `cutter`) →
//! a work-queue stream → N workers (`worker`: `fftd --file nats://…/STREAM/CONSUMER
//! --output nats://…/SUBJECT`, rows published with acks and dedup ids by `publish_acked`) → a
//! spectra stream that dashboards and tools subscribe to. The work stream may be split over
//! several streams (`shards`) for the server's sake. `jetstream` looks up and creates
//! (`fftd fleet setup`) the streams and the consumer; `connect` holds the credentials, TLS and the
//! client's runtime; `types::nats_url` parses and redacts addresses.

pub(crate) mod average;
pub(crate) mod batch;
pub(crate) mod block;
pub(crate) mod block_sender;
pub mod connect;
pub(crate) mod cutter;
pub(crate) mod drained;
pub(crate) mod fetch;
pub(crate) mod ids;
pub(crate) mod in_flight;
pub(crate) mod jetstream;
pub(crate) mod outage;
pub(crate) mod output;
pub(crate) mod payloads;
pub(crate) mod publish_acked;
pub(crate) mod rows;
pub(crate) mod shards;
pub(crate) mod undelivered;
pub mod worker;

use crate::error::{FftdError, Result};
use crate::types::nats_url::NatsUrl;
use connect::NatsArgs;
use std::time::Duration;

/// `fftd fleet setup`'s flags (`app::fleet_args::SetupFlags`) as plain values.
#[derive(Debug)]
pub(crate) struct SetupArgs {
    /// `--server`: nats://HOST:PORT or tls://HOST:PORT (several nodes: nats://A:4222,B:4222).
    pub server: String,
    /// `--work-stream`: the work stream (work-queue retention) the blocks go to.
    pub work_stream: String,
    /// `--work-subject`s: what the work stream captures.
    pub work_subjects: Vec<String>,
    /// `--consumer`: the durable pull consumer the workers share.
    pub consumer: String,
    /// `--ack-wait`: seconds a worker has to ack a block.
    pub ack_wait: f64,
    /// `--max-deliver`: deliveries of one block at most.
    pub max_deliver: i64,
    /// `--spectra-stream`: the stream that stores the spectra rows.
    pub spectra_stream: String,
    /// `--spectra-subject`s: what the spectra stream captures.
    pub spectra_subjects: Vec<String>,
    /// `--duplicate-window`: seconds within which a message id seen again is dropped.
    pub duplicate_window: f64,
    /// `--memory`: keep the streams in memory instead of files.
    pub memory: bool,
    /// `--recreate-consumer`: delete the consumer and create it again.
    pub recreate_consumer: bool,
    /// `--replicas` of each stream.
    pub replicas: usize,
    /// `--shards`: streams the work is spread over (`shards`).
    pub shards: usize,
    /// The `--nats-*` connection flags.
    pub nats: NatsArgs,
}

fn seconds(flag: &str, v: f64) -> Result<Duration> {
    match v.is_finite() && v > 0.0 && v <= 86_400.0 * 365.0 {
        true => Ok(Duration::from_secs_f64(v)),
        false => Err(FftdError::Usage(format!(
            "{flag} {v}: must be a positive number of seconds"
        ))),
    }
}

/// `fftd fleet setup`: the streams and the consumer created (or left as they are).
pub(crate) fn run_setup(args: &SetupArgs) -> Result<()> {
    let url = NatsUrl::parse("--server", &args.server).map_err(FftdError::Usage)?;
    if args.max_deliver < 1 || args.replicas < 1 {
        return Err(FftdError::Usage(
            "--max-deliver and --replicas must be at least 1".into(),
        ));
    }
    let layout = jetstream::FleetLayout {
        work_stream: args.work_stream.clone(),
        work_subjects: args.work_subjects.clone(),
        consumer: args.consumer.clone(),
        ack_wait: seconds("--ack-wait", args.ack_wait)?,
        max_deliver: args.max_deliver,
        spectra_stream: args.spectra_stream.clone(),
        spectra_subjects: args.spectra_subjects.clone(),
        duplicate_window: seconds("--duplicate-window", args.duplicate_window)?,
        memory: args.memory,
        replicas: args.replicas,
        shards: args.shards,
        recreate_consumer: args.recreate_consumer,
    };
    // each delivery may hold a block for its ack wait plus a worker's retries (progress acks
    // keep it meanwhile), and its rows may be published again up to the last delivery
    let retries = outage::DEFAULT_RETRY_FOR + in_flight::ACK_RETRY_FOR;
    let covered = layout.max_deliver as f64 * (layout.ack_wait + retries).as_secs_f64();
    if layout.duplicate_window.as_secs_f64() < covered {
        tracing::warn!(
            "--duplicate-window {} s is shorter than --max-deliver × (--ack-wait + {} s of retries) = {covered} s: a block redelivered late may store its rows twice",
            args.duplicate_window,
            retries.as_secs()
        );
    }
    let rt = connect::runtime()?;
    let report = rt.block_on(async {
        let client = args.nats.connect(&url, "fftd fleet setup").await?;
        jetstream::set_up(&async_nats::jetstream::new(client), &layout).await
    })?;
    for line in report {
        println!("{line}");
    }
    Ok(())
}

/// A worker's `--meta`: the addresses (redacted), the framing and what it did.
pub fn write_worker_meta(
    path: &std::path::Path,
    analysis: &crate::sink::analysis::Analysis,
    io: &worker::FleetIo,
    counts: &worker::WorkerCounts,
) -> Result<()> {
    let hop = analysis.fixed().map_or(0, |(_, hop)| hop);
    let meta = serde_json::json!({
        "input": io.input.to_string(),
        "output": io.output.to_string(),
        "subject": io.subject,
        "frame": analysis.frame.to_string(),
        "hop": hop,
        "window": analysis.window.name(),
        "scale": analysis.scale.name(),
        "format": analysis.format.name(),
        "precision": analysis.precision.name(),
        "blocks": counts.blocks,
        "blocks_given_up": counts.given_up,
        "blocks_unreadable": counts.unreadable,
        "rows": counts.rows,
        "messages": counts.messages,
        "duplicate_messages": counts.duplicates,
        "samples": counts.samples,
        "nats_outages": counts.outages,
        "nats_retries": counts.retries,
    });
    let text = serde_json::to_string_pretty(&meta)
        .map_err(|e| FftdError::Runtime(format!("--meta: {e}")))?;
    std::fs::write(path, text + "\n").map_err(|e| FftdError::io(path, e))
}
