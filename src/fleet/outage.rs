//! A NATS server gone (issue 27's recovery for the fleet): how long publishes, fetches and acks
//! that fail are retried, and the outage said and counted once it is over.
//!
//! Without `--retry` a failing publish or fetch is retried with pauses of 0.1 s doubling to 2 s
//! for up to `DEFAULT_RETRY_FOR` (120 s), then the run fails. With `--retry forever|N|DURATION`
//! (`source::retry_policy`, the policy of the microphone, rtl_tcp and FIFO inputs) the policy
//! decides: attempts wait 0.5 s doubling to 30 s, for ever, for N attempts in a row, or for at
//! most DURATION from the first failure. While the client is disconnected an attempt asks
//! nothing of the server (it would only wait for its own timeout): it waits its turn and counts.
//!
//! Many tasks fail together when the server goes (every batch on its way): the first failure
//! opens one outage (a warning), every attempt counts as a retry, and the first success closes
//! it: a log line saying how long and how many attempts, a gap counted, and — for a run that
//! keeps a record of outages (a local run's `--output nats://`, whose `--events` and `/metrics`
//! show them) — a `gap` event (`source::outages`).

use crate::source::outages::{outages, Gap};
use crate::source::retry_policy::RetryPolicy;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long failures are retried without `--retry`.
pub(crate) const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(120);

/// An outage under way.
struct Open {
    began: Instant,
    attempts: u32,
    error: String,
    /// Stream time of the first row not acknowledged (a local run's rows), for its gap event.
    time_s: f64,
}

/// The outages of one connection: the policy, the one under way, and the counts.
pub(crate) struct Outages {
    policy: Option<RetryPolicy>,
    /// The server, as shown (redacted), for log lines and gap events.
    server: String,
    /// Whether outages go into the run's record too (a local run's), or the log and counts only.
    record: bool,
    /// The streams a gap event is for (`set_streams`: known once the inputs are open).
    streams: OnceLock<std::ops::Range<usize>>,
    open: Mutex<Option<Open>>,
    gaps: AtomicU64,
    retries: AtomicU64,
    /// Connections lost and not made again yet.
    down: AtomicUsize,
}

/// What one task's retrying looks like: when its failures began and how many attempts it made.
#[derive(Default)]
pub(crate) struct Attempts {
    began: Option<Instant>,
    made: u32,
}

impl Outages {
    /// The outages of the connection to `server` under `policy` (None: no `--retry`).
    pub(crate) fn new(policy: Option<RetryPolicy>, server: String) -> Arc<Self> {
        Arc::new(Outages {
            policy,
            server,
            record: false,
            streams: OnceLock::new(),
            open: Mutex::new(None),
            gaps: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            down: AtomicUsize::new(0),
        })
    }

    /// As `new`, with the outages in the run's record under `--retry` (`source::outages`: gap
    /// events on `--events`, counters on `/metrics`), for the streams `set_streams` names.
    pub(crate) fn recorded(policy: Option<RetryPolicy>, server: String) -> Arc<Self> {
        Arc::new(Outages {
            policy,
            server,
            record: true,
            streams: OnceLock::new(),
            open: Mutex::new(None),
            gaps: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            down: AtomicUsize::new(0),
        })
    }

    /// The run's streams (a gap event is one per stream), once known.
    pub(crate) fn set_streams(&self, streams: std::ops::Range<usize>) {
        if self.record && self.policy.is_some() {
            outages().register(streams.clone());
        }
        let _ = self.streams.set(streams);
    }

    /// Whether outages go into the run's record (`recorded`, under `--retry`).
    fn recording(&self) -> bool {
        self.record && self.policy.is_some()
    }

    /// The `--retry` policy as given, for messages.
    pub(crate) fn policy_name(&self) -> String {
        match self.policy {
            Some(p) => format!("--retry {p}"),
            None => format!("{} s", DEFAULT_RETRY_FOR.as_secs()),
        }
    }

    /// Outages over so far.
    pub(crate) fn gaps(&self) -> u64 {
        self.gaps.load(Ordering::Relaxed)
    }

    /// Attempts made during outages so far.
    pub(crate) fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// A failure (`error`) of a task whose attempts are `attempts`: opens the outage if none is
    /// under way, and returns how long to wait before the next attempt, or None when the policy
    /// gives up. `time_s`: the stream time of the first row the task holds (0 for blocks).
    pub(crate) fn failed(
        &self,
        attempts: &mut Attempts,
        error: &str,
        time_s: f64,
    ) -> Option<Duration> {
        let now = Instant::now();
        let began = *attempts.began.get_or_insert(now);
        if let Ok(mut open) = self.open.lock() {
            if open.is_none() {
                tracing::warn!(
                    "NATS server {} does not answer ({error}); retrying ({})",
                    self.server,
                    self.policy_name()
                );
                *open = Some(Open {
                    began: now,
                    attempts: 0,
                    error: error.to_string(),
                    time_s,
                });
            }
            if let Some(open) = open.as_mut() {
                open.attempts += 1;
                open.time_s = open.time_s.min(time_s);
            }
        }
        self.retries.fetch_add(1, Ordering::Relaxed);
        if self.recording() {
            outages().attempt();
        }
        let elapsed = began.elapsed();
        let wait = match self.policy {
            None => {
                let wait = Duration::from_millis(100) * (1u32 << attempts.made.min(5));
                (elapsed < DEFAULT_RETRY_FOR).then_some(wait.min(Duration::from_secs(2)))
            }
            Some(policy) => {
                let wait = RetryPolicy::wait(attempts.made + 1);
                policy.allows(attempts.made, elapsed, wait).then_some(wait)
            }
        };
        attempts.made += 1;
        if wait.is_none() {
            self.close(false);
        }
        wait
    }

    /// The client lost its connection: an outage opens (unless one is under way), though no
    /// publish or fetch has failed yet (the client holds them while it reconnects).
    pub(crate) fn lost(&self) {
        self.down.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut open) = self.open.lock() {
            if open.is_none() {
                tracing::warn!(
                    "NATS server {} gone; reconnecting ({})",
                    self.server,
                    self.policy_name()
                );
                *open = Some(Open {
                    began: Instant::now(),
                    attempts: 0,
                    error: "connection lost".into(),
                    time_s: f64::INFINITY,
                });
            }
        }
    }

    /// A connection (re)made: the outage is over once every connection lost is back (`fftd
    /// publish` has one per work shard, lost together when the server goes).
    pub(crate) fn reconnected(&self) {
        let was = (self.down)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                Some(d.saturating_sub(1))
            })
            .unwrap_or(0);
        if was <= 1 {
            self.close(true);
        }
    }

    /// A success: the outage under way, if any, is over (said, counted, and a gap event) —
    /// once every connection lost is back too (a publish on one of several connections
    /// succeeds while the others still reconnect: one outage, not one per connection).
    pub(crate) fn succeeded(&self) {
        if self.down.load(Ordering::Relaxed) == 0 {
            self.close(true);
        }
    }

    fn close(&self, resumed: bool) {
        let Some(open) = self.open.lock().ok().and_then(|mut o| o.take()) else {
            return;
        };
        self.gaps.fetch_add(1, Ordering::Relaxed);
        let gap_s = open.began.elapsed().as_secs_f64();
        match resumed {
            true => tracing::warn!(
                "NATS server {} answers again after {gap_s:.1} s ({} attempt(s)); nothing was lost",
                self.server,
                open.attempts
            ),
            false => tracing::warn!(
                "NATS server {}: gave up after {gap_s:.1} s and {} attempt(s) ({})",
                self.server,
                open.attempts,
                self.policy_name()
            ),
        }
        if self.recording() {
            outages().gap(&Gap {
                input: self.server.clone(),
                streams: self.streams.get().cloned().unwrap_or(0..1),
                time_s: if open.time_s.is_finite() {
                    open.time_s
                } else {
                    0.0
                },
                gap_s,
                attempts: open.attempts,
                error: open.error,
                resumed,
            });
        }
    }
}

/// Whether `client` is connected now (an attempt while it is not would only time out).
pub(crate) fn connected(client: &async_nats::Client) -> bool {
    client.connection_state() == async_nats::connection::State::Connected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_of_attempts_gives_up_and_the_outage_is_counted_once() {
        let o = Outages::new(Some(RetryPolicy::Attempts(2)), "nats://x:1".into());
        let (mut a, mut b) = (Attempts::default(), Attempts::default());
        assert_eq!(o.failed(&mut a, "gone", 0.0), Some(RetryPolicy::wait(1)));
        assert!(o.failed(&mut b, "gone", 0.0).is_some(), "another task");
        assert!(o.failed(&mut a, "gone", 0.0).is_some());
        assert_eq!(o.failed(&mut a, "gone", 0.0), None, "2 attempts made");
        assert_eq!((o.gaps(), o.retries()), (1, 4));
        o.succeeded();
        assert_eq!(o.gaps(), 1, "closed once");
    }

    #[test]
    fn several_connections_lost_together_are_one_outage_over_when_all_are_back() {
        let o = Outages::new(None, "nats://x:1".into());
        (0..3).for_each(|_| o.lost());
        o.reconnected();
        o.reconnected();
        o.succeeded(); // a publish on a connection that is back
        assert_eq!(o.gaps(), 0, "one connection still away");
        o.reconnected();
        assert_eq!(o.gaps(), 1, "over, once");
        o.reconnected(); // a first connection's event: nothing was lost
        assert_eq!(o.gaps(), 1);
    }

    #[test]
    fn without_retry_the_pause_doubles_to_two_seconds() {
        let o = Outages::new(None, "nats://x:1".into());
        let mut a = Attempts::default();
        let waits: Vec<u128> = (0..7)
            .filter_map(|_| o.failed(&mut a, "gone", 0.0))
            .map(|w| w.as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 2000, 2000]);
        o.succeeded();
        assert_eq!(o.gaps(), 1);
    }
}
