//! Launching a chunk's transform: the kernels of the plan's path (local, four-step, three-stage, two-level,
//! global or mixed-radix passes, then `post` for real input) enqueued on the compute queue in order, with
//! the output scale's arguments.

use super::{Path, Plan, GLOBAL_WG};
use crate::types::Sample;
use opencl3::command_queue::CommandQueue;
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;
use opencl3::types::cl_event;

/// Output-scale kernel arguments.
#[derive(Clone, Copy)]
pub(super) struct ScaleArgs<T> {
    pub(super) mode: i32,
    pub(super) norm_edge: T,
    pub(super) norm_interior: T,
}

/// One chunk's launch: `frames` frames (`n_bins` output bins in all) from `inb` to `outb` on
/// `q`, the first kernel waiting for `wait`; frame f starts at value f × `step` of `inb` (the
/// frames overlap when `step` is less than a frame's values). `work`: the two work buffers of the
/// multi-pass paths.
pub(super) struct Launch<'a, T> {
    pub(super) q: &'a CommandQueue,
    pub(super) inb: &'a Buffer<T>,
    pub(super) outb: &'a Buffer<T>,
    pub(super) work: (Option<&'a Buffer<T>>, Option<&'a Buffer<T>>),
    pub(super) frames: usize,
    pub(super) n_bins: usize,
    pub(super) args: ScaleArgs<T>,
    pub(super) step: u32,
    pub(super) wait: &'a [cl_event],
}

impl<'a, T> Launch<'a, T> {
    /// The frame count as the kernels take it.
    pub(super) fn frames_u32(&self) -> Result<u32, String> {
        u32::try_from(self.frames)
            .map_err(|_| format!("batch of {} frames is too large", self.frames))
    }

    /// Both work buffers (the multi-pass paths need them).
    pub(super) fn work(&self) -> Result<[&'a Buffer<T>; 2], String> {
        match self.work {
            (Some(a), Some(b)) => Ok([a, b]),
            _ => Err("work buffers missing".into()),
        }
    }
}

/// `x` rounded up to whole work-groups of the global-memory kernels.
pub(super) fn round_wg(x: usize) -> usize {
    x.div_ceil(GLOBAL_WG) * GLOBAL_WG
}

pub(super) fn cl(what: &str, e: opencl3::error_codes::ClError) -> String {
    format!("{what}: {e}")
}

/// The work-items of one kernel launch.
#[derive(Clone, Copy)]
pub(super) enum Items {
    /// `count` work-groups of `wg` items each (the kernel's group shape).
    Groups { count: usize, wg: usize },
    /// One item per value of `n`, in groups of `GLOBAL_WG`; the items past `n` return early.
    Each(usize),
    /// `rows` rows of one item per value of `each`, in groups of `wg` along a row; the items
    /// past `each` return early.
    PerRow { each: usize, wg: usize, rows: usize },
}

impl Items {
    /// `count` work-groups of `wg` items.
    pub(super) fn groups(count: usize, wg: usize) -> Self {
        Items::Groups { count, wg }
    }

    /// `rows` rows of `each` items, in groups of `wg` along a row.
    pub(super) fn per_row(each: usize, wg: usize, rows: usize) -> Self {
        Items::PerRow { each, wg, rows }
    }

    /// The launch's global and local work sizes (one dimension, or two for rows).
    fn work_sizes(self) -> (Vec<usize>, Vec<usize>) {
        match self {
            Items::Groups { count, wg } => (vec![count * wg], vec![wg]),
            Items::Each(n) => (vec![round_wg(n)], vec![GLOBAL_WG]),
            Items::PerRow { each, wg, rows } => (vec![each.div_ceil(wg) * wg, rows], vec![wg, 1]),
        }
    }
}

/// The end of every launch: its scale arguments, its work-items, the queue.
pub(super) trait Enqueue {
    /// Sets the output scale's three arguments (mode, edge and interior norms) as the kernel's
    /// next ones.
    ///
    /// # Safety
    /// The kernel's next three parameters are those (as `ExecuteKernel::set_arg`).
    unsafe fn set_scale<T: Sample>(&mut self, args: &ScaleArgs<T>) -> &mut Self;

    /// Enqueues the kernel over `items` on `q`; an error names the kernel (`what`).
    ///
    /// # Safety
    /// Every argument of the kernel's signature is set, in order, and no item of `items` reads
    /// or writes outside the buffers given.
    unsafe fn launch(
        &mut self,
        items: Items,
        q: &CommandQueue,
        what: &str,
    ) -> Result<Event, String>;
}

impl Enqueue for ExecuteKernel<'_> {
    unsafe fn set_scale<T: Sample>(&mut self, args: &ScaleArgs<T>) -> &mut Self {
        // SAFETY: the caller's (three scalars in the kernel's order).
        unsafe {
            self.set_arg(&args.mode)
                .set_arg(&args.norm_edge)
                .set_arg(&args.norm_interior)
        }
    }

    unsafe fn launch(
        &mut self,
        items: Items,
        q: &CommandQueue,
        what: &str,
    ) -> Result<Event, String> {
        let (global, local) = items.work_sizes();
        self.set_global_work_sizes(&global)
            .set_local_work_sizes(&local);
        // SAFETY: the caller's (every argument set, every item inside the buffers).
        unsafe { self.enqueue_nd_range(q) }.map_err(|e| cl(&format!("{what} launch"), e))
    }
}

/// Enqueues the transform of one chunk (`launch`) with `plan`'s kernels; returns their events.
pub(super) fn enqueue_kernels<T: Sample>(
    plan: &mut Plan<T>,
    launch: &Launch<'_, T>,
) -> Result<Vec<Event>, String> {
    let mut kernels: Vec<Event> = Vec::new();
    let (window, table, table2) = (&plan.window, plan.table.as_ref(), plan.table2.as_ref());
    match &mut plan.path {
        Path::Local { kernel, geometry } => {
            let table = table.ok_or_else(|| "twiddle table missing".to_string())?;
            kernels.push(enqueue_local(kernel, geometry, (window, table), launch)?);
        }
        Path::FourStep {
            columns,
            rows,
            g1,
            g2,
        } => {
            let (t1, t2) = match (table, table2) {
                (Some(x), Some(y)) => (x, y),
                _ => return Err("twiddle tables missing".into()),
            };
            let [a, _] = launch.work()?;
            let c = Columns {
                q: launch.q,
                input: launch.inb,
                step: launch.step,
                out: a,
                frames: launch.frames,
                count: g2.m,
            };
            kernels.push(enqueue_columns(columns, g1, &c, (window, t1), launch.wait)?);
            kernels.push(enqueue_rows(rows, g2, g1.m, t2, launch)?);
        }
        Path::Global { pack, passes, post } => {
            let [a, b] = launch.work()?;
            kernels.push(enqueue_pack(pack, window, launch, plan.m)?);
            let (mut src, mut dst) = (a, b);
            let mut ns: u32 = 1;
            let frames_u32 = launch.frames_u32()?;
            for (r, k) in passes.iter_mut() {
                // SAFETY: one radix-r pass of stockham_global.cl: source, destination (both
                // `frames * m` values), frame count and stride; extra items return early.
                let ev = unsafe {
                    ExecuteKernel::new(k)
                        .set_arg(src)
                        .set_arg(dst)
                        .set_arg(&frames_u32)
                        .set_arg(&ns)
                        .launch(Items::Each(launch.frames * plan.m / *r), launch.q, "pass")?
                };
                kernels.push(ev);
                ns *= *r as u32;
                std::mem::swap(&mut src, &mut dst);
            }
            kernels.push(enqueue_post(post, launch, src)?);
        }
        Path::MixedLocal(local) => {
            let table = table.ok_or_else(|| "twiddle table missing".to_string())?;
            kernels.push(super::mixed::enqueue_mixed_local(
                local,
                (window, table),
                launch,
            )?);
        }
        Path::Mixed(mixed) => mixed.enqueue(window, launch, &mut kernels)?,
        Path::TwoLevel(two) => two.enqueue(window, launch, &mut kernels)?,
        Path::ThreeStage(three) => three.enqueue(window, launch, &mut kernels)?,
    }
    Ok(kernels)
}

/// The one-kernel local-memory path (stockham_local.cl).
fn enqueue_local<T: Sample>(
    kernel: &mut Kernel,
    g: &super::LocalGeometry,
    (window, table): (&Buffer<T>, &Buffer<T>),
    l: &Launch<'_, T>,
) -> Result<Event, String> {
    let groups = l.frames.div_ceil(g.fpb);
    let wg = g.tpf * g.fpb;
    let frames_u32 = l.frames_u32()?;
    // SAFETY: the arguments are, in order, the buffers and scalars of the kernel's signature in
    // stockham_local.cl (sizes checked by the OpenCL runtime); `groups` work-groups of `fpb`
    // frames each, and a frame index past `frames` returns early.
    unsafe {
        ExecuteKernel::new(kernel)
            .set_event_wait_list(l.wait)
            .set_arg(l.inb)
            .set_arg(window)
            .set_arg(table)
            .set_arg(l.outb)
            .set_arg(&frames_u32)
            .set_scale(&l.args)
            .set_arg(&l.step)
            .launch(Items::groups(groups, wg), l.q, "fft_local")
    }
}

/// One four-step stage-1 launch: `frames` frames of `count` columns each from `input` (frame f
/// at value f × `step`) into `out`.
pub(super) struct Columns<'a, T> {
    pub(super) q: &'a CommandQueue,
    pub(super) input: &'a Buffer<T>,
    pub(super) step: u32,
    pub(super) out: &'a Buffer<T>,
    pub(super) frames: usize,
    pub(super) count: usize,
}

/// `fourstep_columns` of shape `g` over `c`, waiting for `wait`.
pub(super) fn enqueue_columns<T: Sample>(
    kernel: &mut Kernel,
    g: &super::LocalGeometry,
    c: &Columns<'_, T>,
    (window, table): (&Buffer<T>, &Buffer<T>),
    wait: &[cl_event],
) -> Result<Event, String> {
    let wg = g.tpf * g.fpb;
    let frames = u32::try_from(c.frames).map_err(|_| "batch too large")?;
    // SAFETY: arguments in the order of `fourstep_columns` in fourstep.cl; one group per `fpb`
    // of a frame's `count` columns, reading `frames` frames of the input (each inside it at
    // `step` values apart) and writing as many frames of `g.m * count` points into `out`, which
    // the engine made for the batch's frames.
    unsafe {
        ExecuteKernel::new(kernel)
            .set_event_wait_list(wait)
            .set_arg(c.input)
            .set_arg(window)
            .set_arg(table)
            .set_arg(c.out)
            .set_arg(&frames)
            .set_arg(&c.step)
            .set_arg(&0u32) // first
            .launch(
                Items::groups(c.frames * (c.count / g.fpb), wg),
                c.q,
                "fourstep_columns",
            )
    }
}

/// Four-step stage 2 (fourstep.cl `fourstep_rows`): work buffer a -> the launch's output bins.
fn enqueue_rows<T: Sample>(
    rows: &mut Kernel,
    g2: &super::LocalGeometry,
    m1: usize,
    t2: &Buffer<T>,
    l: &Launch<'_, T>,
) -> Result<Event, String> {
    let [a, _] = l.work()?;
    let wg2 = g2.tpf * g2.fpb;
    let frames_u32 = l.frames_u32()?;
    // SAFETY: arguments in the order of `fourstep_rows` in fourstep.cl; exactly
    // `frames * m1 / fpb` groups, one per `fpb` rows of a frame (real input: fpb/2 row pairs of
    // the m1/2 pairs), reading work buffer a and writing the launch's bins, all inside the
    // buffers.
    unsafe {
        ExecuteKernel::new(rows)
            .set_arg(a)
            .set_arg(t2)
            .set_arg(l.outb)
            .set_arg(&frames_u32)
            .set_scale(&l.args)
            .set_arg(&0u32) // first
            .launch(
                Items::groups(l.frames * (m1 / g2.fpb), wg2),
                l.q,
                "fourstep_rows",
            )
    }
}

/// `pack` (stockham_global.cl): the input frames, windowed, as `m` complex points per frame in
/// work buffer a; waits for the launch's wait list.
pub(super) fn enqueue_pack<T: Sample>(
    pack: &mut Kernel,
    window: &Buffer<T>,
    l: &Launch<'_, T>,
    m: usize,
) -> Result<Event, String> {
    let [a, _] = l.work()?;
    let frames_u32 = l.frames_u32()?;
    // SAFETY: arguments in the order of the pack kernel in stockham_global.cl; items past
    // `frames * m` (the rounding up to GLOBAL_WG) return without touching memory.
    unsafe {
        ExecuteKernel::new(pack)
            .set_event_wait_list(l.wait)
            .set_arg(l.inb)
            .set_arg(window)
            .set_arg(a)
            .set_arg(&frames_u32)
            .set_arg(&l.step)
            .launch(Items::Each(l.frames * m), l.q, "pack")
    }
}

/// Enqueues `post` (r2c_post.cl, or twolevel.cl's `two_frames_post`): the launch's `n_bins` finished
/// bins (one value each, or re, im with COMPLEX_OUT), from the complex spectra in `z` into the
/// output, one work-item per bin.
pub(super) fn enqueue_post<T: Sample>(
    post: &mut Kernel,
    l: &Launch<'_, T>,
    z: &Buffer<T>,
) -> Result<Event, String> {
    let frames = l.frames_u32()?;
    // SAFETY: arguments in the order of r2c_post.cl's kernel (twolevel.cl's `two_frames_post` takes
    // the same); `out` holds the launch's `n_bins` bins (values, or pairs of values with
    // COMPLEX_OUT), and items past them (rounding up to GLOBAL_WG) return early.
    unsafe {
        ExecuteKernel::new(post)
            .set_arg(z)
            .set_arg(l.outb)
            .set_arg(&frames)
            .set_scale(&l.args)
            .launch(Items::Each(l.n_bins), l.q, "post")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_sizes_cover_the_items_in_whole_groups() {
        assert_eq!(Items::groups(3, 64).work_sizes(), (vec![192], vec![64]));
        assert_eq!(
            Items::Each(1).work_sizes(),
            (vec![GLOBAL_WG], vec![GLOBAL_WG])
        );
        assert_eq!(Items::Each(GLOBAL_WG).work_sizes().0, vec![GLOBAL_WG]);
        assert_eq!(
            Items::Each(GLOBAL_WG + 1).work_sizes().0,
            vec![2 * GLOBAL_WG]
        );
        let rows = Items::per_row(100, 64, 5).work_sizes();
        assert_eq!(rows, (vec![128, 5], vec![64, 1]));
    }
}
