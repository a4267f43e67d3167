//! `fftd publish`: reads recordings (or live capture) exactly as a local run reads them — the
//! same formats, channels and stream numbers — cuts each stream into frame-aligned blocks
//! (`cutter`) and publishes them to a subject of the work stream with JetStream acks. Each block
//! carries a `Nats-Msg-Id` (`ids`), so a retried publish is deduplicated by the server. Every
//! publish is a run of its own (a new run id), so publishing a source again, or restarting a
//! `--mic` publisher, sends new blocks; `--run-id` repeats an interrupted run's id instead, and
//! its blocks already stored are dropped as duplicates.
//!
//! Blocks of up to 1 MiB (`cutter::default_block_frames`) are spread over the work stream's
//! shards and published in small batches (`fleet::block_sender`); a window per shard waits for
//! acks while the next blocks are cut and sent, so the servers' byte rate paces the publish and
//! memory is bounded whatever one read yields.
//! SIGINT/SIGTERM end the inputs early: live capture has its tail frames cut, as a local run does;
//! a file publishes its whole blocks read so far and leaves the rest to a publish resumed with
//! `--run-id` (which cuts the same blocks); everything cut is published before exit (a second
//! one quits at once). Live input sends the whole frames received so far as a block every
//! `--max-latency`, so a frame waits at most that (and one read) for its block.

use crate::app::fleet_args::NatsFlags;
use crate::error::{FftdError, Result};
use crate::fleet::block::StreamShape;
use crate::fleet::block_sender::BlockSender;
use crate::fleet::cutter::{default_block_frames, frames_per_block, BlockCutter};
use crate::fleet::ids::{check_id, check_run_id, new_run_id};
use crate::fleet::jetstream::patiently;
use crate::fleet::outage::Outages;
use crate::fleet::publish_acked::publishing_context;
use crate::fleet::shards::publish_subjects;
use crate::frame::{FrameSize, Tail};
use crate::pipeline::plan::{plan_streams, Reading, SequentialInput, SourcePlan};
use crate::pipeline::spec::RunSpec;
use crate::source::channels::ChannelSelect;
use crate::source::InputFormat;
use crate::types::nats_url::NatsUrl;
use crate::types::Signals;
use std::sync::atomic::Ordering;

/// Sample frames read per block of input.
const READ_FRAMES: usize = 1 << 14;
/// Threads of the NATS client's runtime at most (fewer on fewer cores).
const MOST_THREADS: usize = 8;

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// Where the blocks go: nats://HOST:PORT/SUBJECT, a subject of the work stream
    /// (tls:// for TLS; USER:PASS@ or TOKEN@ before the host, or the --nats-* flags).
    #[arg(long, value_name = "URL")]
    pub to: String,

    /// Input file (repeatable: each file is its own source); `-` reads stdin.
    #[arg(long = "file", value_name = "PATH")]
    pub file: Vec<String>,

    /// Capture live from a microphone (default device, or DEVICE from `fftd devices`).
    #[arg(
        long,
        value_name = "DEVICE",
        num_args = 0..=1,
        default_missing_value = "",
        allow_negative_numbers = true
    )]
    pub mic: Option<String>,

    /// Source id of each input, in --file order (row ids and dedup ids start with it; give each
    /// recording of a site a stable, unique one) [default: the input as given].
    #[arg(long = "source-id", value_name = "ID")]
    pub source_id: Vec<String>,

    /// Run id of this publish [default: a new random one]. Give an interrupted publish's id (its
    /// error says it) to publish the same input again without duplicating what was stored.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,

    /// Frames per block [default: the most frames, a power of two, whose block fits in 1 MiB and
    /// the server's max_payload].
    #[arg(long, value_name = "N", value_parser = crate::types::whole_in::<u32>(1, 65536))]
    pub block_frames: Option<u32>,

    /// NATS connections the blocks go out on, the work stream's shards spread over them
    /// (nats-server stores what one connection sends one message at a time) [default: one per
    /// shard].
    #[arg(long, value_name = "N", value_parser = crate::types::whole_in::<u32>(1, 64))]
    pub connections: Option<u32>,

    /// Input file format [default: by extension].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,

    /// Sample rate in Hz for inputs without a header (a k, M or G suffix scales it: 2.4M)
    /// [default: 1].
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = crate::app::units::rate_hz)]
    pub rate: Option<f64>,

    /// Interleaved channels in raw files; channels to capture with --mic.
    #[arg(long, value_name = "C")]
    pub channels: Option<i64>,

    /// Which channel(s): mix, N, all (one stream each) [default: mix].
    #[arg(long, value_name = "mix|N|all")]
    pub channel: Option<ChannelSelect>,

    /// Samples per frame: workers must run the same --frame [default: 4096].
    #[arg(long, value_name = "N")]
    pub frame: Option<FrameSize>,

    /// Samples between frame starts: workers must run the same --hop [default: the frame size].
    #[arg(long, value_name = "H")]
    pub hop: Option<i64>,

    /// Samples after the last whole frame: pad or drop [default: pad].
    #[arg(long, value_enum)]
    pub tail: Option<Tail>,

    /// Live input (--mic, stdin): milliseconds (or with a unit: 0.5s; at most 60000 ms) a whole
    /// frame may wait for its block; a block of the frames received so far goes out then
    /// [default: 100].
    #[arg(long, value_name = "MS", value_parser = max_latency_ms)]
    pub max_latency: Option<f64>,

    /// When the NATS server goes away: retry publishing forever, N attempts in a row, or for at
    /// most a DURATION per outage (90s, 1h), waiting 0.5 s doubling to 30 s between attempts;
    /// each outage is a log line and counted in --stats [default: retry for 120 s].
    #[arg(long, value_name = "forever|N|DURATION")]
    pub retry: Option<crate::source::retry_policy::RetryPolicy>,

    /// Print blocks, frames and samples published to stderr at exit.
    #[arg(long)]
    pub stats: bool,

    #[command(flatten)]
    pub nats: NatsFlags,
}

/// `fftd publish --max-latency`: in ms (a bare number is ms), more than 0 and at most 60 000.
fn max_latency_ms(text: &str) -> std::result::Result<f64, String> {
    let ms = crate::app::units::in_unit(text, crate::types::duration::MILLISECOND)?;
    match ms > 0.0 && ms <= crate::limits::MAX_LATENCY_MS {
        true => Ok(ms),
        false => Err("must be more than 0 and at most 60000 ms".into()),
    }
}

/// How long a live frame may wait for its block unless `--max-latency` says.
const DEFAULT_MAX_LATENCY_MS: f64 = 100.0;

/// Publishes the inputs of `spec` (its source and framing: `app::config::publish_spec`).
pub fn run_publish(args: &PublishArgs, spec: &RunSpec, signals: &Signals) -> Result<()> {
    let url = NatsUrl::parse("--to", &args.to).map_err(FftdError::Usage)?;
    let subject = url.subject("--to").map_err(FftdError::Usage)?;
    let run = run_id_of(args)?;
    if spec.source.input.reads_stdin() {
        crate::stdio::refuse_closed_stdin()?; // (a closed stdin would read as an empty input)
    }
    for id in &args.source_id {
        check_id("--source-id", id).map_err(FftdError::Usage)?; // before any input is opened
    }
    let settings = spec;
    let plan = plan_streams(settings, &signals.stop, Reading::Sequential)?;
    let inputs = plan.sequential.len();
    if !args.source_id.is_empty() && args.source_id.len() != inputs {
        return Err(FftdError::Usage(format!(
            "--source-id given {} time(s) for {inputs} input(s): give one per --file, or none",
            args.source_id.len()
        )));
    }
    check_default_ids(&plan.sequential, &args.source_id)?;
    // a thread per connection to write its socket, as many as the cores
    let rt = crate::fleet::connect::runtime_with(MOST_THREADS)?;
    let outages = Outages::new(args.retry, url.to_string());
    let (connections, max_payload, shards) = rt.block_on(async {
        let nats = args.nats.spec();
        let watched = Some(outages.clone());
        let client = nats.connect_watched(&url, "fftd publish", watched).await?;
        // the server's INFO: no message may be larger
        let max_payload = client.server_info().max_payload;
        let js = publishing_context(client);
        let shards = patiently(|| publish_subjects(&js, &subject)).await?;
        let wanted = args.connections.map_or(shards.len(), |c| c as usize);
        let mut connections = vec![js];
        for k in 1..wanted.min(shards.len()) {
            let name = format!("fftd publish ({})", k + 1);
            let more = nats.connect_another(&url, &name, outages.clone()).await?;
            connections.push(publishing_context(more));
        }
        Ok::<_, FftdError>((connections, max_payload, shards))
    })?;
    let mut sender = BlockSender::new(&rt, &connections, (subject, shards), outages.clone());
    let mut shape = ShapeOf {
        settings,
        source_id: None,
        live: false,
        run: &run,
        max_payload,
        block_frames: args.block_frames,
        max_latency: std::time::Duration::from_secs_f64(
            args.max_latency.unwrap_or(DEFAULT_MAX_LATENCY_MS) / 1000.0,
        ),
    };
    let read = publish_sources(
        plan.sequential,
        (&args.file, &args.source_id),
        &mut shape,
        &mut sender,
        signals,
    );
    finish_publish(args, &run, read, &mut sender, signals)?;
    if args.stats && outages.gaps() > 0 {
        eprintln!(
            "fftd publish: the NATS server was away {} time(s), {} attempt(s) made meanwhile",
            outages.gaps(),
            outages.retries()
        );
    }
    Ok(())
}

/// `--run-id` checked (files only), or a new run id; and `--max-latency`, which only live
/// input (the microphone, stdin) waits by.
fn run_id_of(args: &PublishArgs) -> Result<String> {
    let live = args.mic.is_some() || args.file.iter().any(|f| f == "-"); // (a new run each time)
    if let Some(ms) = args.max_latency.filter(|_| !live) {
        return Err(FftdError::Usage(format!(
            "--max-latency {} ms: how long a live frame (--mic, stdin) waits for its block; files are sent in whole blocks",
            crate::types::shown(ms)
        )));
    }
    match &args.run_id {
        Some(_) if live => Err(FftdError::Usage(
            "--run-id resumes a publish of the same files: live capture and stdin start a new run each time".into(),
        )),
        Some(id) => check_run_id(id)
            .map(|_| id.clone())
            .map_err(FftdError::Usage),
        None => Ok(new_run_id()),
    }
}

/// Publishes what was cut (also after a stop or a read error) and waits for every ack; the
/// error of a file publish says how to resume it; `--stats`.
fn finish_publish(
    args: &PublishArgs,
    run: &str,
    read: Result<()>,
    sender: &mut BlockSender<'_>,
    signals: &Signals,
) -> Result<()> {
    let resumable = args.mic.is_none() && !args.file.iter().any(|f| f == "-");
    let unsent = !sender.is_idle();
    if signals.stop.load(Ordering::Relaxed) && unsent {
        tracing::info!("stopping: publishing what was read first (Ctrl-C again quits at once)");
    }
    let sent = read.and_then(|_| sender.settle_all());
    if signals.stop.load(Ordering::Relaxed) && resumable {
        tracing::info!(
            "interrupted: publish the same files again with --run-id {run} to send the rest"
        );
    }
    if let (Err(FftdError::Runtime(message)), true) = (&sent, resumable) {
        return Err(FftdError::Runtime(format!(
            "{message} (this was run {run}: publish the same files again with --run-id {run} to send only what is missing)"
        )));
    }
    sent?;
    if args.stats {
        let p = &sender.published;
        eprintln!(
            "fftd publish: run {run}: {} blocks, {} frames, {} samples to '{}' over {} shard(s) on {} connection(s) ({} already there)",
            p.blocks,
            p.frames,
            p.samples,
            crate::types::escaped(sender.subject()),
            sender.shard_count(),
            sender.connection_count(),
            sender.acked().duplicates
        );
    }
    Ok(())
}

/// Every input's source id (given, or its name) fit for a header, before anything is sent.
fn check_default_ids(inputs: &[SequentialInput], given: &[String]) -> Result<()> {
    for (k, input) in inputs.iter().enumerate() {
        let SequentialInput::Open(plan) = input else {
            continue;
        };
        let name = &plan.source.info().name;
        let id = given.get(k).unwrap_or(name);
        check_id(&format!("source id of {name}"), id)
            .map_err(|e| FftdError::Usage(format!("{e} (name it with --source-id)")))?;
    }
    Ok(())
}

/// Publishes every input in turn, each under its `--source-id` when given.
fn publish_sources(
    inputs: Vec<SequentialInput>,
    (files, source_ids): (&[String], &[String]),
    shape: &mut ShapeOf<'_>,
    sender: &mut BlockSender<'_>,
    signals: &Signals,
) -> Result<()> {
    for (k, input) in inputs.into_iter().enumerate() {
        let SequentialInput::Open(source) = input else {
            continue; // Reading::Sequential opens every input
        };
        shape.source_id = source_ids.get(k).cloned();
        shape.live = files.get(k).is_none_or(|f| f == "-");
        publish_source(source, shape, sender, signals)?;
    }
    Ok(())
}

/// How a source's streams are cut.
struct ShapeOf<'a> {
    settings: &'a RunSpec,
    source_id: Option<String>,
    /// Live capture or stdin: a stop ends it (nothing to resume).
    live: bool,
    run: &'a str,
    max_payload: usize,
    block_frames: Option<u32>,
    /// Live input: how long a whole frame may wait for its block (`--max-latency`).
    max_latency: std::time::Duration,
}

/// Reads one source to its end (or a stop), cutting and sending its streams' blocks.
fn publish_source(
    mut plan: SourcePlan,
    shape: &ShapeOf<'_>,
    sender: &mut BlockSender<'_>,
    signals: &Signals,
) -> Result<()> {
    let info = plan.source.info().clone();
    let mut cutters = cutters_for(&plan, shape)?;
    let mut block = Vec::new();
    let mut per_stream: Vec<Vec<f64>> = vec![Vec::new(); cutters.len()];
    let mut flushed = std::time::Instant::now();
    while !signals.stop.load(Ordering::Relaxed) {
        block.clear();
        if plan.source.read(&mut block, READ_FRAMES)? == 0 {
            break;
        }
        if plan.source.take_gap() > 0 {
            tracing::warn!(
                "{}: samples lost in capture; frames after the gap are shifted",
                info.name
            );
        }
        plan.splitter.split(&mut block, &mut per_stream);
        for (cutter, samples) in cutters.iter_mut().zip(&per_stream) {
            cutter.push(samples, &mut |b| sender.add(b));
        }
        // a live frame waits at most --max-latency (and one read) for its block: files never,
        // so their blocks (and ids) are the same each time they are published
        if shape.live && flushed.elapsed() >= shape.max_latency {
            for cutter in cutters.iter_mut() {
                cutter.flush_whole(&mut |b| sender.add(b));
            }
            if !sender.failed() {
                sender.flush()?;
            }
            flushed = std::time::Instant::now();
        }
        sender.take_failure()?;
    }
    // a stop ends a live capture (its tail rule applies) but only interrupts a file
    let interrupted = signals.stop.load(Ordering::Relaxed) && !shape.live;
    let mut unsent = 0;
    for cutter in cutters.iter_mut() {
        match interrupted {
            true => unsent += cutter.cut_short(),
            false => cutter.finish(&mut |b| sender.add(b)),
        }
    }
    if unsent > 0 {
        tracing::info!(
            "{}: {unsent} frame(s) read after the last whole block are left for the resumed publish",
            info.name
        );
    }
    sender.take_failure()
}

/// One block cutter per stream of the source, blocks sized by `--block-frames` or
/// `cutter::default_block_frames`, within the server's max_payload.
fn cutters_for(plan: &SourcePlan, shape: &ShapeOf<'_>) -> Result<Vec<BlockCutter>> {
    let info = plan.source.info();
    let FrameSize::Fixed(n) = shape.settings.analysis.frame else {
        return Err(FftdError::Usage(
            "fftd publish needs a fixed --frame N".into(),
        ));
    };
    let hop = shape.settings.analysis.hop_for(n);
    let width = info.kind.width();
    // room for the headers: the payload limit less 4 KiB
    let budget = shape.max_payload.saturating_sub(4096).max(4096);
    let block_frames = match shape.block_frames {
        Some(wanted) => frames_per_block(n, hop, width, budget, wanted as usize),
        None => default_block_frames(n, hop, width, budget),
    }
    .ok_or_else(|| {
        FftdError::Usage(format!(
            "--frame {n}: one frame ({} bytes) does not fit in the server's max_payload ({} bytes)",
            n * width * 4,
            shape.max_payload
        ))
    })?;
    let source_id = shape.source_id.clone().unwrap_or_else(|| info.name.clone());
    Ok((0..plan.splitter.streams())
        .map(|k| {
            let stream = StreamShape {
                source: source_id.clone(),
                run: shape.run.to_string(),
                stream: plan.first_stream + k,
                channel: (info.channels > 1)
                    .then(|| plan.splitter.channel_of(k))
                    .flatten(),
                rate: info.rate,
                kind: info.kind,
                n,
                hop,
                tail: shape.settings.analysis.tail,
            };
            BlockCutter::new(stream, block_frames)
        })
        .collect())
}
