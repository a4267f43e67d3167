//! Whether a worker with `--idle-exit` may go: its fetches coming back empty is not enough, for
//! a block another worker holds, or one delivered to a worker that died (or to a fetch given up
//! on), is still on the work stream and comes back only after the consumer's ack wait. An idle
//! worker therefore counts the blocks on every shard of the work stream, less those the
//! consumer gave up on (`undelivered`), and goes only when none is left, or once it has waited
//! `HELD_WAITS` ack waits for those left (then they are another live worker's: it exits 0 and
//! leaves them to it).

use super::undelivered;
use async_nats::jetstream::stream::Stream;
use async_nats::jetstream::Context;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// How many ack waits an idle worker waits for blocks still on the queue: one brings back a
/// block whose worker died; the second covers a redelivery that went to a fetch given up on.
const HELD_WAITS: u32 = 2;

/// The work stream's shards as an idle worker checks them.
pub(crate) struct Drained {
    js: Context,
    shards: Vec<Stream>,
    consumer: String,
    /// How long blocks still on the queue are waited for (`HELD_WAITS` ack waits).
    wait_for_held: Duration,
    /// Since when the idle worker has seen blocks left on the queue.
    held_since: Option<Instant>,
}

impl Drained {
    pub(crate) fn new(
        js: Context,
        shards: Vec<Stream>,
        consumer: &str,
        ack_wait: Duration,
    ) -> Self {
        Drained {
            js,
            shards,
            consumer: consumer.to_string(),
            wait_for_held: ack_wait * HELD_WAITS,
            held_since: None,
        }
    }

    /// A block came: the queue was not drained, and a later idle spell waits afresh.
    pub(crate) fn work_came(&mut self) {
        self.held_since = None;
    }

    /// Whether an idle worker may exit now: no block left on the queue but those given up on,
    /// or the blocks left waited for long enough. When the queue cannot be asked (the server
    /// away), it may: the check for blocks left behind that follows says why it cannot.
    pub(crate) fn may_exit(&mut self, rt: &Runtime) -> bool {
        let left = match rt.block_on(self.blocks_left()) {
            Ok(0) => return true,
            Ok(left) => left,
            Err(e) => {
                tracing::debug!("cannot count the blocks on the work stream ({e})");
                return true;
            }
        };
        let since = *self.held_since.get_or_insert_with(|| {
            tracing::info!(
                "idle, but {left} block(s) still on the work stream (held by another worker, or waiting for their redelivery): waiting up to {} s for them",
                self.wait_for_held.as_secs()
            );
            Instant::now()
        });
        if since.elapsed() < self.wait_for_held {
            return false;
        }
        tracing::info!("leaving {left} block(s) to the worker(s) holding them");
        true
    }

    /// Blocks on every shard that the consumer has not given up on.
    async fn blocks_left(&self) -> Result<u64, String> {
        let mut left = 0;
        for shard in &self.shards {
            let info = shard.get_info().await.map_err(|e| e.to_string())?;
            if info.state.messages == 0 {
                continue;
            }
            let given_up = undelivered::given_up_on(&self.js, shard, &self.consumer).await?;
            left += info.state.messages.saturating_sub(given_up.len() as u64);
        }
        Ok(left)
    }
}
