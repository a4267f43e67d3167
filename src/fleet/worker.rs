//! A fleet worker (`fftd --file nats://HOST:PORT/STREAM/CONSUMER --output nats://HOST:PORT/SUBJECT`):
//! takes sample blocks from the work stream's durable pull consumer (every shard's: `shards`),
//! turns each into rows
//! (`rows`), publishes them with acks and dedup ids, and acks the block only once every row of
//! it has been acknowledged by JetStream. A worker killed mid-block never acks it: the server
//! redelivers it (after the consumer's ack wait) to another worker, whose rows that had already
//! been stored are dropped by the spectra stream's duplicate window. While a block's rows are
//! being published (retries during a server outage included) the worker tells the server it is
//! still working on it (progress acks every third of the ack wait), so a slow block is not
//! handed to a second worker.
//!
//! Threads: this thread frames, transforms and encodes; the NATS client runs on its own runtime
//! (`connect::runtime`), where each block's publish-then-ack is a task and the next fetch is
//! made while the blocks in hand are transformed. At most `BLOCKS_IN_FLIGHT` blocks wait for
//! acks at once. SIGINT/SIGTERM: no more fetching; the blocks
//! in hand get `STOP_GRACE` to be published and acked, the rest are left to be redelivered; exit
//! 0. `--idle-exit SECONDS`: exit once the work queue has been empty that long (blocks another
//! worker holds are waited for: `drained`), with an error when blocks were left behind
//! (`undelivered`).

use super::batch::{Packing, RowsPerMessage};
use super::connect::NatsArgs;
use super::drained::Drained;
use super::fetch::{Prefetch, FETCH_BLOCKS};
use super::in_flight::{InFlight, STOP_POLL};
use super::jetstream::{patiently, stream_capturing};
use super::outage::{Attempts, Outages};
use super::publish_acked::publishing_context;
use super::rows::Work;
use super::shards::work_shards;
use super::undelivered::{self, GivenUp};
use crate::error::{FftdError, Result};
use crate::fft::router::DeviceChoice;
use crate::fft::{router, Engine};
use crate::sink::analysis::Analysis;
use crate::sink::make_encoder;
use crate::types::nats_url::NatsUrl;
use crate::types::Sample;
use crate::types::Signals;
use crate::types::WithSample;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream::Stream;
use async_nats::jetstream::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// Blocks whose rows may wait for acks at once (each block's publish and ack is a task of its
/// own: acks are collected as they come).
const BLOCKS_IN_FLIGHT: usize = 16;
/// After SIGINT/SIGTERM: how long the blocks in hand may take before they are left to the server.
const STOP_GRACE: Duration = Duration::from_secs(5);

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
    /// `--rows-per-message` (`batch`).
    pub rows_per_message: RowsPerMessage,
    /// `--retry`: how long fetches and publishes are retried while a server is away (`outage`).
    pub retry: Option<crate::source::retry_policy::RetryPolicy>,
}

/// What a worker did, for `--stats` and `--meta`.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerCounts {
    pub blocks: u64,
    pub rows: u64,
    /// Messages the rows went out in (`batch`).
    pub messages: u64,
    /// Messages the server had already (a redelivered block's).
    pub duplicates: u64,
    pub samples: u64,
    /// Blocks the server gave up on while this worker ran (max-deliveries advisories).
    pub given_up: u64,
    /// Blocks from fftd this worker could not read and removed (`Taken::Unreadable`).
    pub unreadable: u64,
    /// Outages of the NATS server(s) this worker rode out (`outage`).
    pub outages: u64,
    /// Attempts made during those outages.
    pub retries: u64,
}

/// Runs a worker until stopped, idle for `--idle-exit`, or failed.
pub fn run_worker(
    analysis: &Analysis,
    device: &DeviceChoice,
    io: &FleetIo,
    nats: &NatsArgs,
    signals: &Signals,
) -> Result<WorkerCounts> {
    let worker = Worker {
        analysis,
        device,
        io,
        nats,
        signals,
    };
    analysis.precision.dispatch(worker)
}

/// A worker's spec, run in the sample type of its precision.
struct Worker<'a> {
    analysis: &'a Analysis,
    device: &'a DeviceChoice,
    io: &'a FleetIo,
    nats: &'a NatsArgs,
    signals: &'a Signals,
}

impl WithSample for Worker<'_> {
    type Output = Result<WorkerCounts>;
    fn run<T: Sample>(self) -> Result<WorkerCounts> {
        run_typed::<T>(self.analysis, self.device, self.io, self.nats, self.signals)
    }
}

/// The engine a worker transforms with: `auto` and `cpu` are the CPU engine (one thread: run
/// several workers for more cores), a GPU or `opencl:P:D` the device named (`config` refuses
/// device lists).
fn engine_for<T: Sample>(device: &DeviceChoice) -> Result<Box<dyn Engine<T>>> {
    let choice = match device {
        DeviceChoice::Auto => DeviceChoice::Cpu,
        other => other.clone(),
    };
    router::build_engines::<T>(&choice, 1)?
        .into_iter()
        .next()
        .ok_or_else(|| FftdError::Runtime("no FFT engine".into()))
}

/// The worker's connections: blocks from the input's server, rows to the output's.
struct Connected {
    rows_to: Context,
    work_js: Context,
    /// Every shard of the work stream (`shards`) with its consumer, shard 0 first.
    shards: Vec<(Stream, PullConsumer)>,
    /// Blocks the server gave up on, counted by `undelivered::watch`.
    given_up: Arc<GivenUp>,
    /// The spectra server's largest message.
    max_payload: usize,
}

fn connect(
    rt: &Runtime,
    io: &FleetIo,
    nats: &NatsArgs,
    outages: &Arc<Outages>,
) -> Result<Connected> {
    rt.block_on(async {
        let watched = Some(outages.clone());
        let in_client = (nats.connect_watched(&io.input, "fftd worker", watched.clone())).await?;
        let out_client = match io.output.servers() == io.input.servers() {
            true => in_client.clone(),
            false => (nats.connect_watched(&io.output, "fftd worker (spectra)", watched)).await?,
        };
        let in_js = async_nats::jetstream::new(in_client.clone());
        // a worker started while the server restarts waits for it, as one running would
        let shards = patiently(|| work_shards(&in_js, &io.stream, &io.consumer)).await?;
        let max_payload = out_client.server_info().max_payload;
        let rows_to = publishing_context(out_client);
        patiently(|| stream_capturing(&rows_to, &io.subject)).await?;
        let given_up = Arc::new(GivenUp::default());
        for (work, _) in &shards {
            tokio::spawn(undelivered::watch(
                in_client.clone(),
                work.clone(),
                io.consumer.clone(),
                given_up.clone(),
            ));
        }
        Ok(Connected {
            rows_to,
            work_js: in_js,
            shards,
            given_up,
            max_payload,
        })
    })
}

/// Why the fetch loop ended.
enum Ended {
    Stopped,
    Idle,
}

fn run_typed<T: Sample>(
    analysis: &Analysis,
    device: &DeviceChoice,
    io: &FleetIo,
    nats: &NatsArgs,
    signals: &Signals,
) -> Result<WorkerCounts> {
    let Some((n, hop)) = analysis.fixed() else {
        return Err(FftdError::Usage(
            "fleet workers need a fixed --frame N".into(),
        ));
    };
    let mut engine = engine_for::<T>(device)?;
    let encoder = make_encoder::<T>(analysis.format, analysis.scale);
    let rt = super::connect::runtime()?;
    let outages = Outages::new(io.retry, io.input.to_string());
    let connected = connect(&rt, io, nats, &outages)?;
    let packing = Packing::for_server(io.rows_per_message, connected.max_payload);
    let mut work = Work::new(analysis, (n, hop), engine.as_mut(), &*encoder, packing);
    let ack_wait = (connected.shards.iter())
        .map(|(_, c)| c.cached_info().config.ack_wait)
        .min()
        .unwrap_or(Duration::from_secs(30));
    let shared = (signals.stop.clone(), outages, connected.given_up.clone());
    let rows_to = (connected.rows_to.clone(), io.subject.clone());
    let mut flight = InFlight::new(&rt, rows_to, ack_wait, shared);
    let shards = connected.shards.clone();
    let mut drained = Drained::new(connected.work_js.clone(), shards, ack_wait);
    let consumers: Vec<PullConsumer> = connected.shards.iter().map(|(_, c)| c.clone()).collect();
    let ended = fetch_loop(
        consumers,
        io,
        &mut work,
        (&mut flight, &mut drained),
        signals,
    );
    // finish what is in hand (also after an error: those blocks are complete)
    let settled = match ended {
        Ok(Ended::Stopped) => {
            flight.settle_within(STOP_GRACE);
            Ok(())
        }
        _ => flight.settle(0),
    };
    let ended = ended.and_then(|e| settled.map(|_| e))?;
    flight.counts.given_up = connected.given_up.count();
    flight.counts.outages = flight.outages.gaps();
    flight.counts.retries = flight.outages.retries();
    if let Some(first) = &flight.first_unreadable {
        return Err(FftdError::Runtime(format!(
            "{} block(s) on '{}' could not be read and were removed from the queue, the first: {first}; their frames are missing (publish the recording again)",
            flight.counts.unreadable, io.stream
        )));
    }
    if let Ended::Idle = ended {
        for (work, _) in &connected.shards {
            let left = rt.block_on(undelivered::left_behind(
                &connected.work_js,
                work,
                &io.consumer,
            ));
            match left {
                Ok(None) => {}
                Ok(Some(message)) => return Err(FftdError::Runtime(message)),
                Err(e) => {
                    return Err(FftdError::Runtime(format!(
                        "cannot check for blocks left behind: {e}"
                    )))
                }
            }
        }
    }
    Ok(flight.counts)
}

/// Fetches and processes blocks until a stop, `--idle-exit` or an error. Every shard's next
/// fetch is on its way while the blocks in hand are transformed (`Prefetch`), so a round trip
/// to the server does not pace the worker. Blocks those fetches bring as the worker goes idle
/// are processed, not handed back: a worker that exits idle leaves no block that came to it in
/// the queue.
fn fetch_loop<T: Sample>(
    consumers: Vec<PullConsumer>,
    io: &FleetIo,
    work: &mut Work<'_, T>,
    (flight, drained): (&mut InFlight<'_>, &mut Drained),
    signals: &Signals,
) -> Result<Ended> {
    let mut prefetch = Prefetch::new(consumers);
    loop {
        let ended = fetch_blocks(&mut prefetch, io, work, (flight, drained), signals);
        let ready = prefetch.take_ready(flight.rt);
        // blocks that came as the worker went idle (a redelivery, say): the queue was not
        // empty after all, so they are done here (unless a stop came meanwhile), and the idle
        // time starts again
        let stopped = signals.stop.load(Ordering::Relaxed);
        if matches!(ended, Ok(Ended::Idle)) && !ready.is_empty() && !stopped {
            drained.not_idle();
            flight.process(work, ready)?;
            continue;
        }
        // blocks fetched and not taken go back to the queue at once (not after the ack wait)
        for message in ready {
            match ended.is_err() {
                true => flight.refuse(message),
                false => flight.nak(message),
            }
        }
        return ended;
    }
}

fn fetch_blocks<T: Sample>(
    prefetch: &mut Prefetch,
    io: &FleetIo,
    work: &mut Work<'_, T>,
    (flight, drained): (&mut InFlight<'_>, &mut Drained),
    signals: &Signals,
) -> Result<Ended> {
    let mut idle_since = Instant::now();
    let mut attempts: Option<Attempts> = None;
    loop {
        // room for the blocks in hand and those on their way: none waits long unprocessed
        // (without progress acks)
        flight.settle(BLOCKS_IN_FLIGHT - 2 * FETCH_BLOCKS)?;
        if signals.stop.load(Ordering::Relaxed) {
            return Ok(Ended::Stopped);
        }
        prefetch.start_all(flight.rt);
        let messages = match prefetch.next_batch(flight.rt) {
            Ok(messages) => {
                if attempts.take().is_some() {
                    flight.outages.succeeded();
                }
                messages
            }
            Err(e) => {
                // a server away is not an empty queue
                idle_since = Instant::now();
                drained.not_idle();
                // the other shards' fetches fail alike: one attempt, their blocks kept
                let stray = prefetch.take_ready(flight.rt);
                flight.process(work, stray)?;
                let tries = attempts.get_or_insert_with(Attempts::default);
                let Some(wait) = flight.outages.failed(tries, &e, 0.0) else {
                    return Err(FftdError::Runtime(format!(
                        "cannot fetch blocks from '{}/{}', retried for {}: {e}",
                        io.stream,
                        io.consumer,
                        flight.outages.policy_name()
                    )));
                };
                if !sleep_unless_stopped(wait, &signals.stop) {
                    return Ok(Ended::Stopped);
                }
                continue;
            }
        };
        if messages.is_empty() {
            let idle = io.idle_exit.is_some_and(|l| idle_since.elapsed() >= l);
            // (blocks still on the queue are waited for: `drained`)
            if idle && flight.tasks.is_empty() && drained.may_exit(flight.rt) {
                return Ok(Ended::Idle);
            }
            // a quiet queue is a good moment to collect finished blocks
            flight.settle(0)?;
            continue;
        }
        idle_since = Instant::now();
        drained.not_idle();
        // the shard's next fetch is on its way while these are transformed
        if !signals.stop.load(Ordering::Relaxed) {
            prefetch.start_all(flight.rt);
        }
        flight.process(work, messages)?;
    }
}

/// Sleeps `wait`, or less when the run is stopped meanwhile; whether it slept it all.
fn sleep_unless_stopped(wait: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(STOP_POLL.min(until.saturating_duration_since(Instant::now())));
    }
    !stop.load(Ordering::Relaxed)
}
