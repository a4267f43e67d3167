//! Blocks the server will not deliver again: a block delivered `max_deliver` times without an
//! ack (every worker that took it died or refused it) stays on the work stream, but the consumer
//! gives up on it, and its frames would be missing from the output without a word. Workers say
//! so twice over:
//! - live: each worker listens to the server's max-deliveries advisories for its consumer and
//!   warns naming the block (`watch`);
//! - at `--idle-exit`: `fftd fleet setup` keeps those advisories in a stream of their own
//!   (`advisory_stream`), so a worker started later still learns of them; every block named there
//!   that is still on the work stream is missing from the output, and the worker fails naming the
//!   first and how many (`left_behind`). `fftd fleet setup --recreate-consumer` delivers them
//!   again (a new consumer starts from the first block still on the work stream).
//!
//! (The consumer's own counters cannot tell: nats-server 2.9 keeps a block it gave up on among
//! the consumer's unacknowledged ones, indistinguishable from a block a worker holds.)

use super::block::BlockHeader;
use super::connect::one_line;
use async_nats::jetstream::consumer::Info as ConsumerInfo;
use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{RawMessageError, RawMessageErrorKind, Stream};
use async_nats::jetstream::Context;
use futures_util::StreamExt;
use std::collections::BTreeSet;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The part of `io.nats.jetstream.advisory.v1.max_deliver` fftd reads.
#[derive(serde::Deserialize)]
struct MaxDeliveries {
    stream_seq: u64,
    deliveries: u64,
}

/// What a worker's watchers share with it: how many blocks the server gave up on, and the
/// blocks the worker handed back as it ended on an error (a block it refuses). Those are not
/// warned of live: the worker says its error alone, in one line, and a worker run later with
/// `--idle-exit` reports them from the advisory stream (`left_behind`). Blocks given up on that
/// other workers held are still warned of.
#[derive(Default)]
pub(crate) struct GivenUp {
    count: AtomicU64,
    /// (work stream, stream sequence) of each block handed back on an error.
    refused: Mutex<HashSet<(String, u64)>>,
}

impl GivenUp {
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Notes a block handed back as the worker ends on an error.
    pub(crate) fn refusing(&self, message: &async_nats::jetstream::Message) {
        if let Ok(info) = message.info() {
            let block = (info.stream.to_string(), info.stream_sequence);
            self.refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(block);
        }
    }

    fn was_refused(&self, stream: &str, seq: u64) -> bool {
        let refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        refused.contains(&(stream.to_string(), seq))
    }
}

/// Warns for every block of `work`/`consumer` the server gives up on, counting them in `given_up`;
/// runs until the client closes.
pub(crate) async fn watch(
    client: async_nats::Client,
    work: Stream,
    consumer: String,
    given_up: Arc<GivenUp>,
) {
    let subject = advisory_subject(&work.cached_info().config.name, &consumer);
    let mut advisories = match client.subscribe(subject).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch for blocks given up on ({e}); --idle-exit still checks");
            return;
        }
    };
    while let Some(message) = advisories.next().await {
        let Ok(advisory) = serde_json::from_slice::<MaxDeliveries>(&message.payload) else {
            continue;
        };
        given_up.count.fetch_add(1, Ordering::Relaxed);
        let stream = &work.cached_info().config.name;
        if given_up.was_refused(stream, advisory.stream_seq) {
            continue;
        }
        tracing::warn!(
            "{} was delivered {} times without an ack: consumer '{consumer}' will not deliver it again, its rows are missing (docs/fleet.md: blocks left behind)",
            describe(&work, advisory.stream_seq).await,
            advisory.deliveries
        );
    }
}

/// A block on the work stream by its sequence number, as `BlockHeader::describe` names it.
async fn describe(work: &Stream, seq: u64) -> String {
    let block = work
        .get_raw_message(seq)
        .await
        .ok()
        .and_then(|m| BlockHeader::from_headers(Some(&m.headers)).ok());
    match block {
        Some(b) => format!("{} (work stream message {seq})", b.describe()),
        None => format!("work stream message {seq}"),
    }
}

/// The subject of the server's advisories for blocks that `consumer` of `work_stream` gave up on
/// (`*` for every consumer).
pub(crate) fn advisory_subject(work_stream: &str, consumer: &str) -> String {
    format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{work_stream}.{consumer}")
}

/// The stream `fftd fleet setup` keeps those advisories in.
pub(crate) fn advisory_stream(work_stream: &str) -> String {
    format!("{work_stream}_GIVEN_UP")
}

/// A message looked up: None when there is none; any other failure is an error (a scan cut
/// short by a timeout must not pass for a clean one).
fn found(
    looked_up: Result<StreamMessage, RawMessageError>,
) -> Result<Option<StreamMessage>, String> {
    match looked_up {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(one_line(&e.to_string())),
    }
}

/// Blocks `consumer` gave up on that are still on the work stream (none was delivered since):
/// how many, and a sentence naming the first. None when there are none.
pub(crate) async fn left_behind(
    js: &Context,
    work: &Stream,
    consumer: &str,
) -> Result<Option<String>, String> {
    let left = given_up_on(js, work, consumer).await?;
    let Some(&first) = left.first() else {
        return Ok(None);
    };
    let work_name = &work.cached_info().config.name;
    Ok(Some(format!(
        "{} block(s) left on work stream '{work_name}' that consumer '{consumer}' gave up on (each delivered its maximum number of times without an ack), the first: {}; their rows are missing (fftd fleet setup --recreate-consumer delivers them again)",
        left.len(),
        describe(work, first).await
    )))
}

/// The sequence numbers of the blocks `consumer` gave up on that are still on the work stream,
/// from the advisories `fftd fleet setup` keeps (`advisory_stream`).
pub(crate) async fn given_up_on(
    js: &Context,
    work: &Stream,
    consumer: &str,
) -> Result<BTreeSet<u64>, String> {
    let info = (work.consumer_info(consumer).await).map_err(|e| one_line(&e.to_string()))?;
    let mut scan = GivenUpScan::default();
    scan.read_on(js, work, &info).await?;
    let mut left = BTreeSet::new();
    for seq in scan.blocks {
        if found(work.get_raw_message(seq).await)?.is_some() {
            left.insert(seq);
        }
    }
    Ok(left)
}

/// The blocks a consumer gave up on, as read so far from its advisories: each read goes on
/// from where the last one ended, so a worker that looks again reads only what is new.
/// Advisories older than the consumer are left out: they name blocks of a consumer since
/// recreated (`fftd fleet setup --recreate-consumer`), which delivers them again.
#[derive(Default)]
pub(crate) struct GivenUpScan {
    /// The advisory stream, once looked up.
    log: Option<Stream>,
    /// The next advisory to read (1: the first).
    next: u64,
    /// Stream sequence numbers of the blocks given up on.
    pub(crate) blocks: BTreeSet<u64>,
}

impl GivenUpScan {
    /// Reads the advisories of `consumer` (its info as the server gave it) on `work` since the
    /// last read.
    pub(crate) async fn read_on(
        &mut self,
        js: &Context,
        work: &Stream,
        consumer: &ConsumerInfo,
    ) -> Result<(), String> {
        let work_name = &work.cached_info().config.name;
        let log = match self.log.take() {
            Some(log) => log,
            None => {
                let log_name = advisory_stream(work_name);
                js.get_stream(&log_name).await.map_err(|e| {
                    format!(
                        "stream '{log_name}' ({}; fftd fleet setup makes it)",
                        one_line(&e.to_string())
                    )
                })?
            }
        };
        let subject = advisory_subject(work_name, &consumer.name);
        self.next = self.next.max(1);
        while let Some(message) = found(
            log.get_first_raw_message_by_subject(&subject, self.next)
                .await,
        )? {
            self.next = message.sequence + 1;
            let Ok(advisory) = serde_json::from_slice::<MaxDeliveries>(&message.payload) else {
                continue;
            };
            if message.time >= consumer.created {
                self.blocks.insert(advisory.stream_seq);
            }
        }
        self.log = Some(log);
        Ok(())
    }
}
