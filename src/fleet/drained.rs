//! Whether a worker with `--idle-exit` may go: its fetches coming back empty is not enough, for
//! a block another worker holds, or one delivered to a worker that died (or to a fetch given up
//! on), is still the consumer's and comes back only after the ack wait. An idle worker therefore
//! asks each shard's consumer for the blocks it still has to deliver or to see acked, less those
//! it gave up on (`undelivered`: nats-server 2.9 keeps those among the unacked), and goes only
//! when none is left, or once it has waited `HELD_WAITS` ack waits (at most `MOST_HELD_WAIT`)
//! for those left: they are then another live worker's, and it exits 0 leaving them to it.

use super::undelivered::GivenUpScan;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream::Stream;
use async_nats::jetstream::Context;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// How many ack waits an idle worker waits for blocks still on the queue: one brings back a
/// block whose worker died; the second covers a redelivery that went to a fetch given up on.
const HELD_WAITS: u32 = 2;
/// The longest an idle worker waits so (a consumer with an ack wait of an hour would otherwise
/// keep it two).
const MOST_HELD_WAIT: Duration = Duration::from_secs(300);
/// How often an idle worker asks: one fetch's wait (every shard's empty fetch asks otherwise).
const ASK_EVERY: Duration = Duration::from_millis(500);

/// The work stream's shards as an idle worker checks them.
pub(crate) struct Drained {
    js: Context,
    /// Each shard's stream, its consumer, and the blocks the consumer gave up on read so far.
    shards: Vec<(Stream, PullConsumer, GivenUpScan)>,
    /// How long blocks still on the queue are waited for.
    wait_for_held: Duration,
    /// Since when the idle worker has seen blocks left on the queue (or could not ask).
    held_since: Option<Instant>,
    /// When the queue was last asked.
    asked: Option<Instant>,
}

impl Drained {
    pub(crate) fn new(
        js: Context,
        shards: Vec<(Stream, PullConsumer)>,
        ack_wait: Duration,
    ) -> Self {
        Drained {
            js,
            shards: (shards.into_iter())
                .map(|(s, c)| (s, c, GivenUpScan::default()))
                .collect(),
            wait_for_held: (ack_wait * HELD_WAITS).min(MOST_HELD_WAIT),
            held_since: None,
            asked: None,
        }
    }

    /// A block came, or the server went away: the idle spell is over, and a later one waits
    /// afresh.
    pub(crate) fn not_idle(&mut self) {
        self.held_since = None;
    }

    /// Whether an idle worker may exit now: no block left on the queue but those given up on,
    /// or the blocks left (or a queue that could not be asked) waited for long enough.
    pub(crate) fn may_exit(&mut self, rt: &Runtime) -> bool {
        if self.asked.is_some_and(|t| t.elapsed() < ASK_EVERY) {
            return false;
        }
        self.asked = Some(Instant::now());
        let left = rt.block_on(self.blocks_left());
        if left == Ok(0) {
            return true;
        }
        let since = *self.held_since.get_or_insert_with(|| {
            let why = match &left {
                Ok(n) => format!("{n} block(s) still on the work stream (held by another worker, or waiting for their redelivery)"),
                Err(e) => format!("cannot count the blocks on the work stream ({e})"),
            };
            tracing::info!(
                "idle, but {why}: waiting up to {} s",
                self.wait_for_held.as_secs()
            );
            Instant::now()
        });
        if since.elapsed() < self.wait_for_held {
            return false;
        }
        if let Ok(n) = left {
            tracing::info!("leaving {n} block(s) to the worker(s) holding them");
        }
        true
    }

    /// Blocks the shards' consumers still have to deliver or to see acked, less those they gave
    /// up on.
    async fn blocks_left(&mut self) -> Result<u64, String> {
        let mut left = 0;
        for (stream, consumer, given_up) in &mut self.shards {
            let info = consumer.get_info().await.map_err(|e| e.to_string())?;
            let owed = info.num_pending + info.num_ack_pending as u64;
            if owed == 0 {
                continue;
            }
            given_up.read_on(&self.js, stream, &info).await?;
            left += owed.saturating_sub(given_up.blocks.len() as u64);
        }
        Ok(left)
    }
}
