//! Publishing with JetStream acks, retried: every message carries a `Nats-Msg-Id`, so sending it
//! again after a lost ack (a server restart, a reconnect) is deduplicated by the server. A batch
//! is sent whole, then its acks are awaited together; messages whose send or ack failed are sent
//! again with a growing pause for as long as `--retry` says (`outage`; 120 s without it).
//!
//! `Publishing` keeps several batches on their way at once for a plain thread (`fftd publish`,
//! a local run's `--output nats://`): each batch is a task on the client's runtime, and the
//! thread waits once too many batches or bytes await their acks, so a slow server slows the
//! sender rather than filling memory.

use super::connect::one_line;
use super::outage::{connected, Attempts, Outages};
use crate::error::{FftdError, Result};
use async_nats::jetstream::Context;
use async_nats::HeaderMap;
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// One message to publish.
#[derive(Clone)]
pub(crate) struct Outgoing {
    pub headers: HeaderMap,
    pub payload: Bytes,
}

/// What the server said about a batch.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Acked {
    pub stored: u64,
    /// Messages the server had already (same `Nats-Msg-Id` within its duplicate window).
    pub duplicates: u64,
}

/// Publishes `batch` on `subject` and returns once the server has acknowledged every message;
/// failures are retried as `outages` says (`--retry`, `outage`), and an error is the policy
/// giving up.
pub(crate) async fn publish_all(
    js: &Context,
    subject: &str,
    batch: Vec<Outgoing>,
    outages: &Outages,
) -> Result<Acked> {
    let time_s = first_time_s(&batch);
    let client = js.client();
    let mut pending = batch;
    let mut acked = Acked::default();
    let mut attempts = Attempts::default();
    let mut failing = false;
    loop {
        // while the client is away an attempt would only wait for its timeout
        let (done, failed, last_error) = match failing && !connected(&client) {
            true => (Acked::default(), pending, "not connected".to_string()),
            false => publish_once(js, subject, pending).await,
        };
        acked.stored += done.stored;
        acked.duplicates += done.duplicates;
        if failed.is_empty() {
            if failing {
                outages.succeeded();
            }
            return Ok(acked);
        }
        failing = true;
        let Some(wait) = outages.failed(&mut attempts, &last_error, time_s) else {
            return Err(FftdError::Runtime(format!(
                "publishing to '{subject}': {} message(s) unacknowledged, retried for {}: {last_error}",
                failed.len(),
                outages.policy_name()
            )));
        };
        tokio::time::sleep(wait).await;
        pending = failed;
    }
}

/// The `time_s` header of a batch's first message (rows carry it; blocks do not: 0).
fn first_time_s(batch: &[Outgoing]) -> f64 {
    (batch.first())
        .and_then(|m| m.headers.get("time_s"))
        .and_then(|v| v.as_str().parse().ok())
        .unwrap_or(0.0)
}

/// One attempt: sends every message, then awaits every ack. Returns the acked counts, the
/// messages to send again and the last error seen.
async fn publish_once(
    js: &Context,
    subject: &str,
    batch: Vec<Outgoing>,
) -> (Acked, Vec<Outgoing>, String) {
    let mut failed = Vec::new();
    let mut last_error = String::new();
    let mut waiting = Vec::with_capacity(batch.len());
    for message in batch {
        let sent = js
            .publish_with_headers(
                subject.to_string(),
                message.headers.clone(),
                message.payload.clone(),
            )
            .await;
        match sent {
            Ok(ack) => waiting.push((message, ack)),
            Err(e) => {
                last_error = one_line(&e.to_string());
                failed.push(message);
            }
        }
    }
    let answers = futures_util::future::join_all(
        waiting
            .into_iter()
            .map(|(message, ack)| async move { (message, ack.await) }),
    )
    .await;
    let mut acked = Acked::default();
    for (message, answer) in answers {
        match answer {
            Ok(ack) if ack.duplicate => acked.duplicates += 1,
            Ok(_) => acked.stored += 1,
            Err(e) => {
                last_error = one_line(&e.to_string());
                failed.push(message);
            }
        }
    }
    (acked, failed, last_error)
}

/// Acks a publishing context lets be pending before a publish waits for one. async-nats allows
/// 5 000 by default and then makes `publish` wait, while `publish_all` sends a batch whole before
/// it awaits the batch's acks: batches in flight together, each holding some of the 5 000 and
/// waiting for more, waited for each other for ever (a local run of 31 249 rows stopped at 6 792).
/// fftd bounds what it has in flight itself (`InFlightLimit`, a worker's blocks in flight), so
/// the client's count is set out of the way.
const CLIENT_PENDING_ACKS: usize = 1 << 24;

/// A JetStream context for publishing with `publish_all` (see `CLIENT_PENDING_ACKS`).
pub(crate) fn publishing_context(client: async_nats::Client) -> Context {
    async_nats::jetstream::ContextBuilder::new()
        .max_ack_inflight(CLIENT_PENDING_ACKS)
        .build(client)
}

/// How much may await acks at once: batches (many small batches: live input) and payload bytes
/// (few large ones: big frames).
#[derive(Clone, Copy, Debug)]
pub(crate) struct InFlightLimit {
    pub batches: usize,
    pub bytes: usize,
}

/// Batches being published on a runtime, oldest first, and what the server said of those done.
pub(crate) struct Publishing {
    js: Context,
    subject: String,
    /// How failures are retried, said and counted (`outage`).
    outages: Arc<Outages>,
    limit: InFlightLimit,
    /// Each batch's task and payload bytes.
    tasks: VecDeque<(JoinHandle<Result<Acked>>, usize)>,
    bytes: usize,
    pub acked: Acked,
}

impl Publishing {
    pub(crate) fn new(
        js: Context,
        subject: String,
        limit: InFlightLimit,
        outages: Arc<Outages>,
    ) -> Self {
        Publishing {
            js,
            subject,
            outages,
            limit,
            tasks: VecDeque::new(),
            bytes: 0,
            acked: Acked::default(),
        }
    }

    pub(crate) fn subject(&self) -> &str {
        &self.subject
    }

    /// Whether any batch still awaits its acks.
    pub(crate) fn is_idle(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Starts publishing `batch`; then waits for the oldest batches while more than the limit
    /// await acks (and collects those already done). An error is a batch that could not be
    /// stored.
    pub(crate) fn send(&mut self, rt: &Runtime, batch: Vec<Outgoing>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let bytes = batch.iter().map(|m| m.payload.len()).sum::<usize>();
        let (js, subject) = (self.js.clone(), self.subject.clone());
        let outages = self.outages.clone();
        let task = rt.spawn(async move { publish_all(&js, &subject, batch, &outages).await });
        self.tasks.push_back((task, bytes));
        self.bytes += bytes;
        while self.tasks.len() > self.limit.batches
            || (self.bytes > self.limit.bytes && self.tasks.len() > 1)
            || self.tasks.front().is_some_and(|(t, _)| t.is_finished())
        {
            self.settle_oldest(rt)?;
        }
        Ok(())
    }

    /// Waits until every batch sent is acknowledged (or one fails).
    pub(crate) fn settle_all(&mut self, rt: &Runtime) -> Result<()> {
        while !self.tasks.is_empty() {
            self.settle_oldest(rt)?;
        }
        Ok(())
    }

    fn settle_oldest(&mut self, rt: &Runtime) -> Result<()> {
        let Some((task, bytes)) = self.tasks.pop_front() else {
            return Ok(());
        };
        self.bytes -= bytes;
        let acked = rt
            .block_on(task)
            .map_err(|e| FftdError::Runtime(format!("publishing task failed: {e}")))??;
        self.acked.stored += acked.stored;
        self.acked.duplicates += acked.duplicates;
        Ok(())
    }
}
