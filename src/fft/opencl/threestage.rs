//! The three-stage path of `kernels/fourstep.cl` for powers of two past the four-step's reach
//! (2^19..2^26 points on an H100's 48 KiB): a frame of m = m0 × M points is an m0 × M matrix;
//! its columns (m0 points, window on load, the W_m twiddle on store) go to work buffer a, then
//! each of its m0 rows (M contiguous points) is a four-step frame: columns a -> b, rows b -> the
//! finished bins (complex input) or the complex spectrum in a, which `post` (r2c_post.cl) turns
//! into the bins of real input. Every stage runs in local memory, so a frame crosses device
//! memory three times (four for real input) where the global passes crossed it once per
//! radix-8 pass (nine times at 2^26).

use super::geometry::ThreeStages;
use super::launch::{enqueue_columns, enqueue_post, Columns, Enqueue, Items, Launch};
use super::plan::twiddles;
use super::*;
use opencl3::event::Event;
use opencl3::kernel::ExecuteKernel;

/// The kernels and twiddle tables of one frame size's three stages.
pub(super) struct ThreeStage<T: Sample> {
    stages: ThreeStages,
    /// Outer columns: input frames -> work a.
    outer: Kernel,
    /// The rows' four-step columns: a -> b.
    columns: Kernel,
    /// The rows' four-step rows: b -> bins (complex input) or a (real input).
    rows: Kernel,
    /// Real input: the r2c post-processing, a -> bins.
    post: Option<Kernel>,
    /// Twiddle tables of the three stages' transform lengths.
    tables: [Buffer<T>; 3],
}

impl<T: Sample> OpenClEngine<T> {
    /// Builds the three stages' kernels; `real`: real input (its post-processing after the
    /// rows), `complex_out`: `--scale complex`; `opts`: the plan's defines (M = m).
    pub(super) fn threestage(
        &self,
        m: usize,
        stages: ThreeStages,
        (real, complex_out): (bool, bool),
        opts: &str,
    ) -> Result<ThreeStage<T>, String> {
        let inner = stages.inner_points();
        let build = |stage, g, shape, ends| self.fourstep_kernel(stage, g, shape, ends);
        let ThreeStages {
            outer,
            columns,
            rows,
        } = stages;
        let outer_kernel = build(
            1,
            &outer,
            (outer.m, inner, m),
            format!("-D REAL_INPUT={} -D COMPLEX_OUT=0", real as u32),
        )?;
        let inner_shape = (columns.m, rows.m, inner);
        let columns_kernel = build(
            1,
            &columns,
            inner_shape,
            "-D REAL_INPUT=0 -D COMPLEX_OUT=0 -D NO_WINDOW".into(),
        )?;
        let rows_out = (real || complex_out) as u32;
        let rows_kernel = build(
            2,
            &rows,
            inner_shape,
            format!(
                "-D REAL_INPUT=0 -D COMPLEX_OUT={rows_out} -D OUTER={}",
                outer.m
            ),
        )?;
        let post = if real {
            let src = [SRC_COMMON, SRC_GLOBAL, SRC_POST];
            let program = self.dev.program("stockham_global", &src, opts)?;
            Some(Kernel::create(&program, "post").map_err(|e| format!("kernel post: {e}"))?)
        } else {
            None
        };
        let tables = [
            self.upload(&twiddles(outer.m))?,
            self.upload(&twiddles(columns.m))?,
            self.upload(&twiddles(rows.m))?,
        ];
        Ok(ThreeStage {
            stages,
            outer: outer_kernel,
            columns: columns_kernel,
            rows: rows_kernel,
            post,
            tables,
        })
    }
}

impl<T: Sample> ThreeStage<T> {
    /// Enqueues one chunk: input frames to finished bins, through every stage.
    pub(super) fn enqueue(
        &mut self,
        window: &Buffer<T>,
        l: &Launch<'_, T>,
        events: &mut Vec<Event>,
    ) -> Result<(), String> {
        let [a, b] = l.work()?;
        let ThreeStages {
            outer,
            columns,
            rows,
        } = self.stages;
        let inner = self.stages.inner_points();
        let first = Columns {
            q: l.q,
            input: l.inb,
            step: l.step,
            out: a,
            frames: l.frames,
            count: inner,
        };
        let [t0, t1, _] = &self.tables;
        let ev = enqueue_columns(&mut self.outer, &outer, &first, (window, t0), l.wait)?;
        events.push(ev);
        let row_step = u32::try_from(2 * inner).map_err(|_| "three-stage row too long")?;
        let second = Columns {
            q: l.q,
            input: a,
            step: row_step,
            out: b,
            frames: l.frames * outer.m,
            count: rows.m,
        };
        events.push(enqueue_columns(
            &mut self.columns,
            &columns,
            &second,
            (window, t1),
            &[],
        )?);
        let bins = if self.post.is_some() { a } else { l.outb };
        events.push(self.enqueue_rows(b, bins, l)?);
        if let Some(post) = &mut self.post {
            events.push(enqueue_post(post, l, a)?);
        }
        Ok(())
    }

    /// The inner four-step's rows (`fourstep_rows` with OUTER): `tmp` -> `out`.
    fn enqueue_rows(
        &self,
        tmp: &Buffer<T>,
        out: &Buffer<T>,
        l: &Launch<'_, T>,
    ) -> Result<Event, String> {
        let ThreeStages {
            outer,
            columns,
            rows,
        } = self.stages;
        let wg = rows.tpf * rows.fpb;
        let groups = l.frames * (outer.m / rows.fpb) * columns.m;
        let frames_u32 = l.frames_u32()?;
        // SAFETY: arguments in the order of `fourstep_rows` in fourstep.cl; one group per row k1
        // of `fpb` consecutive outer rows of each frame, reading `tmp` and writing `out` (the
        // launch's bins, or work buffer a: `frames * m` complex values), all inside the buffers.
        unsafe {
            ExecuteKernel::new(&self.rows)
                .set_arg(tmp)
                .set_arg(&self.tables[2])
                .set_arg(out)
                .set_arg(&frames_u32)
                .set_scale(&l.args)
                .set_arg(&0u32) // first (fourstep.cl says why it is an argument)
                .launch(Items::groups(groups, wg), l.q, "three-stage rows")
        }
    }
}
