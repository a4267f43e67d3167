//! f32 across the bus in an f64 run (issue 41, `fft::carry`): a chunk's samples held as f32 are
//! copied to the device as f32 and widened there by `widen` (kernels/carry.cl) into the input
//! buffer the transform reads; rows asked for as f32 are narrowed there by `narrow` from the
//! buffer the host would read, and copied back as f32. `HostIn` and `HostOut` are a batch's
//! buffers on the host either way; `write_chunk` and `read_chunk` copy one chunk of them.

use super::launch::{cl, Enqueue, Items};
use super::slots::par_copy;
use super::SharedDevice;
use crate::fft::carry::f32s;
use crate::types::Sample;
use opencl3::command_queue::CommandQueue;
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;
use opencl3::types::{cl_event, CL_NON_BLOCKING};

const SRC_CARRY: &str = include_str!("../../../kernels/carry.cl");

/// A batch's input on the host: the run's values, or f32 values widened on the device.
#[derive(Clone, Copy)]
pub(super) enum HostIn<'a, T> {
    Run(&'a [T]),
    F32(&'a [f32]),
}

impl<T> HostIn<'_, T> {
    /// Its memory: (start, bytes).
    pub(super) fn memory(&self) -> (*const u8, usize) {
        match self {
            HostIn::Run(v) => (v.as_ptr().cast(), std::mem::size_of_val(*v)),
            HostIn::F32(v) => (v.as_ptr().cast(), std::mem::size_of_val(*v)),
        }
    }

    /// Bytes per value.
    pub(super) fn value_bytes(&self) -> usize {
        match self {
            HostIn::Run(_) => std::mem::size_of::<T>(),
            HostIn::F32(_) => 4,
        }
    }
}

/// Where a batch's rows go on the host: the run's values, or f32 values narrowed on the device.
pub(super) enum HostOut<'a, T> {
    Run(&'a mut [T]),
    F32(&'a mut [f32]),
}

impl<T: Sample> HostOut<'_, T> {
    /// Its memory: (start, bytes).
    pub(super) fn memory(&self) -> (*const u8, usize) {
        match self {
            HostOut::Run(v) => (v.as_ptr().cast(), std::mem::size_of_val(*v)),
            HostOut::F32(v) => (v.as_ptr().cast(), std::mem::size_of_val(*v)),
        }
    }

    /// Copies `len` values staged in `pinned` (the run's values, or f32 in their memory) to
    /// `at` onwards.
    pub(super) fn copy_staged(&mut self, at: usize, len: usize, pinned: &[T]) {
        match self {
            HostOut::Run(out) => par_copy(&mut out[at..at + len], &pinned[..len]),
            HostOut::F32(out) => par_copy(&mut out[at..at + len], &f32s(pinned)[..len]),
        }
    }
}

/// Enqueues the copy of `src` into `dev` on `q`, first copied into `staging` (pinned memory)
/// when one is given.
///
/// # Safety
/// `src` (or `staging`) must stay alive and unwritten until the returned event completes, and
/// `dev` must hold at least `src.len()` values.
pub(super) unsafe fn write_chunk<V: Copy + Send + Sync>(
    q: &CommandQueue,
    dev: &mut Buffer<V>,
    src: &[V],
    staging: Option<&mut [V]>,
) -> Result<Event, String> {
    let src = match staging {
        Some(staging) => {
            let staging = &mut staging[..src.len()];
            par_copy(staging, src);
            &*staging
        }
        None => src,
    };
    // SAFETY: the caller's contract: `src` outlives the copy, `dev` holds it.
    unsafe { q.enqueue_write_buffer(dev, CL_NON_BLOCKING, 0, src, &[]) }.map_err(|e| cl("write", e))
}

/// Enqueues the copy of `dst.len()` values of `dev` into `dst` on `q`, after `after`.
///
/// # Safety
/// `dst` must not be read, written or freed before the returned event completes, and `dev`
/// must hold at least `dst.len()` values.
pub(super) unsafe fn read_chunk<V: Copy>(
    q: &CommandQueue,
    dev: &Buffer<V>,
    dst: &mut [V],
    after: cl_event,
) -> Result<Event, String> {
    // SAFETY: the caller's contract: `dst` stays untouched until the copy ends, `dev` holds it.
    unsafe { q.enqueue_read_buffer(dev, CL_NON_BLOCKING, 0, dst, &[after]) }
        .map_err(|e| cl("read", e))
}

/// The `widen` and `narrow` kernels of one engine (a kernel object is one thread's).
pub(super) struct Carrier {
    widen: Kernel,
    narrow: Kernel,
}

impl Carrier {
    pub(super) fn new(dev: &SharedDevice) -> Result<Self, String> {
        let program = dev.program("carry", &[SRC_CARRY], "")?;
        let kernel =
            |name: &str| Kernel::create(&program, name).map_err(|e| format!("kernel {name}: {e}"));
        Ok(Carrier {
            widen: kernel("widen")?,
            narrow: kernel("narrow")?,
        })
    }

    /// Enqueues `count` f32 values of `from` widened into `to` (doubles) on `q`, after `after`.
    pub(super) fn widen<T: Sample>(
        &mut self,
        q: &CommandQueue,
        (from, to): (&Buffer<f32>, &Buffer<T>),
        count: usize,
        after: cl_event,
    ) -> Result<Event, String> {
        let count_u32 = u32::try_from(count).map_err(|_| format!("{count} values to widen"))?;
        // SAFETY: arguments in the order of carry.cl's `widen`; `from` holds `count` floats and
        // `to` `count` doubles (the engine only widens in f64: `T` is f64), items past `count`
        // (rounding up to the work-group) return without touching memory.
        unsafe {
            ExecuteKernel::new(&self.widen)
                .set_event_wait_list(&[after])
                .set_arg(from)
                .set_arg(to)
                .set_arg(&count_u32)
                .launch(Items::Each(count), q, "widen")
        }
    }

    /// Enqueues `count` values of `from` (doubles) narrowed into `to` (floats) on `q`, after the
    /// commands already queued there.
    pub(super) fn narrow<T: Sample>(
        &mut self,
        q: &CommandQueue,
        (from, to): (&Buffer<T>, &Buffer<f32>),
        count: usize,
    ) -> Result<Event, String> {
        let count_u32 = u32::try_from(count).map_err(|_| format!("{count} values to narrow"))?;
        // SAFETY: arguments in the order of carry.cl's `narrow`; `from` holds `count` doubles
        // (`T` is f64 here) and `to` `count` floats; items past `count` return early.
        unsafe {
            ExecuteKernel::new(&self.narrow)
                .set_arg(from)
                .set_arg(to)
                .set_arg(&count_u32)
                .launch(Items::Each(count), q, "narrow")
        }
    }
}
