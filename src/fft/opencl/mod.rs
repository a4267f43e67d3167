//! The OpenCL engine: a batch goes host -> device -> kernels -> host as one launch sequence, cut
//! into chunks of 8-32 MiB that flow through three queues (copy in, compute, copy out) so
//! copies overlap the kernels. A batch in pinned memory of this device (`pinned`, what the
//! pipeline uses) is copied by DMA straight from and into the caller's buffers; a batch in
//! ordinary memory is staged through the engine's own pinned buffers, on several host threads.
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
//!   but not twice use the split exchange (real and imaginary parts in turn).
//! - **four-step** (up to 2^18 points): `fourstep.cl` column FFTs with twiddles, then row FFTs,
//!   then `post` (`r2c_post.cl`) for real input.
//! - **global** (larger frames): `pack` -> radix-8/4/2 Stockham passes between two device
//!   buffers -> `post`.
//!
//! Around the transform, fused products: `bands` sums band powers and `segments` reduces runs of
//! frames (`--average`) in device memory, so less comes back. Modules: `device` (platforms,
//! contexts, program cache), `pinned` (page-locked host memory), `slots` (the chunks in flight),
//! `launch` (enqueuing a chunk's kernels), `bands`, `segments`; this file plans and runs batches.
//!
//! Sizes: powers of two 2..2^24. Other sizes and f64 on devices without `cl_khr_fp64` answer
//! `EngineError::Unsupported` (the router sends those batches to the CPU engine); every device
//! failure answers `EngineError::Device`.

mod bands;
mod chunk_log;
mod copies;
pub mod device;
mod engine;
mod geometry;
mod launch;
pub mod pinned;
mod plan;
mod segments;
mod slots;

use super::fault::{Fault, FaultPlan};
use super::host_memory::{PinnedAlloc, PinnedBlock};
use super::{
    BandWeights, Engine, EngineError, FrameStep, PinnedMemory, Reduction, Scale, ScalePlan,
    Segments, TransformSpec,
};
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;
use device::{DeviceEntry, SharedDevice};
pub use geometry::{fourstep_geometry, LocalGeometry};
use launch::{enqueue_kernels, ScaleArgs};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE};
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING};
use plan::{Path, Plan, PlanKey};
use slots::{
    chunk_frames, ensure, par_copy, span, Grow, Pending, Slot, CHUNK_BYTES, SLOTS,
    STAGED_CHUNK_BYTES,
};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) const SRC_COMMON: &str = include_str!("../../../kernels/common.cl");
const SRC_PASSES: &str = include_str!("../../../kernels/stockham_passes.cl");
const SRC_LOCAL: &str = include_str!("../../../kernels/stockham_local.cl");
const SRC_FOURSTEP: &str = include_str!("../../../kernels/fourstep.cl");
const SRC_GLOBAL: &str = include_str!("../../../kernels/stockham_global.cl");
const SRC_POST: &str = include_str!("../../../kernels/r2c_post.cl");

/// Largest supported frame size, log2.
pub const MAX_LOG2_N: u32 = 24;

/// Work-items per frame in the local kernel, at most (tuning knob: `FFTD_OPENCL_MAX_TPF`).
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
    /// Largest local-memory footprint in bytes of the one-kernel path (default: the device's
    /// local memory). Lowering it forces the multi-pass path; `FFTD_OPENCL_LOCAL_LIMIT=BYTES`.
    pub local_mem_limit: Option<usize>,
    /// Tuning knob: work-items per work-group the local kernel aims for by putting several small
    /// frames in one group (default 64). `FFTD_OPENCL_TARGET_WG=N`.
    pub target_wg: Option<usize>,
    /// Tuning knob: extra build options for every kernel (e.g. `-D TW_TABLE_ALL`).
    /// `FFTD_OPENCL_DEFINES="..."`.
    pub extra_defines: String,
    /// Input bytes per host-device pipeline chunk (default: 8 MiB for pinned batches, 32 MiB
    /// for staged ones; see `CHUNK_BYTES`). `FFTD_OPENCL_CHUNK_BYTES=N`.
    pub chunk_bytes: Option<usize>,
    /// Time every command with event profiling (`last_profile` times; `fftd bench` turns it on).
    /// Off in the pipeline: a profiling queue costs the driver work on every command.
    /// `FFTD_OPENCL_PROFILE=1`.
    pub profile: bool,
}

impl OpenClOptions {
    /// Options from `FFTD_FAULT_AFTER_BATCHES` and `FFTD_OPENCL_LOCAL_LIMIT` (unset or
    /// unparsable: default).
    pub fn from_env() -> Self {
        use crate::knobs;
        let for_stats = PROFILE_FOR_STATS.load(std::sync::atomic::Ordering::Relaxed);
        OpenClOptions {
            fault: FaultPlan::from_env().every(),
            local_mem_limit: knobs::opencl_local_limit(),
            target_wg: knobs::opencl_target_wg(),
            extra_defines: knobs::opencl_defines(),
            chunk_bytes: knobs::opencl_chunk_bytes(),
            profile: knobs::opencl_profile().unwrap_or(for_stats),
        }
    }
}

/// Set by a run with `--stats` or `--trace` before its engines are built: their queues profile
/// every command, so the FFT workers' time splits into upload, kernels and download.
static PROFILE_FOR_STATS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks engines built from now on for event profiling (`PROFILE_FOR_STATS`).
pub fn profile_for_stats() {
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
    pub fn on_device(dev: Arc<SharedDevice>, options: OpenClOptions) -> Result<Self, String> {
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
        if n < 2 || !n.is_power_of_two() || n > 1 << MAX_LOG2_N {
            return Err(EngineError::Unsupported {
                engine: "opencl",
                what: format!("frame size {n} (powers of two 2..2^{MAX_LOG2_N} only)"),
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

    fn run(
        &mut self,
        spec: &TransformSpec,
        input: FrameStep<'_, T>,
        (band_weights, runs): (Option<&BandWeights>, Option<&Segments<'_>>),
        out: &mut [T],
    ) -> Result<(), String> {
        // the runs on the device: kept while batches bring the same runs (the common case)
        if let Some(r) = runs.filter(|r| self.runs.as_ref().is_none_or(|d| !d.holds(r))) {
            self.runs = Some(segments::DeviceSegments::new(&self.dev, &self.queue, r)?);
        }
        let stale = |b: &bands::DeviceBands<T>, w: &BandWeights| {
            b.id != w.id || b.finish != w.finish as i32
        };
        if let Some(w) = band_weights.filter(|w| self.bands.as_ref().is_none_or(|b| stale(b, w))) {
            self.bands = Some(bands::DeviceBands::new(&self.dev, &self.queue, w)?);
        }
        let key: PlanKey = (spec.n, spec.kind, spec.window, spec.scale == Scale::Complex);
        if !self.plans.contains_key(&key) {
            let plan = self.build_plan(spec)?;
            self.plans.insert(key, plan);
        }
        let real = spec.kind == InputKind::Real;
        let m = if real { spec.n / 2 } else { spec.n };
        let per_in = spec.values_per_frame();
        // bins per frame (post kernel work-items) and output values per frame (buffer sizes)
        let bins = spec.bins();
        let per_out = spec.values_out();
        // values per frame copied back: the bands when they are summed here
        let per_final = band_weights.map_or(per_out, BandWeights::bands);
        let dev = self.dev.clone();
        // frames `step` values apart: overlapping frames cross once, the kernels form them
        let (frames, step) = (input.count, input.step);
        let input = &input.data[..input.needed(spec)];
        let step_u32 = u32::try_from(step).map_err(|_| format!("frame step {step} too large"))?;
        let direct_in = dev
            .pinned
            .contains(input.as_ptr().cast(), std::mem::size_of_val(input));
        let direct_out = dev
            .pinned
            .contains(out.as_ptr().cast(), std::mem::size_of_val(out));
        let chunk_bytes = self
            .options
            .chunk_bytes
            .unwrap_or(if direct_in && direct_out {
                CHUNK_BYTES
            } else {
                STAGED_CHUNK_BYTES
            });
        let chunk = chunk_frames(chunk_bytes, per_in, std::mem::size_of::<T>()).min(frames);
        // chunks cut between runs when runs are reduced here (a long run is a chunk of its own)
        let spans = segments::chunk_spans(frames, chunk, runs.map(|r| r.lengths));
        let chunk = spans.iter().map(|s| s.fc).max().unwrap_or(chunk);
        let chunks = spans.len();
        let nslots = chunks.min(SLOTS);
        let timed = self.options.profile;
        let OpenClEngine {
            queue,
            copy_in,
            copy_out,
            plans,
            slots,
            work_a,
            work_b,
            bands,
            runs: device_runs,
            ..
        } = self;
        let mut bands = bands.as_mut().filter(|_| band_weights.is_some());
        let mut reduce = device_runs.as_mut().filter(|_| runs.is_some());
        let plan = plans
            .get_mut(&key)
            .ok_or_else(|| "plan missing".to_string())?;
        if !matches!(plan.path, Path::Local { .. }) {
            ensure(work_a, &dev, CL_MEM_READ_WRITE, 2 * m * chunk)?;
            ensure(work_b, &dev, CL_MEM_READ_WRITE, 2 * m * chunk)?;
        }
        while slots.len() < nslots {
            slots.push(Slot::new());
        }
        let staged = |direct: bool, len: usize| if direct { 0 } else { len };
        for slot in slots.iter_mut().take(nslots) {
            slot.reserve(
                &dev,
                chunk * per_in,
                chunk * per_out,
                staged(direct_in, chunk * per_in),
                staged(direct_out, chunk * per_final),
            )?;
            if bands.is_some() {
                ensure(
                    &mut slot.dev_bands,
                    &dev,
                    CL_MEM_READ_WRITE,
                    chunk * per_final,
                )?;
            }
            if reduce.is_some() {
                ensure(
                    &mut slot.dev_runs,
                    &dev,
                    CL_MEM_READ_WRITE,
                    chunk * per_final,
                )?;
            }
        }
        let scale = ScalePlan::with_window_sums(spec, plan.window_sums.0, plan.window_sums.1);
        let mode: i32 = match scale.mode {
            super::scale::ScaleMode::Magnitude => 0,
            super::scale::ScaleMode::Power => 1,
            super::scale::ScaleMode::Db => 2,
            // COMPLEX_OUT kernels write X and ignore the mode
            super::scale::ScaleMode::Complex => 3,
        };
        let args = ScaleArgs {
            mode,
            norm_edge: T::of_f64(scale.norm),
            norm_interior: T::of_f64(scale.norm * scale.interior_factor),
        };
        let work = (work_a.buf.as_ref(), work_b.buf.as_ref());
        let mut profile = BatchProfile {
            direct_in,
            direct_out,
            ..Default::default()
        };
        let cl = |what: &str, e: opencl3::error_codes::ClError| format!("{what}: {e}");
        // Pipeline over `chunks` chunks in `nslots` rotating slots: while chunk c is being
        // written, earlier chunks are being transformed and read back on three queues (copy in,
        // compute, copy out) chained by events. Staged input is copied into the slot's pinned
        // buffer first, staged output out of it once its read has finished.
        for c in 0..chunks + nslots {
            let s = c % nslots;
            slots[s].drain(out, timed.then_some(&mut profile))?;
            let Some(&span) = spans.get(c) else {
                continue; // past the last chunk: only draining
            };
            let slot = &mut slots[s];
            let (f0, fc) = (span.f0, span.fc);
            let (Some(dev_in), Some(dev_out)) =
                (slot.dev_in.buf.as_mut(), slot.dev_out.buf.as_ref())
            else {
                return Err("device buffers missing".into());
            };
            let src = &input[f0 * step..(f0 + fc - 1) * step + per_in];
            let src = match slot.pin_in.as_mut() {
                Some(pin) if !direct_in => {
                    let staging = &mut pin.as_mut_slice()[..src.len()];
                    par_copy(staging, src);
                    &*staging
                }
                _ => src,
            };
            // SAFETY: `src` (the caller's input or this slot's pinned staging block) stays alive
            // and unwritten until this write's event completes: the slot's `drain` waits for it
            // before the slot is reused or the function returns, on error and unwinding too
            // (`abandon`). `dev_in` holds a whole chunk, at least `src.len()` values.
            let write =
                unsafe { copy_in.enqueue_write_buffer(dev_in, CL_NON_BLOCKING, 0, src, &[]) }
                    .map_err(|e| cl("write", e))?;
            let kernels = enqueue_kernels(
                plan,
                queue,
                dev_in,
                dev_out,
                work,
                fc,
                m,
                fc * bins,
                (args, step_u32),
                &[write.get()],
            )?;
            let mut kernels = kernels;
            let dev_final = match bands.as_deref_mut() {
                Some(b) => {
                    let dev_bands = slot.dev_bands.buf.as_ref().ok_or("band buffer missing")?;
                    kernels.push(b.enqueue(queue, dev_out, dev_bands, fc)?);
                    dev_bands
                }
                None => dev_out,
            };
            let dev_final = match reduce.as_mut() {
                Some(r) => {
                    let dev_runs = slot.dev_runs.buf.as_ref().ok_or("run buffer missing")?;
                    kernels.push(r.enqueue(queue, dev_final, dev_runs, span, per_final)?);
                    dev_runs
                }
                None => dev_final,
            };
            let last = kernels
                .last()
                .map(|e| e.get())
                .ok_or_else(|| "no kernel launched".to_string())?;
            let dst = match slot.pin_out.as_mut() {
                Some(pin) if !direct_out => &mut pin.as_mut_slice()[..span.rc * per_final],
                _ => &mut out[span.r0 * per_final..(span.r0 + span.rc) * per_final],
            };
            // SAFETY: `dst` (the caller's output or the slot's pinned block) is not read or
            // freed before this read's event completes: `drain` waits for it, as for the write.
            // The read waits for `last`, the final kernel writing `dev_final`.
            let read = unsafe {
                copy_out.enqueue_read_buffer(dev_final, CL_NON_BLOCKING, 0, dst, &[last])
            }
            .map_err(|e| cl("read", e))?;
            for q in [&*copy_in, &*queue, &*copy_out] {
                q.flush().map_err(|e| cl("flush", e))?;
            }
            slot.pending = Some(Pending {
                out_at: span.r0 * per_final,
                len: span.rc * per_final,
                staged_out: !direct_out,
                write,
                kernels,
                read,
            });
        }
        self.last_profile = Some(profile);
        Ok(())
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
        input: FrameStep<'_, T>,
        reduction: (Option<&BandWeights>, Option<&Segments<'_>>),
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.supports(spec)?;
        if let Some(fault) = &self.options.fault {
            fault.before_batch(self.batches).map_err(dev_err)?;
        }
        if input.count == 0 {
            return Ok(());
        }
        // a panic inside (e.g. a host copy thread that cannot start) must not unwind past
        // commands that still read or write the caller's buffers
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run(spec, input, reduction, out)
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
