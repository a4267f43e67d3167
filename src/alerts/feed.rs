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
    pub fn publish_gap(&self, json: &str) {
        self.send("gap", json);
    }

    fn send(&self, kind: &str, json: &str) {
        let message = format!("event: {kind}\ndata: {json}\n\n");
        let _ = self.tx.send(Arc::from(message)); // no reader: nothing to do
    }

    /// The `/metrics` lines: a counter per rule and event kind.
    pub fn render_metrics(&self, out: &mut String) {
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
    pub fn sse_body(&self) -> axum::body::Body {
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
pub struct NatsEvents {
    runtime: tokio::runtime::Runtime,
    client: async_nats::Client,
    subject: String,
}

impl NatsEvents {
    /// Connects now with the fleet's connection flags (credentials, token, user and password,
    /// TLS: `args`, or the address and `$NATS_*`): a server that does not answer or refuses
    /// them stops the run before it starts.
    pub fn connect(url: &str, args: &crate::fleet::connect::NatsArgs) -> Result<Self, String> {
        let parsed = crate::types::nats_url::NatsUrl::parse("--events", url)?;
        let subject = parsed.subject("--events")?;
        let runtime = crate::fleet::connect::runtime().map_err(|e| e.to_string())?;
        let client = runtime
            .block_on(args.connect(&parsed, "fftd-events"))
            .map_err(|e| format!("--events: {e}"))?;
        Ok(NatsEvents {
            runtime,
            client,
            subject,
        })
    }

    pub fn publish(&mut self, json: String) -> std::io::Result<()> {
        let subject = self.subject.clone();
        self.runtime
            .block_on(self.client.publish(subject, json.into()))
            .map_err(std::io::Error::other)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.runtime
            .block_on(self.client.flush())
            .map_err(std::io::Error::other)
    }
}
