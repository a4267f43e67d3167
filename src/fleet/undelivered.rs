//! Blocks the server will not deliver again: a block delivered `max_deliver` times without an
//! ack (every worker that took it died or refused it) stays on the work stream, but the consumer
//! gives up on it, and its frames would be missing from the output without a word. Workers say
//! so twice over:
//! - live: each worker listens to the server's max-deliveries advisories for its consumer and
//!   warns naming the block (`watch`);
//! - at `--idle-exit`: once nothing is pending or unacknowledged, any block still on the work
//!   stream (for the consumer's subjects) is one the consumer gave up on; the worker fails naming
//!   the first and how many (`left_behind`). `fftd fleet setup --recreate-consumer` delivers them
//!   again.

use super::block::BlockHeader;
use super::connect::one_line;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream::Stream;
use futures_util::{StreamExt, TryStreamExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The part of `io.nats.jetstream.advisory.v1.max_deliver` fftd reads.
#[derive(serde::Deserialize)]
struct MaxDeliveries {
    stream_seq: u64,
    deliveries: u64,
}

/// Warns for every block of `work`/`consumer` the server gives up on, counting them in `given_up`;
/// runs until the client closes.
pub async fn watch(
    client: async_nats::Client,
    work: Stream,
    consumer: String,
    given_up: Arc<AtomicU64>,
) {
    let stream = work.cached_info().config.name.clone();
    let subject = format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}");
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
        given_up.fetch_add(1, Ordering::Relaxed);
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

/// When nothing is pending or waiting for an ack on `consumer`: how many blocks are left on the
/// work stream for it, and a sentence naming the first. None when none is, or while work goes
/// on (then nothing can be said).
pub async fn left_behind(
    work: &mut Stream,
    consumer: &mut PullConsumer,
) -> Result<Option<String>, String> {
    let info = consumer
        .info()
        .await
        .map_err(|e| one_line(&e.to_string()))?;
    if info.num_pending > 0 || info.num_ack_pending > 0 {
        return Ok(None);
    }
    let max_deliver = info.config.max_deliver;
    let filter = info.config.filter_subject.clone();
    let (count, first) = match filter.is_empty() {
        true => {
            let state = work
                .info()
                .await
                .map_err(|e| one_line(&e.to_string()))?
                .state
                .clone();
            (state.messages, state.first_sequence)
        }
        false => left_on_subject(work, &filter).await?,
    };
    if count == 0 {
        return Ok(None);
    }
    Ok(Some(format!(
        "{count} block(s) left on work stream '{}' that consumer '{}' will not deliver again (each delivered {max_deliver} times without an ack), the first: {}; their rows are missing (fftd fleet setup --recreate-consumer delivers them again)",
        info.stream_name,
        info.name,
        describe(work, first).await
    )))
}

/// Messages left on `filter` and the first one's sequence number.
async fn left_on_subject(work: &Stream, filter: &str) -> Result<(u64, u64), String> {
    let mut count = 0u64;
    let mut subjects = work
        .info_with_subjects(filter)
        .await
        .map_err(|e| one_line(&e.to_string()))?;
    while let Some((_, n)) = subjects
        .try_next()
        .await
        .map_err(|e| one_line(&e.to_string()))?
    {
        count += n as u64;
    }
    let first = work
        .get_first_raw_message_by_subject(filter, 1)
        .await
        .map_or(0, |m| m.sequence);
    Ok((count, first))
}
