//! FFT worker stage: each worker owns one engine and transforms whole batches. After a fatal
//! engine error the worker keeps draining (and discarding) batches so no other stage blocks.
//! With spectral products the worker also shapes each spectrum into its row (`products::Shaping`:
//! bands, a frequency range), in parallel with the other workers.

use super::batcher::{Batch, FrameMeta};
use super::pool::BufferPool;
use super::Control;
use crate::error::FftdError;
use crate::fft::{Engine, HostBuf, Sample, TransformSpec};
use crate::products::Shaping;
use crossbeam_channel::{Receiver, Sender};

/// A transformed batch: `frames.len()` rows of `spec.values_out()` values, or of the products'
/// columns (× values per bin) when `columns` says so.
pub struct Done<T> {
    pub id: u64,
    pub spec: TransformSpec,
    pub frames: Vec<FrameMeta>,
    pub values: HostBuf<T>,
    /// Columns per row when products shaped the rows (already in output order: no fftshift left).
    pub columns: Option<usize>,
}

impl<T> Done<T> {
    /// Bins (or product columns) per row.
    pub fn columns(&self) -> usize {
        self.columns.unwrap_or(self.spec.bins())
    }

    /// Values per row.
    pub fn width(&self) -> usize {
        self.columns() * self.spec.scale.values_per_bin()
    }
}

pub fn run_worker<T: Sample>(
    mut engine: Box<dyn Engine<T>>,
    rx: Receiver<Batch<T>>,
    tx: Sender<Done<T>>,
    control: &Control,
    (input_pool, output_pool): (&BufferPool<T>, &BufferPool<T>),
    shaping: Option<&Shaping>,
) {
    let mut failed = false;
    for batch in rx {
        if failed {
            continue;
        }
        // band powers are summed by the engine itself (on a device: only the bands come back)
        let bands = shaping
            .and_then(|s| s.plan(&batch.spec))
            .and_then(|p| p.band_weights());
        let per_frame = bands.map_or(batch.spec.values_out(), |b| b.bands());
        let len = batch.frames.len() * per_frame;
        let mut values = output_pool.take(len);
        values.set_len_for_overwrite(len);
        let span = tracing::trace_span!("batch", id = batch.id, frames = batch.frames.len());
        let busy = std::time::Instant::now();
        let (spec, frames) = (&batch.spec, batch.frames.len());
        let result = span.in_scope(|| match bands {
            Some(b) => engine.transform_bands(spec, &batch.data, frames, b, &mut values),
            None => engine.transform(spec, &batch.data, frames, &mut values),
        });
        crate::stats::Counters::add_since(&control.counters.engine_ns, busy);
        match result {
            Ok(()) => {
                input_pool.give(batch.data);
                let mut done = Done {
                    id: batch.id,
                    spec: batch.spec,
                    frames: batch.frames,
                    values,
                    columns: bands.map(|b| b.bands()),
                };
                if let Some(shaping) = shaping {
                    let busy = std::time::Instant::now();
                    match bands {
                        Some(_) => shaping.finish_rows(&mut done.values),
                        None => shape(&mut done, shaping, output_pool),
                    }
                    crate::stats::Counters::add_since(&control.counters.engine_ns, busy);
                }
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

/// Replaces a batch's spectra by its product rows (a new buffer; the spectra go back to the pool).
fn shape<T: Sample>(done: &mut Done<T>, shaping: &Shaping, pool: &BufferPool<T>) {
    let Some(plan) = shaping.plan(&done.spec) else {
        return;
    };
    let len = done.frames.len() * plan.width();
    let mut rows = pool.take(len);
    rows.set_len_for_overwrite(len);
    done.columns = shaping.shape(&done.spec, done.frames.len(), &done.values, &mut rows);
    let spectra = std::mem::replace(&mut done.values, rows);
    pool.give(spectra);
}
