//! A worker's fetching: a fetch on its way on every shard of the work stream (`shards`) while
//! the blocks in hand are transformed, each bounded in time so a stop or `--idle-exit` is seen
//! and a server away is noticed rather than waited for.

use super::connect::one_line;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::Message;
use futures_util::StreamExt;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// Blocks asked for per fetch (each shard's next fetch of as many is on its way while they are
/// transformed: `Prefetch`).
pub(crate) const FETCH_BLOCKS: usize = 4;
/// How long one fetch waits for blocks (also how soon a stop or `--idle-exit` is seen).
const FETCH_WAIT: Duration = Duration::from_millis(500);

/// A fetch on its way: the blocks it brings, or why it failed.
type Fetching = JoinHandle<std::result::Result<Vec<Message>, String>>;

/// Each shard's fetch on its way while the blocks in hand are processed (`shards`): a shard
/// whose blocks are taken is asked again at once, so every shard's blocks keep coming.
pub(crate) struct Prefetch {
    consumers: Vec<PullConsumer>,
    fetching: Vec<Option<Fetching>>,
    /// The shard looked at first for blocks already there (in turn, so none waits behind another).
    next: usize,
}

impl Prefetch {
    pub(crate) fn new(consumers: Vec<PullConsumer>) -> Self {
        let fetching = consumers.iter().map(|_| None).collect();
        Prefetch {
            consumers,
            fetching,
            next: 0,
        }
    }

    /// A fetch started on every shard that has none on its way.
    pub(crate) fn start_all(&mut self, rt: &Runtime) {
        for (consumer, fetching) in self.consumers.iter().zip(&mut self.fetching) {
            if fetching.is_none() {
                let consumer = consumer.clone();
                *fetching = Some(rt.spawn(async move { fetch(&consumer).await }));
            }
        }
    }

    /// The blocks of a shard whose fetch is done (waited for when none is yet).
    pub(crate) fn next_batch(&mut self, rt: &Runtime) -> std::result::Result<Vec<Message>, String> {
        let shards = self.fetching.len();
        let done = (0..shards)
            .map(|step| (self.next + step) % shards)
            .find(|&k| self.fetching[k].as_ref().is_some_and(|t| t.is_finished()));
        let (k, joined) = match done {
            Some(k) => {
                let task = self.fetching[k].take().ok_or("no fetch on its way")?;
                (k, rt.block_on(task))
            }
            None => {
                let waiting: Vec<usize> = (0..shards)
                    .filter(|&k| self.fetching[k].is_some())
                    .collect();
                if waiting.is_empty() {
                    return Err("no fetch on its way".into());
                }
                let tasks = self.fetching.iter_mut().filter_map(|t| t.as_mut());
                let (joined, at, _) = rt.block_on(futures_util::future::select_all(tasks));
                let k = waiting[at];
                self.fetching[k] = None;
                (k, joined)
            }
        };
        self.next = (k + 1) % shards;
        joined.map_err(|e| format!("fetching task failed: {e}"))?
    }

    /// What the fetches still on their way bring (waited for: at most a fetch's own deadline).
    pub(crate) fn take_ready(&mut self, rt: &Runtime) -> Vec<Message> {
        let mut messages = Vec::new();
        for task in self.fetching.iter_mut().filter_map(Option::take) {
            if let Ok(Ok(fetched)) = rt.block_on(task) {
                messages.extend(fetched);
            }
        }
        messages
    }
}

/// Up to `FETCH_BLOCKS` blocks, waiting at most `FETCH_WAIT` (and never much longer: a fetch
/// while the connection is down would wait for the reconnect). Blocks that came before an error
/// or the deadline are returned; an error before any block is returned.
async fn fetch(consumer: &PullConsumer) -> std::result::Result<Vec<Message>, String> {
    let deadline = tokio::time::Instant::now() + FETCH_WAIT * 3;
    let asked = consumer
        .fetch()
        .max_messages(FETCH_BLOCKS)
        .expires(FETCH_WAIT)
        .messages();
    let mut batch = match tokio::time::timeout_at(deadline, asked).await {
        Ok(asked) => asked.map_err(|e| one_line(&e.to_string()))?,
        Err(_) => return Err("no answer to the fetch".into()),
    };
    let mut messages = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, batch.next()).await {
            Ok(Some(Ok(m))) => messages.push(m),
            Ok(None) => break,
            Ok(Some(Err(e))) if messages.is_empty() => return Err(one_line(&e.to_string())),
            Ok(Some(Err(e))) => {
                tracing::debug!("fetch ended early ({e})");
                break;
            }
            Err(_) if messages.is_empty() => return Err("no answer to the fetch".into()),
            Err(_) => break,
        }
    }
    Ok(messages)
}
