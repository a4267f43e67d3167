//! A worker's blocks in flight: each fetched block turned into rows (`rows`) and published on
//! the NATS runtime as a task of its own, then acked once JetStream has acknowledged every row
//! (`publish_then_ack`); what became of each is collected oldest first (`settle`), and blocks the
//! worker will not take are handed back (NAK) or removed (Term) with the server's confirmation.

use super::outage::Outages;
use super::publish_acked::{publish_all, Acked, Outgoing};
use super::rows::{Taken, Work};
use super::undelivered::GivenUp;
use super::worker::WorkerCounts;
use crate::error::{FftdError, Result};
use crate::types::Sample;
use async_nats::jetstream::{AckKind, Context, Message};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// How long a block's ack is retried once its rows are stored.
pub(crate) const ACK_RETRY_FOR: Duration = Duration::from_secs(30);
/// How often waiting for a block looks for a stop.
pub(super) const STOP_POLL: Duration = Duration::from_millis(250);

/// Blocks being published and acked on the runtime, oldest first.
pub(super) struct InFlight<'a> {
    pub(super) rt: &'a Runtime,
    js: Context,
    subject: String,
    /// How often a block still being published is reported in progress.
    progress_every: Duration,
    /// Each block's publish-then-ack, giving what the server said and the block's rows.
    pub(super) tasks: VecDeque<JoinHandle<Result<(Acked, u64)>>>,
    pub(super) counts: WorkerCounts,
    /// SIGINT/SIGTERM: waiting for a block gives way to it.
    stop: Arc<AtomicBool>,
    /// What the first unreadable block was (`Taken::Unreadable`).
    pub(super) first_unreadable: Option<String>,
    /// How failing fetches and publishes are retried, said and counted (`--retry`).
    pub(super) outages: Arc<Outages>,
    /// Told of the blocks handed back on an error (`GivenUp`).
    given_up: Arc<GivenUp>,
    /// A settlement went unconfirmed for `SETTLE_WAIT`: the rest are not waited for.
    unconfirmed: std::cell::Cell<bool>,
}

/// How long a block's ack, NAK or termination waits for the server's confirmation.
const SETTLE_WAIT: Duration = Duration::from_secs(2);

impl<'a> InFlight<'a> {
    /// Nothing in flight yet; rows go to `subject` through `js`, and a block still being
    /// published is reported in progress every third of the consumer's `ack_wait`.
    pub(super) fn new(
        rt: &'a Runtime,
        (js, subject): (Context, String),
        ack_wait: Duration,
        (stop, outages, given_up): (Arc<AtomicBool>, Arc<Outages>, Arc<GivenUp>),
    ) -> Self {
        InFlight {
            rt,
            js,
            subject,
            progress_every: (ack_wait / 3).max(Duration::from_millis(100)),
            tasks: VecDeque::new(),
            counts: WorkerCounts::default(),
            stop,
            first_unreadable: None,
            outages,
            given_up,
            unconfirmed: Default::default(),
        }
    }

    /// Turns fetched blocks into rows and starts publishing them. On an error, the blocks not
    /// yet taken are handed back at once (NAK) rather than after the ack wait.
    pub(super) fn process<T: Sample>(
        &mut self,
        work: &mut Work<'_, T>,
        messages: Vec<Message>,
    ) -> Result<()> {
        let mut messages = messages.into_iter();
        while let Some(message) = messages.next() {
            let taken = match work.rows_of(&message, &self.subject) {
                Ok(Taken::Rows(rows, samples, count)) => {
                    self.counts.blocks += 1;
                    self.counts.samples += samples;
                    let task = publish_then_ack(
                        (self.js.clone(), self.subject.clone()),
                        rows,
                        message,
                        self.progress_every,
                        self.outages.clone(),
                    );
                    let task = async move { task.await.map(|acked| (acked, count)) };
                    self.tasks.push_back(self.rt.spawn(task));
                    Ok(())
                }
                Ok(Taken::NotABlock(why)) => {
                    tracing::warn!(
                        "removing a message on '{}' that is no fftd block: {why}",
                        message.subject
                    );
                    self.terminate(message);
                    Ok(())
                }
                Ok(Taken::Unreadable(why)) => {
                    tracing::warn!("removing an unreadable block: {why}");
                    self.counts.unreadable += 1;
                    self.first_unreadable.get_or_insert(why);
                    self.terminate(message);
                    Ok(())
                }
                Err(e) => {
                    self.refuse(message);
                    Err(e)
                }
            };
            if let Err(e) = taken {
                messages.for_each(|m| self.refuse(m));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Takes a message off the queue for good (it would fail every worker alike).
    fn terminate(&self, message: Message) {
        self.settle_message(message, AckKind::Term);
    }

    /// Hands a block back as the worker ends on an error (`undelivered::GivenUp`).
    pub(super) fn refuse(&self, message: Message) {
        self.given_up.refusing(&message);
        self.nak(message);
    }

    /// Hands a block back to the server for another worker, at once.
    pub(super) fn nak(&self, message: Message) {
        self.settle_message(message, AckKind::Nak(None));
    }

    /// Tells the server what became of a message and waits for its confirmation (at most
    /// `SETTLE_WAIT`): a worker that exits right after (a refused block ends it) would otherwise
    /// lose what it said, and the block would wait out the ack wait. One that is not confirmed
    /// only waits so. Once one was not confirmed in time (the server is gone: a Ctrl-C during
    /// an outage), the rest are sent without waiting, so the worker's stop stays prompt.
    fn settle_message(&self, message: Message, kind: AckKind) {
        if self.unconfirmed.get() {
            let _ = self.rt.block_on(message.ack_with(kind));
            return;
        }
        let confirmed = self.rt.block_on(async {
            tokio::time::timeout(SETTLE_WAIT, message.double_ack_with(kind)).await
        });
        let why = match confirmed {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => {
                self.unconfirmed.set(true);
                format!("no answer in {SETTLE_WAIT:?}")
            }
        };
        tracing::debug!("a message's {kind:?} was not confirmed ({why}); the server delivers it again after the ack wait");
    }

    /// Waits for the oldest blocks until at most `keep` are left, or a stop (then
    /// `settle_within` finishes them).
    pub(super) fn settle(&mut self, keep: usize) -> Result<()> {
        while self.tasks.len() > keep {
            let Some(task) = self.tasks.front_mut() else {
                break;
            };
            // (the timer is made inside the runtime: tokio's timers need one)
            let waited = self
                .rt
                .block_on(async { tokio::time::timeout(STOP_POLL, task).await });
            match waited {
                Ok(joined) => {
                    self.tasks.pop_front();
                    self.count(joined)?;
                }
                Err(_) if self.stop.load(Ordering::Relaxed) => return Ok(()),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Waits for every block in flight for at most `grace`; the ones still unfinished then are
    /// abandoned (never acked: the server redelivers them) with a warning, as are those whose
    /// publishing failed meanwhile (a stop is no failure: exit 0).
    pub(super) fn settle_within(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while let Some(mut task) = self.tasks.pop_front() {
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = self
                .rt
                .block_on(async { tokio::time::timeout(left, &mut task).await });
            match waited {
                Ok(joined) => {
                    if let Err(e) = self.count(joined) {
                        tracing::warn!("stopping: a block was not acknowledged ({e}); the server delivers it to another worker");
                    }
                }
                Err(_) => {
                    task.abort();
                    let left = 1 + self.tasks.len();
                    self.tasks.drain(..).for_each(|t| t.abort());
                    tracing::warn!(
                        "stopping with {left} block(s) not acknowledged after {} s; the server delivers them to another worker",
                        grace.as_secs()
                    );
                }
            }
        }
    }

    fn count(
        &mut self,
        joined: std::result::Result<Result<(Acked, u64)>, tokio::task::JoinError>,
    ) -> Result<()> {
        let (acked, rows) =
            joined.map_err(|e| FftdError::Runtime(format!("publishing task failed: {e}")))??;
        self.counts.rows += rows;
        self.counts.messages += acked.stored + acked.duplicates;
        self.counts.duplicates += acked.duplicates;
        Ok(())
    }
}

/// Publishes a block's rows, telling the server it is in progress meanwhile, then acks the block
/// (the server confirms the ack). A failed ack is only logged: the block comes back after the
/// ack wait and its rows are deduplicated.
async fn publish_then_ack(
    (js, subject): (Context, String),
    rows: Vec<Outgoing>,
    block: Message,
    progress_every: Duration,
    outages: Arc<Outages>,
) -> Result<Acked> {
    let publishing = publish_all(&js, &subject, rows, &outages);
    tokio::pin!(publishing);
    let mut progress =
        tokio::time::interval_at(tokio::time::Instant::now() + progress_every, progress_every);
    let acked = loop {
        tokio::select! {
            acked = &mut publishing => break acked?,
            _ = progress.tick() => {
                if let Err(e) = block.ack_with(AckKind::Progress).await {
                    tracing::debug!("progress ack failed ({e})");
                }
            }
        }
    };
    let started = Instant::now();
    loop {
        match block.double_ack().await {
            Ok(()) => break,
            Err(e) if started.elapsed() < ACK_RETRY_FOR => {
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
