//! FFT worker stage: each worker owns one engine and transforms whole batches. After a fatal
//! engine error the worker keeps draining (and discarding) batches so no other stage blocks.

use super::batcher::{Batch, FrameMeta};
use super::pool::BufferPool;
use super::Control;
use crate::error::FftdError;
use crate::fft::{Engine, HostBuf, Sample, TransformSpec};
use crossbeam_channel::{Receiver, Sender};

/// A transformed batch: `frames.len() * spec.values_out()` output values.
pub struct Done<T> {
    pub id: u64,
    pub spec: TransformSpec,
    pub frames: Vec<FrameMeta>,
    pub values: HostBuf<T>,
}

pub fn run_worker<T: Sample>(
    mut engine: Box<dyn Engine<T>>,
    rx: Receiver<Batch<T>>,
    tx: Sender<Done<T>>,
    control: &Control,
    input_pool: &BufferPool<T>,
    output_pool: &BufferPool<T>,
) {
    let mut failed = false;
    for batch in rx {
        if failed {
            continue;
        }
        let len = batch.frames.len() * batch.spec.values_out();
        let mut values = output_pool.take(len);
        values.set_len_for_overwrite(len);
        let span = tracing::trace_span!("batch", id = batch.id, frames = batch.frames.len());
        let busy = std::time::Instant::now();
        let result = span.in_scope(|| {
            engine.transform(&batch.spec, &batch.data, batch.frames.len(), &mut values)
        });
        crate::stats::Counters::add_since(&control.counters.engine_ns, busy);
        match result {
            Ok(()) => {
                input_pool.give(batch.data);
                let done = Done {
                    id: batch.id,
                    spec: batch.spec,
                    frames: batch.frames,
                    values,
                };
                if tx.send(done).is_err() {
                    failed = true;
                }
            }
            Err(e) => {
                control.fail(FftdError::Runtime(format!(
                    "FFT engine {}: {e}",
                    engine.name()
                )));
                failed = true;
            }
        }
    }
}
