//! Where events go beyond `--events` files: the live view's feed (server-sent events at
//! `/events`: `event: alert` for the rules' starts and ends, `event: gap` for a `--retry`
//! input's outages, each of which the page marks on the waterfall; and the `/metrics` counters
//! `fftd_alert_events_total{alert,event}`), and a NATS subject (`--events nats://…`).

use super::events::Event;
use super::state::Change;
use std::sync::{Arc, Mutex};

/// Events a slow `/events` reader may fall behind by before it misses some.
const FEED_EVENTS: usize = 256;

/// The live view's end of the alerts.
pub struct AlertFeed {
    /// Each event's whole server-sent-events message (`event: …`, `data: …`, a blank line).
    tx: tokio::sync::broadcast::Sender<Arc<str>>,
    /// Per rule (in rule order): its name and its starts and ends so far.
    counts: Mutex<Vec<(String, [u64; 2])>>,
}

impl AlertFeed {
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        AlertFeed {
            tx: tokio::sync::broadcast::channel(FEED_EVENTS).0,
            counts: Mutex::new(names.into_iter().map(|n| (n, [0, 0])).collect()),
        }
    }

    /// The rules' names, in rule order.
    pub fn names(&self) -> Vec<String> {
        self.counts
            .lock()
            .map(|c| c.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default()
    }

    /// Counts the event and sends it to every `/events` reader.
    pub fn publish(&self, event: &Event) {
        if let Ok(mut counts) = self.counts.lock() {
            if let Some((_, c)) = counts.iter_mut().find(|(n, _)| *n == event.alert) {
                c[usize::from(event.change == Change::End)] += 1;
            }
        }
        self.send("alert", &event.json());
    }

    /// Sends a `--retry` input's `gap` event object (`source::outages::Gap::json`) to every
    /// `/events` reader (counted on `/metrics` by `source::outages`).
    pub(crate) fn publish_gap(&self, json: &str) {
        self.send("gap", json);
    }

    fn send(&self, kind: &str, json: &str) {
        let message = format!("event: {kind}\ndata: {json}\n\n");
        let _ = self.tx.send(Arc::from(message)); // no reader: nothing to do
    }

    /// The `/metrics` lines: a counter per rule and event kind.
    pub(crate) fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let Ok(counts) = self.counts.lock() else {
            return;
        };
        if counts.is_empty() {
            return; // --retry's gaps only: no rules to count
        }
        out.push_str(
            "# HELP fftd_alert_events_total Alert events per rule (--alert): starts and ends.\n",
        );
        out.push_str("# TYPE fftd_alert_events_total counter\n");
        for (name, [starts, ends]) in counts.iter() {
            let _ = writeln!(
                out,
                "fftd_alert_events_total{{alert=\"{name}\",event=\"start\"}} {starts}"
            );
            let _ = writeln!(
                out,
                "fftd_alert_events_total{{alert=\"{name}\",event=\"end\"}} {ends}"
            );
        }
    }

    /// The body of one `/events` response: `text/event-stream`, an `event: alert` (or
    /// `event: gap`) message per event from now on (`data:` its JSON), a comment line first so
    /// the reader knows it is connected, and a `: missed N` comment where a slow reader missed
    /// events.
    pub(crate) fn sse_body(&self) -> axum::body::Body {
        use axum::body::Bytes;
        use tokio::sync::broadcast::error::RecvError;
        let rx = self.tx.subscribe();
        let hello = futures_util::stream::once(async {
            Ok::<_, std::io::Error>(Bytes::from_static(b": fftd alert events\n\n"))
        });
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            let text = match rx.recv().await {
                Ok(message) => message.to_string(),
                Err(RecvError::Lagged(n)) => format!(": missed {n}\n\n"),
                Err(RecvError::Closed) => return None,
            };
            Some((Ok::<_, std::io::Error>(Bytes::from(text)), rx))
        });
        use futures_util::StreamExt;
        axum::body::Body::from_stream(hello.chain(events))
    }
}

/// `--events nats://HOST:PORT/SUBJECT`: each event a core NATS message on SUBJECT.
///
/// A server that goes away mid-run is waited for as the fleet waits (`fleet::outage`): the
/// client holds the events and reconnects on its own; the outage is a warning, a `gap` event
/// and a count (`--retry`), and the `--retry` policy (without it: 120 s) says how long: while
/// the client is away an attempt counts at each of the policy's pauses (checked at every event
/// and every batch of rows), and when the policy gives up the run fails.
pub struct NatsEvents {
    runtime: tokio::runtime::Runtime,
    client: async_nats::Client,
    subject: String,
    /// The address as shown (no secret).
    address: String,
    outages: Arc<crate::fleet::outage::Outages>,
    attempts: crate::fleet::outage::Attempts,
    /// While the server is away: when the next attempt counts.
    next_attempt: Option<std::time::Instant>,
    /// The policy gave up (the run is failing).
    gave_up: bool,
}

/// How long one publish may wait for room in the client's buffer before it counts as an attempt.
const PUBLISH_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl NatsEvents {
    /// Connects now with the fleet's connection flags (credentials, token, user and password,
    /// TLS: `args`, or the address and `$NATS_*`): a server that does not answer or refuses
    /// them stops the run before it starts. `retry`: `--retry`, for a server that goes later.
    pub fn connect(
        url: &str,
        args: &crate::fleet::connect::NatsArgs,
        retry: Option<crate::source::retry_policy::RetryPolicy>,
    ) -> Result<Self, String> {
        let parsed = crate::types::nats_url::NatsUrl::parse("--events", url)?;
        let subject = parsed.subject("--events")?;
        let address = parsed.to_string();
        let outages = crate::fleet::outage::Outages::recorded(retry, address.clone());
        let runtime = crate::fleet::connect::runtime().map_err(|e| e.to_string())?;
        let watched = Some(outages.clone());
        let client = runtime
            .block_on(args.connect_watched(&parsed, "fftd-events", watched))
            .map_err(|e| format!("--events: {e}"))?;
        Ok(NatsEvents {
            runtime,
            client,
            subject,
            address,
            outages,
            attempts: Default::default(),
            next_attempt: None,
            gave_up: false,
        })
    }

    /// The run's streams (a `gap` event is one per stream).
    pub(crate) fn set_streams(&self, streams: std::ops::Range<usize>) {
        self.outages.set_streams(streams);
    }

    /// While the server is away, counts an attempt at each of the policy's pauses; an error
    /// once the policy gives up. Returns whether the client is connected.
    pub fn watch(&mut self) -> std::io::Result<bool> {
        if self.gave_up {
            return Err(self.gone());
        }
        if crate::fleet::outage::connected(&self.client) {
            self.attempts = Default::default();
            self.next_attempt = None;
            return Ok(true);
        }
        let now = std::time::Instant::now();
        if self.next_attempt.is_some_and(|t| now < t) {
            return Ok(false);
        }
        match (self.outages).failed(&mut self.attempts, "connection lost", 0.0) {
            Some(wait) => {
                self.next_attempt = Some(now + wait);
                Ok(false)
            }
            None => {
                self.gave_up = true;
                Err(self.gone())
            }
        }
    }

    fn gone(&self) -> std::io::Error {
        std::io::Error::other(format!(
            "the NATS server {} did not come back ({}); the events since could not be sent",
            self.address,
            self.outages.policy_name()
        ))
    }

    pub fn publish(&mut self, json: String) -> std::io::Result<()> {
        let payload = bytes::Bytes::from(json);
        loop {
            self.watch()?;
            let (client, subject) = (&self.client, self.subject.clone());
            let sent = self.runtime.block_on(async {
                tokio::time::timeout(PUBLISH_WAIT, client.publish(subject, payload.clone())).await
            });
            match sent {
                Ok(result) => return result.map_err(std::io::Error::other),
                // the client's buffer is full while the server is away: wait a pause
                Err(_) => self.pause(),
            }
        }
    }

    /// Sends what the client holds; while the server is away, as long as the policy lets it.
    pub fn flush(&mut self) -> std::io::Result<()> {
        loop {
            if self.watch()? {
                let client = &self.client;
                let flushed = self.runtime.block_on(async {
                    tokio::time::timeout(PUBLISH_WAIT * 5, client.flush()).await
                });
                if let Ok(Ok(())) = flushed {
                    return Ok(());
                }
            }
            self.pause();
        }
    }

    /// Sleeps until the next attempt (or a moment, when none is due).
    fn pause(&self) {
        let wait = self
            .next_attempt
            .map(|t| t.saturating_duration_since(std::time::Instant::now()))
            .unwrap_or_default()
            .max(std::time::Duration::from_millis(50));
        std::thread::sleep(wait);
    }
}
