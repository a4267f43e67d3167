//! A fleet worker (`fftd --file nats://HOST:PORT/STREAM/CONSUMER --output nats://HOST:PORT/SUBJECT`):
//! takes sample blocks from the work stream's durable pull consumer, frames each block on its own
//! (`block`), transforms its frames with one engine, encodes each row with the run's `--format`
//! and publishes it with headers and a `Nats-Msg-Id`, and acks the block only once every row of
//! it has been acknowledged by JetStream. A worker killed mid-block never acks it: the server
//! redelivers it (after the consumer's ack wait) to another worker, whose rows that had already
//! been stored are dropped by the spectra stream's duplicate window.
//!
//! Threads: this thread frames, transforms and encodes; the NATS client runs on its own runtime
//! (`connect::runtime`), where each block's publish-then-ack is a task. At most
//! `BLOCKS_IN_FLIGHT` blocks wait for acks at once. SIGINT/SIGTERM: no more fetching; the blocks
//! in hand are finished and acked; exit 0. `--idle-exit SECONDS`: exit 0 once the work queue has
//! been empty that long.

use super::block::{decode_samples, BlockHeader};
use super::connect::{one_line, NatsArgs};
use super::jetstream::{stream_capturing, work_consumer};
use super::publish_acked::{publish_all, Acked, Outgoing};
use super::url::NatsUrl;
use crate::config::Settings;
use crate::error::{FftdError, Result};
use crate::fft::{router, Engine, InputKind, Sample, TransformSpec};
use crate::frame::FrameSize;
use crate::pipeline::Signals;
use crate::sink::{make_encoder, Encoder, SpectrumRow, StreamMeta};
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{AckKind, Context, Message};
use async_nats::HeaderMap;
use futures_util::StreamExt;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// Blocks whose rows may wait for acks at once.
const BLOCKS_IN_FLIGHT: usize = 4;
/// Blocks asked for per fetch.
const FETCH_BLOCKS: usize = 2;
/// How long one fetch waits for blocks (also how soon a stop or `--idle-exit` is seen).
const FETCH_WAIT: Duration = Duration::from_millis(500);
/// How long fetching may keep failing (server down) before the worker gives up.
const FETCH_FAILING_FOR: Duration = Duration::from_secs(120);

/// Where a worker reads and writes, and its worker-only options.
#[derive(Clone, Debug)]
pub struct FleetIo {
    pub input: NatsUrl,
    pub stream: String,
    pub consumer: String,
    pub output: NatsUrl,
    pub subject: String,
    /// `--idle-exit`: exit once no block came for this long.
    pub idle_exit: Option<Duration>,
}

/// What a worker did, for `--stats` and `--meta`.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerCounts {
    pub blocks: u64,
    pub rows: u64,
    pub duplicates: u64,
    pub samples: u64,
}

/// Runs a worker until stopped, idle for `--idle-exit`, or failed.
pub fn run_worker(
    settings: &Settings,
    io: &FleetIo,
    nats: &NatsArgs,
    signals: &Signals,
) -> Result<WorkerCounts> {
    match settings.precision {
        crate::config::Precision::F32 => run_typed::<f32>(settings, io, nats, signals),
        crate::config::Precision::F64 => run_typed::<f64>(settings, io, nats, signals),
    }
}

/// The engine a worker transforms with: `auto` and `cpu` are the CPU engine (one thread: run
/// several workers for more cores), anything else what `--device` names.
fn engine_for<T: Sample>(settings: &Settings) -> Result<Box<dyn Engine<T>>> {
    use crate::fft::router::DeviceChoice;
    let choice = match settings.device {
        DeviceChoice::Auto => DeviceChoice::Cpu,
        ref other => other.clone(),
    };
    router::build_engines::<T>(&choice, 1)?
        .into_iter()
        .next()
        .ok_or_else(|| FftdError::Runtime("no FFT engine".into()))
}

fn run_typed<T: Sample>(
    settings: &Settings,
    io: &FleetIo,
    nats: &NatsArgs,
    signals: &Signals,
) -> Result<WorkerCounts> {
    let FrameSize::Fixed(n) = settings.frame else {
        return Err(FftdError::Usage(
            "fleet workers need a fixed --frame N".into(),
        ));
    };
    let hop = settings.hop.unwrap_or(n);
    let mut engine = engine_for::<T>(settings)?;
    let encoder = make_encoder::<T>(settings.format, settings.scale);
    let rt = super::connect::runtime()?;
    let (js, consumer) = rt.block_on(async {
        // the blocks come from the input's server; the rows may go to another one
        let in_client = nats.connect(&io.input, "fftd worker").await?;
        let out_client = match io.output.server() == io.input.server() {
            true => in_client.clone(),
            false => nats.connect(&io.output, "fftd worker (spectra)").await?,
        };
        let in_js = async_nats::jetstream::new(in_client);
        let consumer = work_consumer(&in_js, &io.stream, &io.consumer).await?;
        let out_js = async_nats::jetstream::new(out_client);
        stream_capturing(&out_js, &io.subject).await?;
        Ok::<_, FftdError>((out_js, consumer))
    })?;
    let mut work = Work {
        settings,
        n,
        hop,
        engine: engine.as_mut(),
        encoder: &*encoder,
        input: Vec::new(),
        spectra: Vec::new(),
        shifted: Vec::new(),
    };
    let mut in_flight: VecDeque<JoinHandle<Result<Acked>>> = VecDeque::new();
    let mut counts = WorkerCounts::default();
    let mut idle_since = Instant::now();
    let mut failing_since: Option<Instant> = None;
    let outcome = loop {
        if signals.stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        let fetched = rt.block_on(fetch(&consumer));
        let messages = match fetched {
            Ok(messages) => {
                failing_since = None;
                messages
            }
            Err(e) => {
                idle_since = Instant::now(); // a server away is not an empty queue
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > FETCH_FAILING_FOR {
                    break Err(FftdError::Runtime(format!(
                        "cannot fetch blocks from '{}/{}' for {} s: {e}",
                        io.stream,
                        io.consumer,
                        FETCH_FAILING_FOR.as_secs()
                    )));
                }
                tracing::debug!("fetch failed ({e}); retrying");
                std::thread::sleep(Duration::from_millis(250));
                continue;
            }
        };
        if messages.is_empty() {
            if io
                .idle_exit
                .is_some_and(|limit| idle_since.elapsed() >= limit)
                && in_flight.is_empty()
            {
                break Ok(());
            }
            // a quiet queue is a good moment to collect finished blocks
            if let Err(e) = settle(&rt, &mut in_flight, 0, &mut counts) {
                break Err(e);
            }
            continue;
        }
        idle_since = Instant::now();
        let mut failed = None;
        for message in messages {
            match work.rows_of(&message, &io.subject) {
                Ok(Some((rows, samples))) => {
                    counts.blocks += 1;
                    counts.samples += samples;
                    let js = js.clone();
                    let subject = io.subject.clone();
                    in_flight.push_back(rt.spawn(publish_then_ack(js, subject, rows, message)));
                }
                Ok(None) => {
                    // not a block (logged): never to be redelivered
                    let _ = rt.block_on(message.ack_with(AckKind::Term));
                }
                Err(e) => {
                    let nak = message.ack_with(AckKind::Nak(Some(Duration::from_secs(1))));
                    let _ = rt.block_on(nak);
                    failed = Some(e);
                    break;
                }
            }
            if let Err(e) = settle(&rt, &mut in_flight, BLOCKS_IN_FLIGHT, &mut counts) {
                failed = Some(e);
                break;
            }
        }
        if let Some(e) = failed {
            break Err(e);
        }
    };
    // finish what is in hand (also after an error: those blocks are complete)
    let settled = settle(&rt, &mut in_flight, 0, &mut counts);
    outcome.and(settled)?;
    Ok(counts)
}

/// Waits for the oldest blocks in flight until at most `keep` are left.
fn settle(
    rt: &Runtime,
    in_flight: &mut VecDeque<JoinHandle<Result<Acked>>>,
    keep: usize,
    counts: &mut WorkerCounts,
) -> Result<()> {
    while in_flight.len() > keep {
        let Some(task) = in_flight.pop_front() else {
            break;
        };
        let acked = rt
            .block_on(task)
            .map_err(|e| FftdError::Runtime(format!("publishing task failed: {e}")))??;
        counts.rows += acked.stored + acked.duplicates;
        counts.duplicates += acked.duplicates;
    }
    Ok(())
}

/// Up to `FETCH_BLOCKS` blocks, waiting at most `FETCH_WAIT`.
async fn fetch(consumer: &PullConsumer) -> std::result::Result<Vec<Message>, String> {
    let mut batch = consumer
        .fetch()
        .max_messages(FETCH_BLOCKS)
        .expires(FETCH_WAIT)
        .messages()
        .await
        .map_err(|e| one_line(&e.to_string()))?;
    let mut messages = Vec::new();
    while let Some(message) = batch.next().await {
        messages.push(message.map_err(|e| one_line(&e.to_string()))?);
    }
    Ok(messages)
}

/// Publishes a block's rows, then acks the block (the server confirms the ack). A failed ack is
/// only logged: the block comes back after the ack wait and its rows are deduplicated.
async fn publish_then_ack(
    js: Context,
    subject: String,
    rows: Vec<Outgoing>,
    block: Message,
) -> Result<Acked> {
    let acked = publish_all(&js, &subject, rows).await?;
    let started = Instant::now();
    loop {
        match block.double_ack().await {
            Ok(()) => break,
            Err(e) if started.elapsed() < Duration::from_secs(30) => {
                tracing::debug!("ack failed ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => {
                tracing::warn!("a block's ack was lost ({e}); it will be redelivered and its rows deduplicated");
                break;
            }
        }
    }
    Ok(acked)
}

/// A worker's transform state: the engine, the encoder and scratch buffers.
struct Work<'a, T: Sample> {
    settings: &'a Settings,
    n: usize,
    hop: usize,
    engine: &'a mut dyn Engine<T>,
    encoder: &'a dyn Encoder<T>,
    input: Vec<T>,
    spectra: Vec<T>,
    shifted: Vec<T>,
}

impl<T: Sample> Work<'_, T> {
    /// The rows of one block, ready to publish, and its sample count. None for a message that
    /// is no block (it is terminated so it is never redelivered). A block cut with another
    /// framing is an error (the block goes back to the queue for a worker that matches).
    fn rows_of(
        &mut self,
        message: &Message,
        subject: &str,
    ) -> Result<Option<(Vec<Outgoing>, u64)>> {
        let header = match BlockHeader::from_headers(message.headers.as_ref()) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(
                    "skipping a message on '{}' that is no fftd block: {e}",
                    message.subject
                );
                return Ok(None);
            }
        };
        if header.n != self.n || header.hop != self.hop {
            return Err(FftdError::Usage(format!(
                "{} was cut with --frame {} --hop {}; this worker runs --frame {} --hop {}: start workers with the publisher's framing",
                header.describe(),
                header.n,
                header.hop,
                self.n,
                self.hop
            )));
        }
        let samples = match decode_samples(&header, &message.payload) {
            Ok(samples) => samples,
            Err(e) => {
                // a damaged block would fail every worker the same way: never redelivered
                tracing::warn!("skipping {}: {e}", header.describe());
                return Ok(None);
            }
        };
        self.frame_block(&header, &samples);
        let spec = TransformSpec {
            n: self.n,
            kind: header.kind,
            window: self.settings.window,
            scale: self.settings.products.engine_scale(self.settings.scale),
            rate: header.rate,
        };
        self.engine
            .process(&spec, &self.input, header.frames, &mut self.spectra)
            .map_err(|e| FftdError::Runtime(format!("FFT engine {}: {e}", self.engine.name())))?;
        Ok(Some((
            self.encode_rows(&header, &spec, subject),
            header.samples as u64,
        )))
    }

    /// Frame j of the block: samples `j·hop .. j·hop + n` of the block, zero-padded past its end.
    fn frame_block(&mut self, header: &BlockHeader, samples: &[f32]) {
        let w = header.kind.width();
        let frame_values = self.n * w;
        self.input.clear();
        self.input.resize(header.frames * frame_values, T::zero());
        for j in 0..header.frames {
            let from = (j * self.hop * w).min(samples.len());
            let to = (from + frame_values).min(samples.len());
            let dest = &mut self.input[j * frame_values..];
            for (d, s) in dest.iter_mut().zip(&samples[from..to]) {
                *d = T::of_f64(f64::from(*s));
            }
        }
    }

    /// One message per row: the row in the run's format, headers saying what it is.
    fn encode_rows(
        &mut self,
        header: &BlockHeader,
        spec: &TransformSpec,
        subject: &str,
    ) -> Vec<Outgoing> {
        let stream = StreamMeta {
            id: header.stream,
            input: header.source.clone(),
            channel: header.channel,
            rate: header.rate,
            kind: header.kind,
            fftshift: self.settings.fftshift,
            columns: None,
        };
        let width = spec.values_out();
        let bins = spec.bins();
        let scale = self.settings.scale.name();
        let mut rows = Vec::with_capacity(header.frames);
        for j in 0..header.frames {
            let frame = header.first_frame + j as u64;
            let mut values = &self.spectra[j * width..(j + 1) * width];
            if stream.fftshift && stream.kind == InputKind::Complex {
                self.shifted.clear();
                self.shifted.extend_from_slice(values);
                self.shifted
                    .rotate_left(bins.div_ceil(2) * spec.scale.values_per_bin());
                values = &self.shifted;
            }
            let time_s = (frame * self.hop as u64) as f64 / header.rate;
            let row = SpectrumRow {
                stream: &stream,
                frame,
                time_s,
                n: self.n,
                values,
            };
            let mut bytes = Vec::with_capacity(width * 4);
            self.encoder.encode(&row, &mut bytes);
            rows.push(Outgoing {
                headers: row_headers(header, frame, time_s, (scale, bins, self.n), subject),
                payload: bytes.into(),
            });
        }
        rows
    }
}

/// A row's headers: `source`, `stream`, `frame`, `time_s`, `scale`, `bins`, `n`, and its
/// `Nats-Msg-Id` (`row_id`).
fn row_headers(
    block: &BlockHeader,
    frame: u64,
    time_s: f64,
    (scale, bins, n): (&str, usize, usize),
    subject: &str,
) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("source", block.source.as_str());
    h.insert("stream", block.stream.to_string().as_str());
    h.insert("frame", frame.to_string().as_str());
    h.insert("time_s", ryu::Buffer::new().format(time_s));
    h.insert("scale", scale);
    h.insert("bins", bins.to_string().as_str());
    h.insert("n", n.to_string().as_str());
    h.insert(
        "Nats-Msg-Id",
        row_id(subject, &block.source, block.stream, frame).as_str(),
    );
    h
}

/// The dedup id of a row: `<subject>:<source>/<stream>/<frame>`. The server deduplicates per
/// JetStream stream, not per subject: with the subject in the id, two analyses of one recording
/// published to two subjects of one stream never drop each other's rows.
pub fn row_id(subject: &str, source: &str, stream: usize, frame: u64) -> String {
    format!("{subject}:{source}/{stream}/{frame}")
}
