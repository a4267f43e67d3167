//! The host-device pipeline's slots: each chunk of a batch in flight has its device buffers (input,
//! spectra, band rows, reduced runs) and, for callers whose memory is not pinned, pinned staging
//! buffers, and the f32 buffers of an f64 run's carried samples and rows (`carry`); `Pending`
//! holds the chunk's commands until `Slot::drain` waits for them and copies staged output into
//! place. Also the chunk sizes and the host copy helpers the engine uses.

use super::carry::HostOut;
use super::chunk_log::ChunkLog;
use super::pinned;
use super::{BatchProfile, SharedDevice};
use crate::fft::host_memory::{PinnedAlloc, PinnedBlock};
use crate::types::Sample;
use opencl3::event::Event;
use opencl3::memory::{Buffer, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE};
use std::sync::Arc;

/// A device buffer that grows to the largest batch seen.
pub(super) struct Grow<T> {
    pub(super) buf: Option<Buffer<T>>,
    pub(super) cap: usize,
}

impl<T> Grow<T> {
    pub(super) fn new() -> Self {
        Grow { buf: None, cap: 0 }
    }
}

pub(super) fn ensure<'a, T>(
    g: &'a mut Grow<T>,
    dev: &SharedDevice,
    flags: u64,
    len: usize,
) -> Result<&'a mut Buffer<T>, String> {
    if g.cap < len || g.buf.is_none() {
        g.buf = None;
        // SAFETY: a device buffer of `len.max(1)` values with no host pointer: nothing on the
        // host is aliased, and the context outlives the buffer (both held by `dev`).
        let b =
            unsafe { Buffer::<T>::create(&dev.context, flags, len.max(1), std::ptr::null_mut()) }
                .map_err(|e| {
                format!(
                    "cannot allocate {} bytes on the device: {e}",
                    len * std::mem::size_of::<T>()
                )
            })?;
        g.buf = Some(b);
        g.cap = len;
    }
    g.buf
        .as_mut()
        .ok_or_else(|| "device buffer missing".to_string())
}

/// Slots of the host-device pipeline (chunks in flight at once).
pub(super) const SLOTS: usize = 3;
/// Input bytes per pipeline chunk, about, for batches in pinned memory (copied by DMA alone)
/// larger than `ONE_CHUNK_BYTES`: on an H200 8 MiB gave 90 % of the PCIe copy rate for
/// 2^26-sample batches, 32 MiB 80 %, 64 MiB 79 % (docs/perf.md).
pub(super) const CHUNK_BYTES: usize = 8 << 20;
/// The same for staged batches, whose host copies run on more threads in larger chunks
/// (32 MiB: 9.5-16 GB/s of input vs 7.6-9.5 GB/s with 8 MiB chunks).
pub(super) const STAGED_CHUNK_BYTES: usize = 32 << 20;

/// Input bytes up to which a pinned batch moves in one chunk: the pipeline's default device
/// batch of f32 (`limits::DEVICE_BATCH_SAMPLES`, 16 MiB). Cut into 8 MiB chunks, each such batch
/// paid the chunks' commands and waits twice, while the device's two engines already overlap
/// one batch's transfers with the other's: on an H200 (4 GiB on 16 cores, medians of 3) one
/// chunk took hop 512 from 0.770 to 0.692 s and log-mel from 0.678 to 0.541 s (docs/perf.md).
pub(super) const ONE_CHUNK_BYTES: usize = 16 << 20;

/// Input bytes per chunk of a pinned batch of `batch_bytes`: the whole batch up to
/// `ONE_CHUNK_BYTES`, else `CHUNK_BYTES` (larger batches, such as `fftd bench`'s, pipeline their
/// chunks over the slots).
pub(super) fn pinned_chunk_bytes(batch_bytes: usize) -> usize {
    match batch_bytes <= ONE_CHUNK_BYTES {
        true => batch_bytes,
        false => CHUNK_BYTES,
    }
}

/// Frames per pipeline chunk of about `chunk_bytes` for frames of `per_in` values of `size` bytes.
pub(super) fn chunk_frames(chunk_bytes: usize, per_in: usize, size: usize) -> usize {
    (chunk_bytes / (per_in * size).max(1)).max(1)
}

/// Threads for one large host copy (pageable <-> pinned copies are CPU-bound, roughly
/// 5-10 GB/s per thread).
pub(super) fn copy_threads(bytes: usize) -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let max = *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 8)
    });
    (bytes / (2 << 20)).clamp(1, max)
}

/// `dst.copy_from_slice(src)`, on several threads for large copies.
pub(super) fn par_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    let threads = copy_threads(std::mem::size_of_val(src));
    if threads == 1 || dst.len() != src.len() {
        dst.copy_from_slice(src);
        return;
    }
    let part = src.len().div_ceil(threads);
    std::thread::scope(|sc| {
        for (d, s) in dst.chunks_mut(part).zip(src.chunks(part)) {
            sc.spawn(move || d.copy_from_slice(s));
        }
    });
}

/// The commands of one chunk in flight.
pub(super) struct Pending {
    /// Where the chunk's output goes in the caller's buffer, and how many values.
    pub(super) out_at: usize,
    pub(super) len: usize,
    /// Output read into the slot's pinned buffer (to be copied to the caller's on drain).
    pub(super) staged_out: bool,
    pub(super) write: Event,
    pub(super) kernels: Vec<Event>,
    pub(super) read: Event,
}

/// One pipeline slot: device buffers for one chunk, and pinned staging buffers for callers
/// whose memory is not pinned.
pub(super) struct Slot<T> {
    pub(super) pin_in: Option<PinnedBlock<T>>,
    pub(super) pin_out: Option<PinnedBlock<T>>,
    pub(super) dev_in: Grow<T>,
    pub(super) dev_out: Grow<T>,
    /// Band rows of the chunk (fused `--bands` only).
    pub(super) dev_bands: Grow<T>,
    /// The chunk's runs reduced to one row each (fused `--average` only).
    pub(super) dev_runs: Grow<T>,
    /// The chunk's samples as they cross, f32, before `widen` (carried samples only).
    pub(super) dev_in32: Grow<f32>,
    /// The chunk's rows narrowed to f32 to cross back (rows carried as f32 only).
    pub(super) dev_out32: Grow<f32>,
    pub(super) pending: Option<Pending>,
    /// `--trace`: the chunks drained, with their device times.
    pub(super) log: ChunkLog,
}

pub(super) fn span(e: &Event) -> u64 {
    match (e.profiling_command_start(), e.profiling_command_end()) {
        (Ok(a), Ok(b)) => b.saturating_sub(a),
        _ => 0,
    }
}

impl<T: Sample> Slot<T> {
    pub(super) fn new() -> Self {
        Slot {
            pin_in: None,
            pin_out: None,
            dev_in: Grow::new(),
            dev_out: Grow::new(),
            dev_bands: Grow::new(),
            dev_runs: Grow::new(),
            dev_in32: Grow::new(),
            dev_out32: Grow::new(),
            pending: None,
            log: ChunkLog::default(),
        }
    }

    /// Makes room for `n_in` input and `n_out` output values on the device and for `stage_in` /
    /// `stage_out` values in pinned staging memory (0: not staged).
    pub(super) fn reserve(
        &mut self,
        dev: &Arc<SharedDevice>,
        n_in: usize,
        n_out: usize,
        stage_in: usize,
        stage_out: usize,
    ) -> Result<(), String> {
        let alloc = pinned::DevicePinned(dev.clone());
        for (pin, len) in [(&mut self.pin_in, stage_in), (&mut self.pin_out, stage_out)] {
            if len > 0 && pin.as_ref().is_none_or(|p| p.len() < len) {
                *pin = None;
                *pin = Some(alloc.alloc(len)?);
            }
        }
        ensure(&mut self.dev_in, dev, CL_MEM_READ_ONLY, n_in)?;
        // read back by the host, and read by the band and run kernels when they are fused
        ensure(&mut self.dev_out, dev, CL_MEM_READ_WRITE, n_out)?;
        Ok(())
    }

    /// Waits for the chunk in flight (if any), copies staged output to its place in `out` and
    /// adds its device times to `profile` (and, with `--trace`, logs them: `chunk_log`).
    pub(super) fn drain(
        &mut self,
        out: &mut HostOut<'_, T>,
        profile: Option<&mut BatchProfile>,
    ) -> Result<(), String> {
        let Some(p) = self.pending.take() else {
            self.log.drained();
            return Ok(());
        };
        p.read.wait().map_err(|e| format!("read: {e}"))?;
        let waited = ChunkLog::waited();
        if p.staged_out {
            let pin = self
                .pin_out
                .as_ref()
                .ok_or_else(|| "pinned output missing".to_string())?;
            out.copy_staged(p.out_at, p.len, pin.as_slice());
        }
        let Some(profile) = profile else {
            self.log.drained();
            return Ok(());
        };
        profile.write_ns += span(&p.write);
        profile.read_ns += span(&p.read);
        if let (Some(a), Some(b)) = (p.kernels.first(), p.kernels.last()) {
            if let (Ok(s), Ok(e)) = (a.profiling_command_start(), b.profiling_command_end()) {
                profile.kernel_ns += e.saturating_sub(s);
            }
        }
        if let Some(waited) = waited {
            self.log.record(&p.write, &p.kernels, &p.read, waited);
        }
        self.log.drained();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_device_batch_moves_in_one_chunk_and_larger_ones_in_chunks() {
        let f32_batch = crate::limits::DEVICE_BATCH_SAMPLES * 4;
        assert_eq!(pinned_chunk_bytes(f32_batch), f32_batch);
        assert_eq!(chunk_frames(pinned_chunk_bytes(f32_batch), 4096, 4), 1024);
        assert_eq!(pinned_chunk_bytes(1000), 1000);
        assert_eq!(pinned_chunk_bytes(2 * f32_batch), CHUNK_BYTES);
        assert_eq!(pinned_chunk_bytes(1 << 28), CHUNK_BYTES);
    }
}
