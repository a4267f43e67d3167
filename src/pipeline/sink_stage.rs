//! Sink stage: receives transformed batches, puts them back in batch order, and writes every frame
//! to its stream's writer. Records frame-complete → written latency. A closed stdout stops the run
//! quietly; any other write error is reported. After a stop it keeps draining so upstream stages
//! can finish.

use super::pool::BufferPool;
use super::worker::Done;
use super::{Control, StreamWritten};
use crate::error::FftdError;
use crate::fft::{InputKind, Sample};
use crate::sink::{SpectrumRow, SpectrumWriter, StreamMeta};
use crate::stats::{Counters, Latency};
use crossbeam_channel::Receiver;
use std::collections::BTreeMap;
use std::io;
use std::time::Instant;

/// The writers and what the sink needs to route frames to them.
pub struct SinkStage<'a, T: Sample> {
    pub writers: Vec<Box<dyn SpectrumWriter<T>>>,
    /// Writer index of each stream.
    pub writer_of: &'a [usize],
    /// Name of each writer's destination, for messages.
    pub outputs: &'a [String],
    pub streams: &'a [StreamMeta],
    /// Where spent output buffers go back to the workers.
    pub pool: &'a BufferPool<T>,
}

pub fn run_sink<T: Sample>(
    rx: Receiver<Done<T>>,
    stage: SinkStage<'_, T>,
    control: &Control,
    latency: &mut Latency,
) -> Vec<StreamWritten> {
    let SinkStage {
        mut writers,
        writer_of,
        outputs,
        streams,
        pool,
    } = stage;
    let mut written = vec![StreamWritten::default(); streams.len()];
    let mut reorder: BTreeMap<u64, Done<T>> = BTreeMap::new();
    let mut next = 0u64;
    let mut healthy = true;
    let mut shifted: Vec<T> = Vec::new();
    let mut dirty = vec![false; writers.len()];
    for done in rx.iter() {
        reorder.insert(done.id, done);
        while let Some(done) = reorder.remove(&next) {
            next += 1;
            if !healthy {
                continue;
            }
            let busy = Instant::now();
            let bins = done.spec.bins();
            for (i, frame) in done.frames.iter().enumerate() {
                let stream = &streams[frame.stream];
                let mut values = &done.values[i * bins..(i + 1) * bins];
                if stream.fftshift && stream.kind == InputKind::Complex {
                    shifted.clear();
                    shifted.extend_from_slice(values);
                    shifted.rotate_left(bins.div_ceil(2));
                    values = &shifted;
                }
                let row = SpectrumRow {
                    stream,
                    frame: frame.seq,
                    time_s: frame.start as f64 / stream.rate,
                    n: done.spec.n,
                    values,
                };
                let w = writer_of[frame.stream];
                if let Err(e) = writers[w].write(&row) {
                    healthy = false;
                    report_write_error(e, &outputs[w], control);
                    break;
                }
                dirty[w] = true;
                let waited = frame.completed.elapsed();
                latency.record(waited);
                Counters::add(&control.counters.frames_out, 1);
                written[frame.stream].frames += 1;
                written[frame.stream].n = done.spec.n;
                let _frame_span =
                    tracing::debug_span!("frame", stream = frame.stream, seq = frame.seq).entered();
                tracing::debug!(latency_us = waited.as_micros() as u64, "spectrum written");
            }
            pool.give(done.values);
            Counters::add_since(&control.counters.sink_ns, busy);
        }
        // Nothing else waiting: push output out now (keeps live output timely).
        if healthy && rx.is_empty() {
            let busy = Instant::now();
            for (w, (writer, d)) in writers.iter_mut().zip(dirty.iter_mut()).enumerate() {
                if *d {
                    *d = false;
                    if let Err(e) = writer.flush() {
                        healthy = false;
                        report_write_error(e, &outputs[w], control);
                        break;
                    }
                }
            }
            Counters::add_since(&control.counters.sink_ns, busy);
        }
    }
    if healthy {
        for (w, writer) in writers.iter_mut().enumerate() {
            if let Err(e) = writer.finish() {
                report_write_error(e, &outputs[w], control);
                break;
            }
        }
    }
    written
}

/// A closed pipe (`| head`) ends the run quietly; other write errors are fatal.
fn report_write_error(e: io::Error, output: &str, control: &Control) {
    if e.kind() == io::ErrorKind::BrokenPipe {
        tracing::debug!("output closed by the reader; stopping");
        control.request_stop();
    } else {
        control.fail(FftdError::Runtime(format!("cannot write to {output}: {e}")));
    }
}
