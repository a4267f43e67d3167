//! `fftd bench` on several OpenCL devices at once (`--device gpu:all` or a list naming two or
//! more): per frame size, each device's host-to-host rate alone, then all of them together —
//! one thread per device, each transforming its own pinned batch back to back for the same time
//! window after a common start — the aggregate rate, its ratio to the fastest device alone
//! (`all/one`; 2 identical devices ideally give 2.0), and each device's share of the frames
//! done together. Batches live in each device's own pinned memory, as the pipeline packs them.

use crate::error::FftdError;
use crate::fft::opencl::OpenClEngine;
use crate::fft::{transform_reduced, Engine, HostBuf, Reduction, TransformSpec};
use crate::types::Sample;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The batch every device transforms: its input, frame count, reductions and output length.
pub(super) struct BatchPlan<'a, T> {
    pub spec: TransformSpec,
    pub input: &'a [T],
    pub frames: usize,
    pub reduce: Reduction<'a>,
    pub out_len: usize,
}

/// One frame size on every device.
#[derive(Clone, Debug, Default)]
pub(super) struct AllDevicesRow {
    pub n: usize,
    pub frames: usize,
    /// Frames per second of each device alone.
    pub alone: Vec<f64>,
    /// Frames per second of each device while all run.
    pub together: Vec<f64>,
}

impl AllDevicesRow {
    /// Frames per second of all devices together.
    pub(super) fn total(&self) -> f64 {
        self.together.iter().sum()
    }

    /// Frames per second of the fastest device alone.
    pub(super) fn best_alone(&self) -> f64 {
        self.alone.iter().copied().fold(0.0, f64::max)
    }

    /// All devices together over the fastest alone.
    pub(super) fn speedup(&self) -> f64 {
        self.total() / self.best_alone().max(f64::MIN_POSITIVE)
    }

    /// Each device's share of the frames done together, in percent.
    pub(super) fn shares(&self) -> Vec<f64> {
        let total = self.total().max(f64::MIN_POSITIVE);
        self.together.iter().map(|r| 100.0 * r / total).collect()
    }
}

/// A device's engine with the batch in its pinned memory.
struct Loaded<'e, T: Sample> {
    engine: &'e mut OpenClEngine<T>,
    input: HostBuf<T>,
    out: HostBuf<T>,
}

impl<T: Sample> Loaded<'_, T> {
    /// Transforms the batch back to back until `window` has passed (at least once); frames per
    /// second.
    fn run_for(&mut self, plan: &BatchPlan<'_, T>, window: Duration) -> Result<f64, FftdError> {
        let started = Instant::now();
        let mut batches = 0u64;
        while batches == 0 || started.elapsed() < window {
            transform_reduced(
                &mut *self.engine,
                &plan.spec,
                &self.input,
                plan.frames,
                plan.reduce,
                &mut self.out,
            )
            .map_err(|e| FftdError::Runtime(format!("{}: {e}", self.engine.name())))?;
            batches += 1;
        }
        Ok(batches as f64 * plan.frames as f64 / started.elapsed().as_secs_f64())
    }
}

/// Every engine alone, then all together, for `window` each; one warm-up batch first.
pub(super) fn bench_all<T: Sample>(
    engines: &mut [OpenClEngine<T>],
    plan: &BatchPlan<'_, T>,
    window: Duration,
) -> Result<AllDevicesRow, FftdError> {
    let mut loaded: Vec<Loaded<'_, T>> = engines
        .iter_mut()
        .map(|engine| {
            let pinned = engine.pinned_memory();
            let mut input = HostBuf::with_capacity(plan.input.len(), pinned.as_ref());
            input.extend_from_slice(plan.input);
            let mut out = HostBuf::with_capacity(plan.out_len, pinned.as_ref());
            out.set_len_for_overwrite(plan.out_len);
            Loaded { engine, input, out }
        })
        .collect();
    let mut alone = Vec::with_capacity(loaded.len());
    for device in &mut loaded {
        device.run_for(plan, Duration::ZERO)?; // warm-up: kernels built, buffers allocated
        alone.push(device.run_for(plan, window)?);
    }
    let start = Barrier::new(loaded.len());
    let together = std::thread::scope(|scope| {
        let runs: Vec<_> = loaded
            .iter_mut()
            .map(|device| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    device.run_for(plan, window)
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| {
                r.join()
                    .map_err(|_| FftdError::Runtime("a device's bench thread panicked".into()))?
            })
            .collect::<Result<Vec<f64>, FftdError>>()
    })?;
    Ok(AllDevicesRow {
        n: plan.spec.n,
        frames: plan.frames,
        alone,
        together,
    })
}
