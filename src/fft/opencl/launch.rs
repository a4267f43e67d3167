//! Launching a chunk's transform: the kernels of the plan's path (local, four-step or global
//! passes, then `post` for real input) enqueued on the compute queue in order, with the output
//! scale's arguments.

use super::{Path, Plan, GLOBAL_WG};
use crate::types::Sample;
use opencl3::command_queue::CommandQueue;
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;

/// Output-scale kernel arguments.
#[derive(Clone, Copy)]
pub(super) struct ScaleArgs<T> {
    pub(super) mode: i32,
    pub(super) norm_edge: T,
    pub(super) norm_interior: T,
}

/// Enqueues the transform of `frames` frames (`n_bins` output bins in all) from `inb` to `outb`
/// on `q`, the first kernel waiting for `wait`; frame f starts at value f × `step` of `inb` (the
/// frames overlap when `step` is less than a frame's values). Returns the kernels' events.
#[allow(clippy::too_many_arguments)]
pub(super) fn enqueue_kernels<T: Sample>(
    plan: &mut Plan<T>,
    q: &CommandQueue,
    inb: &Buffer<T>,
    outb: &Buffer<T>,
    work: (Option<&Buffer<T>>, Option<&Buffer<T>>),
    frames: usize,
    m: usize,
    n_bins: usize,
    (args, step): (ScaleArgs<T>, u32),
    wait: &[opencl3::types::cl_event],
) -> Result<Vec<Event>, String> {
    let frames_u32 =
        u32::try_from(frames).map_err(|_| format!("batch of {frames} frames is too large"))?;
    let ScaleArgs {
        mode,
        norm_edge,
        norm_interior,
    } = args;
    let cl = |what: &str, e: opencl3::error_codes::ClError| format!("{what}: {e}");
    let mut kernels: Vec<Event> = Vec::new();
    match &mut plan.path {
        Path::Local { kernel, geometry } => {
            let g = *geometry;
            let groups = frames.div_ceil(g.fpb);
            let wg = g.tpf * g.fpb;
            let table = plan
                .table
                .as_ref()
                .ok_or_else(|| "twiddle table missing".to_string())?;
            // SAFETY: the arguments are, in order, the buffers and scalars of the kernel's
            // signature in stockham_local.cl (sizes checked by the OpenCL runtime); `groups`
            // work-groups of `fpb` frames each, and a frame index past `frames` returns early.
            let ev = unsafe {
                ExecuteKernel::new(kernel)
                    .set_event_wait_list(wait)
                    .set_arg(inb)
                    .set_arg(&plan.window)
                    .set_arg(table)
                    .set_arg(outb)
                    .set_arg(&frames_u32)
                    .set_arg(&mode)
                    .set_arg(&norm_edge)
                    .set_arg(&norm_interior)
                    .set_arg(&step)
                    .set_global_work_size(groups * wg)
                    .set_local_work_size(wg)
                    .enqueue_nd_range(q)
            }
            .map_err(|e| cl("fft_local launch", e))?;
            kernels.push(ev);
        }
        Path::FourStep {
            columns,
            rows,
            post,
            g1,
            g2,
        } => {
            let (a, b) = match work {
                (Some(a), Some(b)) => (a, b),
                _ => return Err("work buffers missing".into()),
            };
            let (t1, t2) = match (plan.table.as_ref(), plan.table2.as_ref()) {
                (Some(x), Some(y)) => (x, y),
                _ => return Err("twiddle tables missing".into()),
            };
            let (m1, m2) = (g1.m, g2.m);
            let wg1 = g1.tpf * g1.fpb;
            // SAFETY: arguments in the order of `fourstep_columns` in fourstep.cl; the launch
            // covers `frames` frames of `m1 * m2` values, the size the buffers were made for.
            let ev = unsafe {
                ExecuteKernel::new(columns)
                    .set_event_wait_list(wait)
                    .set_arg(inb)
                    .set_arg(&plan.window)
                    .set_arg(t1)
                    .set_arg(a)
                    .set_arg(&frames_u32)
                    .set_arg(&step)
                    .set_global_work_size(frames * (m2 / g1.fpb) * wg1)
                    .set_local_work_size(wg1)
                    .enqueue_nd_range(q)
            }
            .map_err(|e| cl("fourstep_columns launch", e))?;
            kernels.push(ev);
            let wg2 = g2.tpf * g2.fpb;
            // SAFETY: arguments in the order of `fourstep_rows` in fourstep.cl; exactly
            // `frames * m1 / fpb` groups, one per `fpb` rows of a frame, all inside the buffers.
            let ev = unsafe {
                ExecuteKernel::new(rows)
                    .set_arg(a)
                    .set_arg(t2)
                    .set_arg(b)
                    .set_arg(outb)
                    .set_arg(&frames_u32)
                    .set_arg(&mode)
                    .set_arg(&norm_edge)
                    .set_arg(&norm_interior)
                    .set_global_work_size(frames * (m1 / g2.fpb) * wg2)
                    .set_local_work_size(wg2)
                    .enqueue_nd_range(q)
            }
            .map_err(|e| cl("fourstep_rows launch", e))?;
            kernels.push(ev);
            if let Some(post) = post {
                kernels.push(enqueue_post(post, q, b, outb, frames_u32, n_bins, args)?);
            }
        }
        Path::Global { pack, passes, post } => {
            let (a, b) = match work {
                (Some(a), Some(b)) => (a, b),
                _ => return Err("work buffers missing".into()),
            };
            let round = |x: usize| x.div_ceil(GLOBAL_WG) * GLOBAL_WG;
            // SAFETY: arguments in the order of the pack kernel in stockham_global.cl; items past
            // `frames * m` (the rounding up to GLOBAL_WG) return without touching memory.
            let ev = unsafe {
                ExecuteKernel::new(pack)
                    .set_event_wait_list(wait)
                    .set_arg(inb)
                    .set_arg(&plan.window)
                    .set_arg(a)
                    .set_arg(&frames_u32)
                    .set_arg(&step)
                    .set_global_work_size(round(frames * m))
                    .set_local_work_size(GLOBAL_WG)
                    .enqueue_nd_range(q)
            }
            .map_err(|e| cl("pack launch", e))?;
            kernels.push(ev);
            let (mut src, mut dst) = (a, b);
            let mut ns: u32 = 1;
            for (r, k) in passes.iter_mut() {
                // SAFETY: one radix-r pass of stockham_global.cl: source, destination (both
                // `frames * m` values), frame count and stride; extra items return early.
                let ev = unsafe {
                    ExecuteKernel::new(k)
                        .set_arg(src)
                        .set_arg(dst)
                        .set_arg(&frames_u32)
                        .set_arg(&ns)
                        .set_global_work_size(round(frames * m / *r))
                        .set_local_work_size(GLOBAL_WG)
                        .enqueue_nd_range(q)
                }
                .map_err(|e| cl("pass launch", e))?;
                kernels.push(ev);
                ns *= *r as u32;
                std::mem::swap(&mut src, &mut dst);
            }
            kernels.push(enqueue_post(post, q, src, outb, frames_u32, n_bins, args)?);
        }
    }
    Ok(kernels)
}

/// Enqueues `post` (r2c_post.cl): the `n_bins` finished bins of `frames` frames (one value each,
/// or re, im with COMPLEX_OUT), from the complex spectra in `z` into `out`, one work-item per bin.
pub(super) fn enqueue_post<T: Sample>(
    post: &mut Kernel,
    q: &CommandQueue,
    z: &Buffer<T>,
    out: &Buffer<T>,
    frames: u32,
    n_bins: usize,
    args: ScaleArgs<T>,
) -> Result<Event, String> {
    // SAFETY: arguments in the order of r2c_post.cl's kernel; `out` holds `n_bins` bins (values,
    // or pairs of values with COMPLEX_OUT) and items past `n_bins` (rounding up to GLOBAL_WG)
    // return early.
    unsafe {
        ExecuteKernel::new(post)
            .set_arg(z)
            .set_arg(out)
            .set_arg(&frames)
            .set_arg(&args.mode)
            .set_arg(&args.norm_edge)
            .set_arg(&args.norm_interior)
            .set_global_work_size(n_bins.div_ceil(GLOBAL_WG) * GLOBAL_WG)
            .set_local_work_size(GLOBAL_WG)
            .enqueue_nd_range(q)
    }
    .map_err(|e| format!("post launch: {e}"))
}
