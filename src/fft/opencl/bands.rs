//! Band powers on the device (`--bands` fused with the FFT): the band matrix (`fft::BandWeights`,
//! defined by `products::bands`) uploaded once per engine, and the `band_powers` kernel
//! (kernels/bands.cl) that turns a chunk's power spectra in device memory into band rows, so the
//! copy back carries bands, not bins.

use super::device::SharedDevice;
use super::launch::{Enqueue, Items};
use crate::fft::{BandWeights, RowFinish};
use crate::types::Sample;
use opencl3::command_queue::CommandQueue;
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, CL_MEM_READ_ONLY};
use opencl3::types::CL_BLOCKING;
use std::sync::Arc;

const SRC_BANDS: &str = include_str!("../../../kernels/bands.cl");

/// Work-items per group along the bands.
const BAND_WG: usize = 64;

/// One band matrix on the device, with its kernel.
pub(super) struct DeviceBands<T> {
    /// `BandWeights::id` of the matrix held.
    pub id: u64,
    /// `BandWeights::finish` as the kernel takes it (0 as is, 1 square root, 2 dB).
    pub finish: i32,
    /// `BandWeights::unit`, its square root and 10·log10 of it, as the kernel takes them.
    unit: [T; 3],
    pub bands: usize,
    bins: usize,
    first: Buffer<u32>,
    len: Buffer<u32>,
    offset: Buffer<u32>,
    weights: Buffer<T>,
    kernel: Kernel,
}

impl<T: Sample> DeviceBands<T> {
    /// Uploads `weights` on `queue`'s device and builds the kernel.
    pub(super) fn new(
        dev: &Arc<SharedDevice>,
        queue: &CommandQueue,
        weights: &BandWeights,
    ) -> Result<Self, String> {
        let spans_fit = (0..weights.bands()).all(|b| {
            let (first, len, at) = (weights.first[b], weights.len[b], weights.offset[b]);
            first as usize + len as usize <= weights.bins
                && at as usize + len as usize <= weights.weights.len()
        });
        let complete =
            weights.len.len() == weights.bands() && weights.offset.len() == weights.bands();
        if !(spans_fit && complete) {
            return Err("band matrix with spans outside its spectrum".into());
        }
        let options = if T::NAME == "f64" {
            "-D USE_DOUBLE"
        } else {
            ""
        };
        let program = dev.program("bands", &[super::SRC_COMMON, SRC_BANDS], options)?;
        let kernel = Kernel::create(&program, "band_powers")
            .map_err(|e| format!("kernel band_powers: {e}"))?;
        let values: Vec<T> = weights.weights.iter().map(|&w| T::of_f64(w)).collect();
        Ok(DeviceBands {
            id: weights.id,
            finish: match weights.finish {
                RowFinish::AsIs => 0,
                RowFinish::SquareRoot => 1,
                RowFinish::Decibels => 2,
            },
            unit: [
                T::of_f64(weights.unit),
                T::of_f64(weights.unit.sqrt()),
                T::of_f64(10.0 * weights.unit.log10()),
            ],
            bands: weights.bands(),
            bins: weights.bins,
            first: upload(dev, queue, &weights.first)?,
            len: upload(dev, queue, &weights.len)?,
            offset: upload(dev, queue, &weights.offset)?,
            weights: upload(dev, queue, &values)?,
            kernel,
        })
    }

    /// Whether this matrix's sums are multiplied by `unit` (`BandWeights::unit`).
    pub(super) fn has_unit(&self, unit: f64) -> bool {
        self.unit[0] == T::of_f64(unit)
    }

    /// Enqueues the band rows of `frames` power spectra (`power`, `bins` values each) into `out`
    /// (`bands` values each) on `queue`, after the commands already queued there.
    pub(super) fn enqueue(
        &mut self,
        queue: &CommandQueue,
        power: &Buffer<T>,
        out: &Buffer<T>,
        frames: usize,
    ) -> Result<Event, String> {
        let (bins, bands, count) = (self.bins as u32, self.bands as u32, frames as u32);
        let floor_db = T::of_f64(RowFinish::Decibels.apply(0.0));
        // SAFETY: arguments in the order of bands.cl's `band_powers`; `power` holds `frames` ×
        // `bins` values and `out` `frames` × `bands` (the caller sized both), the index buffers
        // and weights describe spans inside a spectrum (BandWeights), and items past `bands` or
        // `frames` (rounding up to the work-group) return early.
        unsafe {
            ExecuteKernel::new(&self.kernel)
                .set_arg(power)
                .set_arg(out)
                .set_arg(&self.first)
                .set_arg(&self.len)
                .set_arg(&self.offset)
                .set_arg(&self.weights)
                .set_arg(&bins)
                .set_arg(&bands)
                .set_arg(&count)
                .set_arg(&self.finish)
                .set_arg(&self.unit[0])
                .set_arg(&self.unit[1])
                .set_arg(&self.unit[2])
                .set_arg(&floor_db)
                .launch(
                    Items::per_row(self.bands, BAND_WG, frames),
                    queue,
                    "band_powers",
                )
        }
    }
}

/// A read-only device buffer holding `data`.
pub(super) fn upload<V: Copy>(
    dev: &SharedDevice,
    queue: &CommandQueue,
    data: &[V],
) -> Result<Buffer<V>, String> {
    // SAFETY: a device buffer with no host pointer (nothing aliased), sized for `data`.
    let mut buffer = unsafe {
        Buffer::<V>::create(
            &dev.context,
            CL_MEM_READ_ONLY,
            data.len().max(1),
            std::ptr::null_mut(),
        )
    }
    .map_err(|e| format!("cannot allocate the band matrix: {e}"))?;
    if data.is_empty() {
        return Ok(buffer);
    }
    // SAFETY: a blocking write of `data.len()` values into a buffer of at least that many: `data`
    // is read completely before the call returns.
    unsafe { queue.enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, data, &[]) }
        .map_err(|e| format!("cannot write the band matrix: {e}"))?;
    Ok(buffer)
}
