//! Sink stage: receives encoded batches, puts them back in batch order and writes each output's
//! bytes (`sink::output::Outputs` adds headers, opens and closes files). Records frame-complete →
//! written latency. A closed stdout stops the run quietly; any other write error is reported.
//! After a stop it keeps draining so upstream stages can finish.

use super::dispatch::Dispatcher;
use super::encode::Encoded;
use super::pool::{BufferPool, BytePool};
use super::{Control, StreamWritten};
use crate::error::FftdError;
use crate::serve::hub::LiveHub;
use crate::sink::output::{Outputs, Rows};
use crate::stats::{Counters, Latency, LocalLatency};
use crate::timeline::{Kind, Phase, ThreadClock};
use crate::types::Sample;
use crate::types::StreamMeta;
use crossbeam_channel::Receiver;
use std::collections::BTreeMap;
use std::io;
use std::time::Instant;

/// How often a sink waiting for rows looks for a SIGHUP (issue 27).
const REOPEN_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// The outputs and what the sink needs to account for frames.
pub(super) struct SinkStage<'a, T: Sample> {
    pub outputs: Outputs<'a, T>,
    pub streams: &'a [StreamMeta],
    /// Where written byte buffers go back to the encoders.
    pub pool: &'a BytePool,
    /// Where spectra buffers written as they are (`Encoded::values`) go back to the workers.
    pub values_pool: &'a BufferPool<T>,
    /// The live view (`--serve`), which gets the `/spectra` rows in order.
    pub live: Option<&'a LiveHub>,
    /// Whether frames past a failed input's cut (`Control::cut_stream`) are left out here.
    pub cuts_apply: bool,
    /// issue 27: `--alert` rules, followed in row order.
    pub alerts: Option<crate::alerts::Alerts>,
    /// The dispatcher whose batch numbers these are (not the averaging stage's), told the
    /// sink's place: it holds producers a window ahead of it (`Dispatcher::taken_in_order`).
    pub order: Option<&'a Dispatcher<T>>,
}

pub(super) fn run_sink<T: Sample>(
    rx: Receiver<Encoded<T>>,
    stage: SinkStage<'_, T>,
    control: &Control,
    latency: &mut Latency,
) -> Vec<StreamWritten> {
    let mut sink = Sink {
        written: vec![StreamWritten::default(); stage.streams.len()],
        stage,
        control,
        latency,
        reorder: BTreeMap::new(),
        next: 0,
        healthy: true,
        alerts_failed: false,
        clock: control.clock(Kind::Sink, Phase::Write),
    };
    loop {
        // after the last batch, once more: batches a failed input's numbers held back
        let arrived = match rx.recv_timeout(REOPEN_CHECK) {
            Ok(encoded) => Some(encoded),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => None,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                sink.reopen_if_asked();
                // past numbers that never come (a failed input's), which no arrival may follow
                // while the producers wait a window ahead of them
                sink.write_in_order(None);
                continue;
            }
        };
        sink.clock.lap(Phase::SinkInput);
        let ended = arrived.is_none();
        sink.write_in_order(arrived);
        if ended {
            break;
        }
        // Nothing else waiting: push output out now (keeps live output timely).
        if sink.healthy && rx.is_empty() {
            sink.flush();
        }
    }
    sink.finish()
}

/// The sink's state: the stage, the batches waiting for their turn and what has been written.
struct Sink<'a, 'l, T: Sample> {
    stage: SinkStage<'a, T>,
    control: &'a Control,
    latency: &'l mut Latency,
    written: Vec<StreamWritten>,
    reorder: BTreeMap<u64, Encoded<T>>,
    /// The number of the batch written next.
    next: u64,
    /// No write has failed.
    healthy: bool,
    /// An alert's event or recording could not be written (not tried again at the end).
    alerts_failed: bool,
    clock: ThreadClock<'a>,
}

impl<T: Sample> Sink<'_, '_, T> {
    /// issue 27: a SIGHUP while no rows come closes the files now.
    fn reopen_if_asked(&mut self) {
        if self.healthy {
            if let Err(e) = self.stage.outputs.reopen_if_asked() {
                self.healthy = false;
                report_write_error(e, "an output file", self.control);
            }
        }
    }

    /// Takes a batch that `arrived` and writes every batch whose turn has come.
    fn write_in_order(&mut self, arrived: Option<Encoded<T>>) {
        let control = self.control;
        let first = self.next;
        if let Some(encoded) = arrived {
            self.reorder.insert(encoded.id, encoded);
            Counters::raise(&control.counters.reorder_peak, self.reorder.len() as u64);
        }
        while let Some(batch) = control.next_in_order(&mut self.next, &mut self.reorder) {
            let stage = &mut self.stage;
            if self.healthy {
                let busy = Instant::now();
                let to = (&mut stage.outputs, stage.streams);
                let accounts = (&mut *self.latency, &mut self.written[..]);
                self.healthy = write_batch(&batch, stage.cuts_apply, to, control, accounts);
                Counters::add_since(&control.counters.sink_ns, busy);
            }
            if let (Some(alerts), true) = (stage.alerts.as_mut(), self.healthy) {
                self.healthy = follow_alerts(alerts, &batch, control);
                self.alerts_failed = !self.healthy;
            }
            if let Some((hub, rows)) = stage.live.zip(batch.live.as_ref()) {
                hub.publish_rows(batch.id, rows);
            }
            let stream = batch.frames.first().map(|f| f.stream);
            self.clock.lap_span(Phase::Write, Some(batch.id), stream);
            stage.pool.give(batch.bytes);
            if let Some(values) = batch.values {
                stage.values_pool.give(values);
            }
        }
        if let Some(dispatcher) = self.stage.order.filter(|_| self.next > first) {
            dispatcher.taken_in_order(self.next);
        }
    }

    fn flush(&mut self) {
        let busy = Instant::now();
        let outputs = &mut self.stage.outputs;
        if let Err((i, e)) = outputs.flush() {
            self.healthy = false;
            report_write_error(e, &outputs.describe(i), self.control);
        }
        Counters::add_since(&self.control.counters.sink_ns, busy);
        self.clock.lap_span(Phase::Write, None, None);
    }

    /// After the last batch: the events file and the outputs finished (their trailers).
    fn finish(self) -> Vec<StreamWritten> {
        let Sink {
            stage,
            control,
            healthy,
            alerts_failed,
            written,
            ..
        } = self;
        let SinkStage {
            mut outputs,
            mut alerts,
            ..
        } = stage;
        // (the recordings completed even where writing failed during the run, whose error is
        // the run's and is not said again)
        if let Some(Err(e)) = alerts.as_mut().map(crate::alerts::Alerts::finish) {
            match alerts_failed {
                false => report_write_error(e.error, &e.target, control),
                true => tracing::debug!("after the alerts' failure: {}: {}", e.target, e.error),
            }
        }
        if healthy {
            if let Err((i, e)) = outputs.finish(control.has_failed(), stage.streams) {
                report_write_error(e, &outputs.describe(i), control);
            }
        } else {
            outputs.finish_after_error();
        }
        written
    }
}

/// Writes one batch's parts in order and accounts for their frames; false after a write error.
fn write_batch<T: Sample>(
    batch: &Encoded<T>,
    cuts_apply: bool,
    (outputs, streams): (&mut Outputs<'_, T>, &[StreamMeta]),
    control: &Control,
    (latency, written): (&mut Latency, &mut [StreamWritten]),
) -> bool {
    for part in &batch.parts {
        let frames = &batch.frames[part.frames.clone()];
        let Some(first) = frames.first() else {
            continue;
        };
        // a range-read batch is one stream's consecutive frames: past a cut, all of it is
        if cuts_apply && control.is_cut(first.stream, first.seq) {
            continue;
        }
        let rows = Rows {
            first: &streams[first.stream],
            n: batch.n,
            bins: batch.bins,
            count: frames.len() as u64,
            bytes: &batch.row_bytes()[part.bytes.clone()],
            marks: batch.marks.get(part.frames.clone()).unwrap_or_default(),
        };
        if let Err(e) = outputs.write(part.output, &rows) {
            report_write_error(e, &outputs.describe(part.output), control);
            return false;
        }
        // the part's rows were written together, at one instant: read the clock once a part,
        // not once a row (a clock read per row was 10 % of a hop-16 run's samples, the sink the
        // bound: 8.4 M rows on 32 cores of an H200 host at 16 GiB had it 45 % busy)
        let written_at = Instant::now();
        let mut buckets = LocalLatency::default();
        // frames completed at one instant (a range reader's batch) recorded at once
        for run in frames.chunk_by(|a, b| a.completed == b.completed) {
            let waited = written_at.saturating_duration_since(run[0].completed);
            latency.record_n(waited, run.len() as u64);
            buckets.record_n(waited, run.len() as u64);
            for frame in run {
                written[frame.stream].frames += 1;
                written[frame.stream].n = batch.n;
                let _frame_span =
                    tracing::debug_span!("frame", stream = frame.stream, seq = frame.seq).entered();
                tracing::debug!(latency_us = waited.as_micros() as u64, "spectrum written");
            }
        }
        buckets.flush(&control.counters.latency);
        Counters::add(&control.counters.frames_out, frames.len() as u64);
    }
    true
}

/// issue 27: follows a batch's alert levels in row order; false after an event could not be
/// written.
fn follow_alerts<T: Sample>(
    alerts: &mut crate::alerts::Alerts,
    batch: &Encoded<T>,
    control: &Control,
) -> bool {
    let rules = alerts.rules().len();
    if let Err(e) = alerts.tick() {
        report_write_error(e.error, &e.target, control); // --retry's gap events
        return false;
    }
    for (k, &(stream, time_s)) in batch.alert_rows.iter().enumerate() {
        let levels = batch
            .alert_levels
            .get(k * rules..(k + 1) * rules)
            .unwrap_or_default();
        if let Err(e) = alerts.observe(stream, time_s, levels) {
            report_write_error(e.error, &e.target, control);
            return false;
        }
    }
    true
}

/// A closed pipe (`| head`) ends the run quietly; other write errors are fatal.
fn report_write_error(e: io::Error, output: &str, control: &Control) {
    if e.kind() == io::ErrorKind::BrokenPipe {
        tracing::debug!("output closed by the reader; stopping");
        control.stop_for_closed_output();
    } else {
        control.fail(FftdError::Runtime(format!("cannot write to {output}: {e}")));
    }
}
