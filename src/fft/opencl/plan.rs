//! An OpenCL engine's plans: per frame size, input kind, window and output, the path (local,
//! four-step, three-stage, two-level, global, or mixed-radix for sizes that are not powers of two), its
//! kernels, the window and twiddle tables on the device.

use super::choice::{choose, DeviceLimits, PathChoice};
use super::geometry::global_radices;
use super::mixed::{MixedLocal, MixedPath};
use super::threestage::ThreeStage;
use super::twolevel::TwoLevel;
use super::*;

pub(super) enum Path<T: Sample> {
    Local {
        kernel: Kernel,
        geometry: LocalGeometry,
    },
    FourStep {
        columns: Kernel,
        /// Row FFTs and the finished bins (real input: the r2c post-processing fused).
        rows: Kernel,
        g1: LocalGeometry,
        g2: LocalGeometry,
    },
    /// Powers of two past the four-step: outer columns, then a four-step over each row
    /// (`threestage`).
    ThreeStage(ThreeStage<T>),
    Global {
        pack: Kernel,
        /// (radix, kernel) per pass.
        passes: Vec<(usize, Kernel)>,
        post: Kernel,
    },
    /// Frame sizes that are not powers of two, one kernel in local memory (`mixed`).
    MixedLocal(MixedLocal<T>),
    /// Frame sizes that are not powers of two, passes in global memory (`mixed`).
    Mixed(MixedPath<T>),
    /// Column then row FFTs in local memory (`twolevel`): sizes that are not powers of two and
    /// do not fit one kernel, Bluestein, and powers of two past the four-step path.
    TwoLevel(TwoLevel<T>),
}

/// Plans are kept per (n, kind, window, complex output).
pub(super) type PlanKey = (usize, InputKind, WindowKind, bool);

/// Everything one `PlanKey` needs on the device.
pub(super) struct Plan<T: Sample> {
    pub(super) path: Path<T>,
    /// Complex points the FFT of one frame has: n/2 for real input of even n (the half-length
    /// packing), else n.
    pub(super) m: usize,
    /// Complex points per frame each work buffer of the multi-pass paths holds (0: none needed).
    pub(super) work_points: usize,
    pub(super) window: Buffer<T>,
    /// Twiddle table for the local path, or for four-step stage 1.
    pub(super) table: Option<Buffer<T>>,
    /// Twiddle table for four-step stage 2.
    pub(super) table2: Option<Buffer<T>>,
    pub(super) window_sums: (f64, f64),
}

/// `tw[t] = exp(-2 pi i t / n)`, t < n, as interleaved (re, im), computed in f64.
pub(super) fn twiddles<T: Sample>(n: usize) -> Vec<T> {
    (0..n)
        .flat_map(|t| {
            let a = -2.0 * std::f64::consts::PI * t as f64 / n as f64;
            [T::of_f64(a.cos()), T::of_f64(a.sin())]
        })
        .collect()
}

/// Complex points of one frame's FFT: real input of even n is packed into n/2 complex points;
/// odd n (real) and complex input take n.
pub(super) fn fft_points(n: usize, kind: InputKind) -> usize {
    match kind {
        InputKind::Real if n % 2 == 0 => n / 2,
        _ => n,
    }
}

/// Bytes of the largest device buffer a frame of `n` samples of `kind` in reals of `real_bytes`
/// needs: one frame's complex points, or Bluestein's longer length for sizes with a prime factor
/// above 7.
pub(super) fn largest_buffer_bytes(n: usize, kind: InputKind, real_bytes: usize) -> u64 {
    let len = super::mixed::transform_len(fft_points(n, kind));
    (len * 2 * real_bytes) as u64
}

/// Whether the four-step kernels of a frame of `n` samples of `kind` compute their store
/// twiddles by recurrence (fourstep.cl FS_TW_RECUR: cospi/sinpi once per work-item, then one
/// complex multiplication a point) rather than cospi/sinpi for every point. Measured alone on an
/// NVIDIA H100 (2026-11-27, main at c70ca51, bench/gpu_vs_cufft.sh AB=1 REPS=3, kernel ms per
/// 2^26-sample batch, without -> with): real 32768 0.432 -> 0.455, real 65536 0.440 -> 0.421
/// (0.383 with the other adopted changes), complex 16384 0.690 -> 0.666, complex 32768
/// 0.668 -> 0.643, complex 65536 0.736 -> 0.774; real 16384 0.340 -> 0.339 and every other size
/// within 1 %. On an NVIDIA H200 (2026-11-28, REPS=10) real 32768 went the other way: 0.405
/// without, 0.330 with the four adopted changes together (docs/perf.md, session 18); a 23 %
/// gain on one card against a 5 % loss on the other, so real 32768 takes it too (session 23,
/// measured again there). So: complex frames up to 32768 points, real frames from 32768
/// samples; sizes not measured follow the nearest measured size of their kind.
pub(super) fn fourstep_twiddle_recurrence(n: usize, kind: InputKind) -> bool {
    match kind {
        InputKind::Complex => n <= 1 << 15,
        InputKind::Real => n >= 1 << 15,
    }
}

/// A path with its tables: (path, table, table2).
type Built<T> = (Path<T>, Option<Buffer<T>>, Option<Buffer<T>>);

impl<T: Sample> OpenClEngine<T> {
    fn local_limit(&self) -> usize {
        let dev = (self.dev.info.local_mem as usize).saturating_sub(256);
        match self.options.local_mem_limit {
            Some(l) => l.min(dev),
            None => dev,
        }
    }

    /// The `-D` options every program of this plan shares.
    fn plan_defines(&self, spec: &TransformSpec, m: usize) -> String {
        let real = spec.kind == InputKind::Real;
        let complex_out = spec.scale == Scale::Complex;
        let mut opts = format!(
            "-D M={m} -D REAL_INPUT={} -D COMPLEX_OUT={}",
            real as u32, complex_out as u32
        );
        if real && spec.n % 2 == 1 {
            opts.push_str(" -D REAL_FULL=1");
        }
        if T::NAME == "f64" {
            opts.push_str(" -D USE_DOUBLE");
        }
        opts
    }

    pub(super) fn build_plan(&self, spec: &TransformSpec) -> Result<Plan<T>, String> {
        let m = fft_points(spec.n, spec.kind);
        let opts = self.plan_defines(spec, m);
        let coefficients = spec.window.coefficients(spec.n);
        let window_sums = (
            coefficients.iter().sum(),
            coefficients.iter().map(|v| v * v).sum(),
        );
        let wv: Vec<T> = coefficients.into_iter().map(T::of_f64).collect();
        let window = self.upload(&wv)?;
        let rb = std::mem::size_of::<T>();
        let packed = spec.kind == InputKind::Real && spec.n % 2 == 0;
        let real = (packed, spec.kind == InputKind::Real && spec.n % 2 == 1);
        let limits = DeviceLimits {
            local_bytes: self.local_limit(),
            max_work_group: self.dev.info.max_work_group,
        };
        let complex = spec.kind == InputKind::Complex;
        let (path, table, table2) = match choose(limits, m, complex, rb) {
            PathChoice::Local(g) => self.local_plan(spec, m, g, &opts)?,
            PathChoice::FourStep(g1, g2) => {
                let recur = fourstep_twiddle_recurrence(spec.n, spec.kind);
                let ends = format!(
                    "-D REAL_INPUT={} -D COMPLEX_OUT={}{}",
                    (spec.kind == InputKind::Real) as u32,
                    (spec.scale == Scale::Complex) as u32,
                    if recur { " -D FS_TW_RECUR" } else { "" }
                );
                self.fourstep_plan(m, (g1, g2), ends)?
            }
            PathChoice::ThreeStage(stages) => {
                let ends = (packed, spec.scale == Scale::Complex);
                let three = self.threestage(m, stages, ends, &opts)?;
                (Path::ThreeStage(three), None, None)
            }
            PathChoice::Global => self.global_plan(m, &opts)?,
            PathChoice::MixedLocal { len } => {
                let (local, table) = self.mixed_local(m, len, &opts, limits.local_bytes)?;
                (Path::MixedLocal(local), Some(table), None)
            }
            PathChoice::TwoLevel { len, stages } => {
                let two = self.twolevel(m, (len, stages), real, &opts)?;
                (Path::TwoLevel(two), None, None)
            }
            PathChoice::Mixed => (Path::Mixed(self.mixed_path(m, &opts)?), None, None),
        };
        let work_points = match &path {
            Path::Local { .. } | Path::MixedLocal(_) => 0,
            Path::Mixed(mixed) => mixed.work_points(),
            Path::TwoLevel(two) => two.work_points(),
            _ => m,
        };
        Ok(Plan {
            path,
            m,
            work_points,
            window,
            table,
            table2,
            window_sums,
        })
    }

    /// The one-kernel path: stockham_local.cl with a twiddle table of n (real) or m points.
    fn local_plan(
        &self,
        spec: &TransformSpec,
        m: usize,
        g: LocalGeometry,
        opts: &str,
    ) -> Result<Built<T>, String> {
        let tabn = if spec.kind == InputKind::Real {
            2 * m
        } else {
            m
        };
        let opts = format!("{opts} -D TABN={tabn} {}", g.defines());
        let program = self.dev.program(
            "stockham_local",
            &[SRC_COMMON, SRC_PASSES, SRC_LOCAL],
            &opts,
        )?;
        let kernel =
            Kernel::create(&program, "fft_local").map_err(|e| format!("kernel fft_local: {e}"))?;
        let path = Path::Local {
            kernel,
            geometry: g,
        };
        Ok((path, Some(self.upload(&twiddles(tabn))?), None))
    }

    /// The two-kernel four-step path (fourstep.cl); real input's post-processing is fused into
    /// the rows kernel; `ends`: the input kind's and output's defines, and FS_TW_RECUR where
    /// the store twiddles go by recurrence (`fourstep_twiddle_recurrence`).
    fn fourstep_plan(
        &self,
        m: usize,
        (g1, g2): (LocalGeometry, LocalGeometry),
        ends: String,
    ) -> Result<Built<T>, String> {
        let (m1, m2) = (g1.m, g2.m);
        let columns = self.fourstep_kernel(1, &g1, (m1, m2, m), ends.clone())?;
        let rows = self.fourstep_kernel(2, &g2, (m1, m2, m), ends)?;
        let path = Path::FourStep {
            columns,
            rows,
            g1,
            g2,
        };
        let (t1, t2) = (self.upload(&twiddles(m1))?, self.upload(&twiddles(m2))?);
        Ok((path, Some(t1), Some(t2)))
    }

    /// `fourstep.cl`'s kernel of `stage` (1: columns, 2: rows) in shape `g` for frames of
    /// (M1, M2, MT) = `shape`, with the loads and stores `ends` defines.
    pub(super) fn fourstep_kernel(
        &self,
        stage: u32,
        g: &LocalGeometry,
        (m1, m2, mt): (usize, usize, usize),
        ends: String,
    ) -> Result<Kernel, String> {
        let double = if T::NAME == "f64" {
            " -D USE_DOUBLE"
        } else {
            ""
        };
        let options = format!(
            "-D STAGE={stage} -D M={} -D M1={m1} -D M2={m2} -D MT={mt} -D TABN={} {} {ends}{double}",
            g.m,
            g.m,
            g.defines()
        );
        let src = [SRC_COMMON, SRC_PASSES, SRC_FOURSTEP];
        let name = match stage {
            1 => "fourstep_columns",
            _ => "fourstep_rows",
        };
        let program = self.dev.program("fourstep", &src, &options)?;
        Kernel::create(&program, name).map_err(|e| format!("kernel {name}: {e}"))
    }

    /// The multi-pass path in global memory: pack, radix-8/4/2 passes, post.
    fn global_plan(&self, m: usize, opts: &str) -> Result<Built<T>, String> {
        let program =
            self.dev
                .program("stockham_global", &[SRC_COMMON, SRC_GLOBAL, SRC_POST], opts)?;
        let k =
            |name: &str| Kernel::create(&program, name).map_err(|e| format!("kernel {name}: {e}"));
        let passes = global_radices(m)
            .into_iter()
            .map(|r| Ok((r, k(&format!("pass_r{r}"))?)))
            .collect::<Result<Vec<_>, String>>()?;
        let path = Path::Global {
            pack: k("pack")?,
            passes,
            post: k("post")?,
        };
        Ok((path, None, None))
    }
}

impl<T: Sample> OpenClEngine<T> {
    /// The path frames of `spec` take on this engine (built now if need be): "local", "split"
    /// (the local path's split exchange), "four-step", "three-stage", "two-level", "two-level-bluestein",
    /// "two-level-bluestein-two-frames" (odd real frames two to a transform),
    /// "global", "mixed-local", "local-bluestein", "mixed" or "bluestein" (global-memory passes). For tests and
    /// diagnostics.
    pub fn path_name(&mut self, spec: &TransformSpec) -> Result<&'static str, EngineError> {
        self.supports(spec)?;
        let key: PlanKey = (spec.n, spec.kind, spec.window, spec.scale == Scale::Complex);
        if !self.plans.contains_key(&key) {
            let plan = self.build_plan(spec).map_err(dev_err)?;
            self.plans.insert(key, plan);
        }
        let plan = self
            .plans
            .get(&key)
            .ok_or_else(|| dev_err("plan missing"))?;
        Ok(match &plan.path {
            Path::Local { geometry, .. } if geometry.split => "split",
            Path::Local { .. } => "local",
            Path::FourStep { .. } => "four-step",
            Path::ThreeStage(_) => "three-stage",
            Path::Global { .. } => "global",
            Path::MixedLocal(l) if l.bluestein.is_some() => "local-bluestein",
            Path::MixedLocal(_) => "mixed-local",
            Path::Mixed(m) if m.is_bluestein() => "bluestein",
            Path::Mixed(_) => "mixed",
            Path::TwoLevel(t) if t.has_two_frames_per_transform() => {
                "two-level-bluestein-two-frames"
            }
            Path::TwoLevel(t) if t.is_bluestein() => "two-level-bluestein",
            Path::TwoLevel(_) => "two-level",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_buffer_is_a_frame_or_bluestein_s_length() {
        let mib = |b: u64| b >> 20;
        // 2^26 complex f32: 512 MiB; real: half the points
        assert_eq!(
            mib(largest_buffer_bytes(1 << 26, InputKind::Complex, 4)),
            512
        );
        assert_eq!(mib(largest_buffer_bytes(1 << 26, InputKind::Real, 4)), 256);
        // 2^25 - 1 = 31 x 601 x 1801, odd real: Bluestein over 2^26 points, f64: 1 GiB
        assert_eq!(
            mib(largest_buffer_bytes((1 << 25) - 1, InputKind::Real, 8)),
            1024
        );
        assert_eq!(largest_buffer_bytes(44100, InputKind::Real, 4), 22050 * 8);
    }

    #[test]
    fn fourstep_twiddles_by_recurrence_where_they_measured_faster() {
        let on = |n, kind| fourstep_twiddle_recurrence(n, kind);
        for log2 in 6..=24 {
            let n = 1usize << log2;
            assert_eq!(on(n, InputKind::Complex), log2 <= 15, "complex {n}");
            assert_eq!(on(n, InputKind::Real), log2 >= 15, "real {n}");
        }
    }
}
