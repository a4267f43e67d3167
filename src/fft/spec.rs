//! What the FFT stage is given besides the transform itself: which engines, how many, and how
//! frames are batched for them (built by `app` from the command line and config file).

use super::router::DeviceChoice;
use crate::limits;

/// Engines and batching.
#[derive(Clone, Debug)]
pub struct EngineSpec {
    pub device: DeviceChoice,
    /// Frames per batch; 0 = auto (`batch_frames`).
    pub batch: usize,
    /// Longest a frame waits for its batch to fill, in ms.
    pub max_latency_ms: f64,
    /// CPU FFT workers.
    pub workers: usize,
    /// `--workers` as given (engines per OpenCL device too); None: `limits::DEVICE_WORKERS`.
    pub device_workers: Option<usize>,
    /// Default batches sized for OpenCL devices (`batch_frames`): `--device` names them, or
    /// `auto` on files, where GPUs may join (the pipeline turns it off when `auto` runs a job on
    /// the CPU engines alone).
    pub device_batches: bool,
}

impl EngineSpec {
    /// Frames per batch for frames of `n` samples: `--batch`, else about
    /// `limits::CPU_BATCH_SAMPLES` (or `DEVICE_BATCH_SAMPLES` for device batches) samples.
    pub(crate) fn batch_frames(&self, n: usize) -> usize {
        batch_frames_for(self.batch, self.device_batches, n)
    }

    /// Frames per batch while only the CPU engines take batches (a device started in the
    /// background has not joined yet): `--batch`, else the CPU engines' size. Their smaller
    /// buffers stay in cache and are reused instead of faulting in device-sized ones (issue 23).
    pub(crate) fn cpu_batch_frames(&self, n: usize) -> usize {
        batch_frames_for(self.batch, false, n)
    }
}

/// Frames per batch for frames of `n` samples from `--batch` (`batch`, 0 = auto) and whether
/// default batches are sized for devices (`EngineSpec::batch_frames`, `pipeline::spec::BatchSpec`).
pub(crate) fn batch_frames_for(batch: usize, device_batches: bool, n: usize) -> usize {
    let (samples, most) = match device_batches {
        true => (limits::DEVICE_BATCH_SAMPLES, 16384),
        false => (limits::CPU_BATCH_SAMPLES, 1024),
    };
    match batch {
        0 => (samples / n.max(1)).clamp(1, most),
        b => b,
    }
}
