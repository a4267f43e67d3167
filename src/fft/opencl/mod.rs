//! The OpenCL engine: a batch goes host -> device -> kernels -> host as one launch sequence, cut
//! (when larger than the pipeline's default batch) into chunks of 8-32 MiB that flow through
//! three queues (copy in, compute, copy out) so copies overlap the kernels. A batch in pinned
//! memory of this device (`pinned`, what the pipeline uses) is copied by DMA straight from and
//! into the caller's buffers; a batch in ordinary memory is staged through the engine's own
//! pinned buffers, on several host threads.
//!
//! Kernels live in `kernels/*.cl` (embedded with `include_str!`) and are specialised per
//! (device, frame size, input kind, precision, complex output) with `-D` defines, built once per
//! device and cached (`device::SharedDevice::program`). Every path below writes either one finished
//! value per bin or, for `--scale complex` (`-D COMPLEX_OUT=1`), X's re and im interleaved
//! (`common.cl`: `store_bin`). Paths, by frame size:
//!
//! - **local** (frame fits in local memory): `stockham_local.cl` reads each frame once (window
//!   applied while loading), runs a self-sorting radix-16 Stockham FFT (radix-2/4/8 for the
//!   leftover pass) in registers + local memory, undoes the half-length packing for real input, and
//!   writes only the n/2+1 (real) or n (complex) scaled bins. Frames that fit local memory once
//!   but not twice use the split exchange (real and imaginary parts in turn; complex frames
//!   below 16384 points also in rounds of a half or a quarter of a component; real frames whose
//!   last pass is radix 2 store their bins from that pass's registers).
//! - **four-step** (up to 2^18 points): `fourstep.cl` column FFTs with twiddles, then row FFTs
//!   with the bins on store (real input: rows in pairs, the r2c post-processing fused); the store
//!   twiddles by recurrence where that measured faster (`plan::fourstep_twiddle_recurrence`).
//! - **three-stage** (powers of two past the four-step, `threestage`): `fourstep.cl`'s column
//!   kernel over the frame seen as m0 × M, then a four-step over each of its rows, the bins
//!   stored in runs across rows (real input: `post` after).
//! - **two-level** (`twolevel`): the same two kernels with mixed-radix passes in local memory,
//!   for large sizes that are not powers of two and Bluestein.
//! - **global** (devices with too little local memory for the above): `pack` -> radix-8/4/2
//!   Stockham passes between two device buffers -> `post`.
//! - **mixed** (every size that is not a power of two; `mixed`): radix-16/8/4/2/3/5/7 Stockham
//!   passes, in one kernel in local memory when the frame fits twice (`mixed_local.cl`), else
//!   two-level, else `pack` -> passes in global memory (`mixed_radix.cl`) -> `post`; a prime
//!   factor above 7 goes through Bluestein's chirp-z transform over a power-of-two length (one
//!   local-memory kernel, two-level, or global passes, by length). Odd real sizes run as
//!   complex frames; on the two-level Bluestein path two of them share one complex transform.
//!
//! Around the transform, fused products: `bands` sums band powers and `segments` reduces runs of
//! frames (`--average`) in device memory, so less comes back. In an f64 run, samples held as f32
//! cross as f32 and are widened on the device, and rows an f32 output writes are narrowed there
//! (`carry`). Modules: `device` (platforms, contexts, program cache), `pinned` (page-locked host
//! memory), `slots` (the chunks in flight), `plan` (paths and tables per size), `batch` (a
//! batch's chunks through the slots), `launch` (enqueuing a chunk's kernels), `carry`, `mixed`,
//! `threestage`, `twolevel`, `bands`, `segments`; this file holds the engine.
//!
//! Sizes: every n the CPU engine takes, 2..2^26 (`limits::MAX_FRAME_SAMPLES`). F64 on devices
//! without `cl_khr_fp64` answers `EngineError::Unsupported` (the router sends those batches to
//! the CPU engine); every device failure answers `EngineError::Device`.

mod bands;
mod batch;
mod carry;
mod choice;
mod chunk_log;
mod copies;
pub mod device;
mod engine;
mod geometry;
pub mod job_programs;
mod launch;
mod mixed;
pub(crate) mod pinned;
mod plan;
mod segments;
mod slots;
mod threestage;
mod twolevel;

use super::fault::{Fault, FaultPlan};
use super::host_memory::{PinnedAlloc, PinnedBlock};
use super::{
    BandWeights, Carry, Engine, EngineError, FrameStep, PinnedMemory, Reduction, Samples, Scale,
    ScalePlan, Segments, TransformSpec,
};
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;
use device::{DeviceEntry, SharedDevice};
pub(crate) use geometry::LocalGeometry;
use launch::{enqueue_kernels, ScaleArgs};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE};
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING};
use plan::{Path, Plan, PlanKey};
use slots::{
    chunk_frames, ensure, pinned_chunk_bytes, span, Grow, Pending, Slot, SLOTS, STAGED_CHUNK_BYTES,
};
use std::collections::HashMap;
use std::sync::Arc;
pub use twolevel::twolevel_geometry;

pub(crate) const SRC_COMMON: &str = include_str!("../../../kernels/common.cl");
const SRC_PASSES: &str = include_str!("../../../kernels/stockham_passes.cl");
const SRC_LOCAL: &str = include_str!("../../../kernels/stockham_local.cl");
const SRC_FOURSTEP: &str = include_str!("../../../kernels/fourstep.cl");
const SRC_GLOBAL: &str = include_str!("../../../kernels/stockham_global.cl");
const SRC_POST: &str = include_str!("../../../kernels/r2c_post.cl");

/// Device buffers of a frame's largest size an engine may hold at once (input, work, output,
/// tables), times the engines of a device: a frame needing more than the device's memory
/// divided by this is left to the CPU engine (`supports`) rather than failing the device.
const BUFFERS_AT_MOST: u64 = 12;

/// Work-items per frame in the local kernel, at most (512 made no difference, docs/perf.md).
const MAX_TPF: usize = 256;
/// Work-items per work-group the local kernel aims for with several small frames per group.
const TARGET_WG: usize = 64;
/// Work-group size of the global-path kernels.
const GLOBAL_WG: usize = 256;

/// Knobs of the OpenCL engine (defaults from the environment, see `from_env`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenClOptions {
    /// Test-only fault injection: fail with a device error (or hang) once this many batches
    /// have been transformed. `FFTD_FAULT_AFTER_BATCHES=K[:hang[=S]]` (`fault`).
    pub fault: Option<Fault>,
    /// Largest local-memory footprint in bytes of the kernels (default: the device's local
    /// memory). Lowering it forces the split, four-step, two-level and multi-pass paths on a
    /// device whose local memory would fit one kernel (the tests take every path on PoCL so).
    pub local_mem_limit: Option<usize>,
    /// Input bytes per host-device pipeline chunk (default: a pinned batch up to 16 MiB in one,
    /// larger ones in 8 MiB chunks, 32 MiB for staged ones; see `slots::pinned_chunk_bytes`).
    /// `FFTD_OPENCL_CHUNK_BYTES=N` (bench/gpu_vs_cufft.sh: one chunk per batch, so one launch
    /// as cuFFT's).
    pub chunk_bytes: Option<usize>,
    /// Time every command with event profiling (`last_profile` times; `fftd bench` turns it on).
    /// Off in the pipeline: a profiling queue costs the driver work on every command.
    /// `FFTD_OPENCL_PROFILE=1`.
    pub profile: bool,
}

impl OpenClOptions {
    /// Options from `FFTD_FAULT_AFTER_BATCHES`, `FFTD_OPENCL_CHUNK_BYTES` and
    /// `FFTD_OPENCL_PROFILE` (unset or unparsable: default).
    pub(crate) fn from_env() -> Self {
        use crate::knobs;
        let for_stats = PROFILE_FOR_STATS.load(std::sync::atomic::Ordering::Relaxed);
        OpenClOptions {
            fault: FaultPlan::from_env().every(),
            local_mem_limit: None,
            chunk_bytes: knobs::opencl_chunk_bytes(),
            profile: knobs::opencl_profile().unwrap_or(for_stats),
        }
    }
}

/// Set by a run with `--stats` or `--trace` before its engines are built: their queues profile
/// every command, so the FFT workers' time splits into upload, kernels and download.
static PROFILE_FOR_STATS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks engines built from now on for event profiling (`PROFILE_FOR_STATS`).
pub(crate) fn profile_for_stats() {
    PROFILE_FOR_STATS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Device-side timings of the last batch, from event profiling (nanoseconds; zero unless
/// `OpenClOptions::profile`), and whether its copies went straight from / into pinned memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchProfile {
    pub write_ns: u64,
    /// From the start of the first kernel to the end of the last one.
    pub kernel_ns: u64,
    pub read_ns: u64,
    /// The input / output went by DMA straight from / into the caller's pinned memory (else
    /// through the engine's staging buffers).
    pub direct_in: bool,
    pub direct_out: bool,
}

/// The OpenCL engine for one worker thread: its own queue, kernels and buffers on a device shared
/// with the other workers.
pub struct OpenClEngine<T: Sample> {
    dev: Arc<SharedDevice>,
    /// Compute queue.
    queue: CommandQueue,
    copy_in: CommandQueue,
    copy_out: CommandQueue,
    plans: HashMap<PlanKey, Plan<T>>,
    slots: Vec<Slot<T>>,
    work_a: Grow<T>,
    work_b: Grow<T>,
    options: OpenClOptions,
    batches: u64,
    last_profile: Option<BatchProfile>,
    /// The band matrix of fused `--bands`, once a batch asked for it.
    bands: Option<bands::DeviceBands<T>>,
    /// The runs of the last batch reduced here (fused `--average`).
    runs: Option<segments::DeviceSegments<T>>,
    /// The `widen` and `narrow` kernels, once an f64 batch carried f32 (`carry`).
    carrier: Option<carry::Carrier>,
}

fn dev_err(what: impl Into<String>) -> EngineError {
    EngineError::Device {
        engine: "opencl",
        what: what.into(),
    }
}

impl<T: Sample> OpenClEngine<T> {
    /// An engine on `entry`; fails when no context or queue can be made there.
    pub fn new(entry: &DeviceEntry, options: OpenClOptions) -> Result<Self, String> {
        let dev = SharedDevice::open(entry)?;
        Self::on_device(dev, options)
    }

    /// An engine on an already opened device.
    pub(crate) fn on_device(
        dev: Arc<SharedDevice>,
        options: OpenClOptions,
    ) -> Result<Self, String> {
        let properties = if options.profile {
            CL_QUEUE_PROFILING_ENABLE
        } else {
            0
        };
        let make = || {
            // SAFETY: `dev.device` belongs to `dev.context`; `properties` holds only the
            // profiling bit, which every OpenCL 1.2+ device accepts.
            unsafe {
                CommandQueue::create_with_properties(&dev.context, dev.device.id(), properties, 0)
            }
            .map_err(|e| format!("cannot create a command queue on {}: {e}", dev.info.name))
        };
        let (queue, copy_in, copy_out) = (make()?, make()?, make()?);
        Ok(OpenClEngine {
            dev,
            queue,
            copy_in,
            copy_out,
            plans: HashMap::new(),
            slots: Vec::new(),
            work_a: Grow::new(),
            work_b: Grow::new(),
            options,
            batches: 0,
            last_profile: None,
            bands: None,
            runs: None,
            carrier: None,
        })
    }

    /// The device this engine runs on.
    pub fn device(&self) -> &device::DeviceInfo {
        &self.dev.info
    }

    /// Device timings of the last successful batch.
    pub fn last_profile(&self) -> Option<BatchProfile> {
        self.last_profile
    }

    /// Whether this engine transforms frames of `spec` (else `process` answers `Unsupported`).
    pub fn supports(&self, spec: &TransformSpec) -> Result<(), EngineError> {
        let n = spec.n;
        if !(2..=crate::limits::MAX_FRAME_SAMPLES).contains(&n) {
            return Err(EngineError::Unsupported {
                engine: "opencl",
                what: format!(
                    "frame size {n} (2..{} only)",
                    crate::limits::MAX_FRAME_SAMPLES
                ),
            });
        }
        let need = plan::largest_buffer_bytes(n, spec.kind, std::mem::size_of::<T>());
        let info = &self.dev.info;
        let too_large = (info.max_alloc > 0 && need > info.max_alloc)
            || (info.global_mem > 0 && need.saturating_mul(BUFFERS_AT_MOST) > info.global_mem);
        if too_large {
            return Err(EngineError::Unsupported {
                engine: "opencl",
                what: format!(
                    "frame size {n} in {}: device buffers of {} MiB, more than {} allocates \
                     (at most {} MiB each, {} MiB in all)",
                    T::NAME,
                    need >> 20,
                    info.name,
                    info.max_alloc >> 20,
                    info.global_mem >> 20
                ),
            });
        }
        if T::NAME == "f64" && !self.dev.info.fp64 {
            return Err(EngineError::Unsupported {
                engine: "opencl",
                what: format!("f64 on {} (no cl_khr_fp64)", self.dev.info.name),
            });
        }
        Ok(())
    }

    fn upload(&self, data: &[T]) -> Result<Buffer<T>, String> {
        // SAFETY: a device buffer with no host pointer (nothing aliased), sized for `data`.
        let mut b = unsafe {
            Buffer::<T>::create(
                &self.dev.context,
                CL_MEM_READ_ONLY,
                data.len().max(1),
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| format!("cannot allocate a constant buffer: {e}"))?;
        // SAFETY: a blocking write of `data.len()` values into a buffer of that many: `data` is
        // read completely before the call returns.
        unsafe {
            self.queue
                .enqueue_write_buffer(&mut b, CL_BLOCKING, 0, data, &[])
        }
        .map_err(|e| format!("cannot write a constant buffer: {e}"))?;
        Ok(b)
    }
}

impl<T: Sample> OpenClEngine<T> {
    /// After a failure: wait for whatever is still queued (so nothing touches the caller's
    /// memory or the pinned buffers afterwards) and forget the chunks in flight.
    fn abandon(&mut self) {
        let mut finished = true;
        for q in [&self.copy_in, &self.queue, &self.copy_out] {
            finished &= q.finish().is_ok();
        }
        for s in &mut self.slots {
            if let Some(p) = s.pending.take() {
                if !finished {
                    // a queue could not be finished: wait for this chunk's own copies
                    let _ = p.write.wait();
                    let _ = p.read.wait();
                }
            }
        }
    }
}

impl<T: Sample> Drop for OpenClEngine<T> {
    fn drop(&mut self) {
        // nothing may still read or write staging memory when the slots unmap it
        self.abandon();
    }
}

impl<T: Sample> OpenClEngine<T> {
    /// `run` with what every call needs around it: the spec checked, the injected fault, and
    /// the device stopped from touching the caller's buffers after an error or a panic.
    fn guarded_run(
        &mut self,
        spec: &TransformSpec,
        (input, rows): (Samples<'_, T>, Carry),
        reduction: (Option<&BandWeights>, Option<&Segments<'_>>),
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.supports(spec)?;
        if let Some(fault) = &self.options.fault {
            fault.before_batch(self.batches).map_err(dev_err)?;
        }
        if input.count() == 0 {
            return Ok(());
        }
        // a panic inside (e.g. a host copy thread that cannot start) must not unwind past
        // commands that still read or write the caller's buffers
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run(spec, (input, rows), reduction, out)
        }));
        let run = match run {
            Ok(r) => r,
            Err(panic) => {
                self.abandon();
                std::panic::resume_unwind(panic);
            }
        };
        match run {
            Ok(()) => {
                self.batches += 1;
                Ok(())
            }
            Err(e) => {
                // make sure the device no longer reads the caller's input before returning
                self.abandon();
                Err(dev_err(e))
            }
        }
    }
}
