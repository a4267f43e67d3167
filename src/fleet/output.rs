//! A NATS destination: `--output nats://HOST:PORT/SUBJECT` of a local run (files, stdin or
//! `--mic`) publishes its rows as JetStream messages on SUBJECT, exactly as a fleet worker
//! publishes its rows (docs/fleet.md): batches of consecutive rows of a stream (`fleet::batch`,
//! as many as fit the server's max_payload or `--rows-per-message`), or with
//! `--rows-per-message 1` one message per row whose payload is the row in `--format` (f32 by
//! default); the headers are `fleet::rows::RowHeaders` (source, run, stream, frame, time_s,
//! scale, bins, n, hop; a batch adds rows and layout) and `Nats-Msg-Id` names the message by
//! subject, source, run, stream, frame(s) and analysis, so a publish retried after a lost ack is
//! stored once. Every run is a run of its own (a new run id),
//! so the same recording analysed again is new rows, not duplicates.
//!
//! Takes: encoded rows with their marks (`output::Rows`, `RowMark`), from the sink stage, in
//! order. Gives: batch messages (or one message per row). Each call's rows are one publish task on the NATS client's
//! runtime (`fleet::publish_acked::Publishing`: acks awaited, failures retried for up to two
//! minutes); at most `IN_FLIGHT` batches or bytes wait for acks at once, so a slow server slows
//! the run (the sink waits) rather than filling memory. Batches in flight together may be stored
//! in any order: readers order rows by (source, run, stream, frame). `finish` returns once every
//! row is acknowledged.

use crate::error::{FftdError, Result};
use crate::fleet::batch::{Packing, Row, RowsOf};
use crate::fleet::ids::{new_run_id, Origin};
use crate::fleet::jetstream::stream_capturing;
use crate::fleet::outage::Outages;
use crate::fleet::publish_acked::{publishing_context, InFlightLimit, Publishing};
use crate::fleet::rows::analysis_of;
use crate::sink::analysis::Analysis;
use crate::sink::output::Rows;
use crate::types::StreamMeta;
use std::io;
use tokio::runtime::Runtime;

/// A local run's rows published to NATS (`--output nats://HOST:PORT/SUBJECT` with file or
/// microphone input), one message per row as a fleet worker publishes them (`sink::nats`).
#[derive(Clone, Debug)]
pub struct NatsOutput {
    pub url: crate::types::nats_url::NatsUrl,
    pub subject: String,
    /// Credentials and TLS (the command line's `--nats-*` flags, set by `main`).
    pub nats: crate::fleet::connect::NatsArgs,
    /// `--rows-per-message`.
    pub rows_per_message: crate::fleet::batch::RowsPerMessage,
    /// `--retry`: how long publishes are retried while the server is away (`outage`).
    pub retry: Option<crate::source::retry_policy::RetryPolicy>,
}

/// What may await acks at once: many small batches (live input, a few rows each, over a slow
/// link) or a bounded amount of payload (large frames).
const IN_FLIGHT: InFlightLimit = InFlightLimit {
    batches: 64,
    bytes: 64 << 20,
};

/// A connection to the server whose stream captures the output subject: made before a run reads
/// anything (before a microphone starts capturing), so a server that cannot take the rows stops
/// the run at once and a slow connect loses no live input.
pub(crate) struct NatsConnection {
    rt: Runtime,
    publishing: Publishing,
    /// The address, redacted (no secret), for messages.
    address: String,
    /// How rows become messages (`--rows-per-message`, the server's max_payload).
    packing: Packing,
    /// The server's outages (`--retry`), in the run's record.
    outages: std::sync::Arc<Outages>,
}

impl NatsConnection {
    /// Connects (bounded by `--connect-timeout`) and checks that a JetStream stream captures the
    /// subject.
    pub(crate) fn open(output: &NatsOutput) -> Result<NatsConnection> {
        let rt = crate::fleet::connect::runtime()?;
        let outages = Outages::recorded(output.retry, output.url.to_string());
        let (js, max_payload) = rt.block_on(async {
            let watched = Some(outages.clone());
            let client = (output.nats)
                .connect_watched(&output.url, "fftd", watched)
                .await?;
            let max_payload = client.server_info().max_payload;
            let js = publishing_context(client);
            stream_capturing(&js, &output.subject).await?;
            Ok::<_, FftdError>((js, max_payload))
        })?;
        Ok(NatsConnection {
            rt,
            publishing: Publishing::new(js, output.subject.clone(), IN_FLIGHT, outages.clone()),
            outages,
            address: output.url.to_string(),
            packing: Packing::for_server(output.rows_per_message, max_payload),
        })
    }
}

/// Rows of one run on their way to a NATS subject.
pub(crate) struct NatsRows {
    connection: NatsConnection,
    /// This run's id (`fleet::ids::new_run_id`).
    run: String,
    /// `fleet::rows::analysis_of` the run's analysis.
    analysis: String,
    scale: &'static str,
    hop: usize,
    /// The `source` header of each stream: its input, control characters escaped.
    sources: Vec<String>,
}

impl crate::sink::destination::RowMessages for NatsRows {
    fn describe(&self) -> String {
        NatsRows::describe(self)
    }
    fn send(&mut self, rows: &Rows<'_>) -> io::Result<()> {
        NatsRows::send(self, rows)
    }
    fn finish(&mut self) -> io::Result<()> {
        NatsRows::finish(self)
    }
}

impl NatsRows {
    /// The rows of `streams`, framed `(n, hop)`, through `connection`.
    pub(crate) fn new(
        connection: NatsConnection,
        analysis: &Analysis,
        streams: &[StreamMeta],
        (n, hop): (usize, usize),
    ) -> NatsRows {
        connection.outages.set_streams(0..streams.len());
        NatsRows {
            connection,
            run: new_run_id(),
            analysis: analysis_of(analysis, n, hop),
            scale: analysis.scale.name(),
            hop,
            sources: streams.iter().map(|s| source_of(&s.input)).collect(),
        }
    }

    /// The address (redacted) and the run, for messages and `--meta`.
    pub(crate) fn describe(&self) -> String {
        format!("{} (run {})", self.connection.address, self.run)
    }

    /// Starts publishing `rows`, batched as `--rows-per-message` says (each stream's run of
    /// consecutive rows in this part split by `fleet::batch`); waits while too much awaits acks.
    /// An error is a batch that could not be stored. Rows are never held back for a later part,
    /// so a live row waits for nothing but its part (whose wait `--max-latency` bounds).
    pub(crate) fn send(&mut self, rows: &Rows<'_>) -> io::Result<()> {
        if rows.marks.len() as u64 != rows.count {
            return Err(io::Error::other(format!(
                "{} rows came with {} row marks",
                rows.count,
                rows.marks.len()
            )));
        }
        let subject = self.connection.publishing.subject();
        let mut messages = Vec::new();
        let mut start = 0;
        while start < rows.marks.len() {
            let stream = rows.marks[start].stream;
            let end = rows.marks[start..]
                .iter()
                .position(|m| m.stream != stream)
                .map_or(rows.marks.len(), |k| start + k);
            let batch: Vec<Row> = rows.marks[start..end]
                .iter()
                .map(|m| Row {
                    frame: m.frame,
                    time_s: m.time_s,
                    bytes: m.bytes.clone(),
                })
                .collect();
            let of = RowsOf {
                origin: Origin {
                    subject,
                    source: &self.sources[stream],
                    run: &self.run,
                    stream,
                },
                scale: self.scale,
                bins: rows.bins,
                n: rows.n,
                hop: self.hop,
                analysis: &self.analysis,
            };
            self.connection
                .packing
                .messages(&of, &batch, rows.bytes, &mut messages);
            start = end;
        }
        let NatsConnection { rt, publishing, .. } = &mut self.connection;
        publishing.send(rt, messages).map_err(as_io)
    }

    /// Waits until every row sent is acknowledged.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let NatsConnection { rt, publishing, .. } = &mut self.connection;
        publishing.settle_all(rt).map_err(as_io)?;
        let acked = publishing.acked;
        tracing::debug!(
            stored = acked.stored,
            duplicates = acked.duplicates,
            "rows published to {}",
            self.describe()
        );
        Ok(())
    }
}

fn as_io(e: FftdError) -> io::Error {
    io::Error::other(e.to_string())
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
