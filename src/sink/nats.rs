//! A NATS destination: `--output nats://HOST:PORT/SUBJECT` of a local run (files, stdin or
//! `--mic`) publishes each row as one JetStream message on SUBJECT, exactly as a fleet worker
//! publishes its rows (docs/fleet.md): the payload is the row in `--format` (f32 by default), the
//! headers are `fleet::rows::RowHeaders` (source, run, stream, frame, time_s, scale, bins, n,
//! hop) and `Nats-Msg-Id` names the row by subject, source, run, stream, frame and analysis, so a
//! publish retried after a lost ack is stored once. Every run is a run of its own (a new run id),
//! so the same recording analysed again is new rows, not duplicates.
//!
//! Takes: encoded rows with their marks (`output::Rows`, `RowMark`), from the sink stage, in
//! order. Gives: one message per row. Each call's rows are one publish task on the NATS client's
//! runtime (`fleet::publish_acked`: acks awaited, failures retried for up to two minutes); at most
//! `BATCHES_IN_FLIGHT` tasks wait for acks at once, so a slow server slows the run (the sink
//! waits) rather than filling memory. `finish` returns once every row is acknowledged.

use super::output::Rows;
use crate::config::{NatsOutput, Settings};
use crate::error::{FftdError, Result};
use crate::fleet::connect::NatsArgs;
use crate::fleet::ids::{new_run_id, Origin};
use crate::fleet::jetstream::stream_capturing;
use crate::fleet::publish_acked::{publish_all, Acked, Outgoing};
use crate::fleet::rows::{analysis_of, RowHeaders};
use crate::sink::StreamMeta;
use async_nats::jetstream::Context;
use std::collections::VecDeque;
use std::io;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// Batches of rows whose acks may be awaited at once.
const BATCHES_IN_FLIGHT: usize = 4;

/// Rows of one run on their way to a NATS subject.
pub struct NatsRows {
    rt: Runtime,
    js: Context,
    /// The address, redacted (no secret), for messages.
    address: String,
    subject: String,
    /// This run's id (`fleet::ids::new_run_id`).
    run: String,
    /// `fleet::rows::analysis_of` the run's settings.
    analysis: String,
    scale: &'static str,
    hop: usize,
    /// The `source` header of each stream: its input, control characters escaped.
    sources: Vec<String>,
    tasks: VecDeque<JoinHandle<Result<Acked>>>,
    acked: Acked,
}

impl NatsRows {
    /// Connects (bounded by `--connect-timeout`) and checks that a JetStream stream captures the
    /// subject, so a run that could not store its rows fails before it reads anything.
    pub fn connect(
        output: &NatsOutput,
        nats: &NatsArgs,
        settings: &Settings,
        streams: &[StreamMeta],
        (n, hop): (usize, usize),
    ) -> Result<NatsRows> {
        let rt = crate::fleet::connect::runtime()?;
        let js = rt.block_on(async {
            let client = nats.connect(&output.url, "fftd").await?;
            let js = async_nats::jetstream::new(client);
            stream_capturing(&js, &output.subject).await?;
            Ok::<_, FftdError>(js)
        })?;
        Ok(NatsRows {
            rt,
            js,
            address: output.url.to_string(),
            subject: output.subject.clone(),
            run: new_run_id(),
            analysis: analysis_of(settings, n, hop),
            scale: settings.scale.name(),
            hop,
            sources: streams.iter().map(|s| source_of(&s.input)).collect(),
            tasks: VecDeque::new(),
            acked: Acked::default(),
        })
    }

    /// The address (redacted) and the run, for messages and `--meta`.
    pub fn describe(&self) -> String {
        format!("{} (run {})", self.address, self.run)
    }

    /// Starts publishing `rows`, one message each; waits while `BATCHES_IN_FLIGHT` batches are
    /// unacknowledged. An error is a batch that could not be stored.
    pub fn send(&mut self, rows: &Rows<'_>) -> io::Result<()> {
        let messages = rows
            .marks
            .iter()
            .map(|mark| Outgoing {
                headers: RowHeaders {
                    origin: Origin {
                        subject: &self.subject,
                        source: &self.sources[mark.stream],
                        run: &self.run,
                        stream: mark.stream,
                    },
                    frame: mark.frame,
                    time_s: mark.time_s,
                    scale: self.scale,
                    bins: rows.bins,
                    n: rows.n,
                    hop: self.hop,
                }
                .to_headers(&self.analysis),
                payload: bytes::Bytes::copy_from_slice(&rows.bytes[mark.bytes.clone()]),
            })
            .collect();
        let (js, subject) = (self.js.clone(), self.subject.clone());
        let task = self
            .rt
            .spawn(async move { publish_all(&js, &subject, messages).await });
        self.tasks.push_back(task);
        while self.tasks.len() > BATCHES_IN_FLIGHT
            || self.tasks.front().is_some_and(JoinHandle::is_finished)
        {
            self.settle_oldest()?;
        }
        Ok(())
    }

    /// Waits until every row sent is acknowledged.
    pub fn finish(&mut self) -> io::Result<()> {
        while !self.tasks.is_empty() {
            self.settle_oldest()?;
        }
        tracing::debug!(
            stored = self.acked.stored,
            duplicates = self.acked.duplicates,
            "rows published to {}",
            self.describe()
        );
        Ok(())
    }

    /// Rows the server stored, and those it had already (a retried publish).
    pub fn acked(&self) -> Acked {
        self.acked
    }

    fn settle_oldest(&mut self) -> io::Result<()> {
        let Some(task) = self.tasks.pop_front() else {
            return Ok(());
        };
        let acked = self
            .rt
            .block_on(task)
            .map_err(|e| io::Error::other(format!("publishing task failed: {e}")))?
            .map_err(|e| io::Error::other(e.to_string()))?;
        self.acked.stored += acked.stored;
        self.acked.duplicates += acked.duplicates;
        Ok(())
    }
}

/// A stream's `source` header: its input as given, with control characters (a line break in a
/// file name), which a header cannot carry, escaped.
fn source_of(input: &str) -> String {
    match input.chars().any(char::is_control) {
        true => input.escape_debug().to_string(),
        false => input.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::source_of;

    #[test]
    fn a_source_header_never_holds_a_control_character() {
        assert_eq!(source_of("rec.wav"), "rec.wav");
        assert_eq!(source_of("a\nb.wav"), "a\\nb.wav");
        assert!(!source_of("x\r\t\u{7}").chars().any(char::is_control));
    }
}
