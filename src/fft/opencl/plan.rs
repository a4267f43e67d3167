//! An OpenCL engine's plans: per frame size, input kind, window and output, the path (local,
//! four-step or global), its kernels, the window and twiddle tables on the device.

use super::geometry::global_radices;
use super::*;

pub(super) enum Path {
    Local {
        kernel: Kernel,
        geometry: LocalGeometry,
    },
    FourStep {
        columns: Kernel,
        rows: Kernel,
        /// r2c post-processing (real input only).
        post: Option<Kernel>,
        g1: LocalGeometry,
        g2: LocalGeometry,
    },
    Global {
        pack: Kernel,
        /// (radix, kernel) per pass.
        passes: Vec<(usize, Kernel)>,
        post: Kernel,
    },
}

/// Plans are kept per (n, kind, window, complex output).
pub(super) type PlanKey = (usize, InputKind, WindowKind, bool);

/// Everything one `PlanKey` needs on the device.
pub(super) struct Plan<T: Sample> {
    pub(super) path: Path,
    pub(super) window: Buffer<T>,
    /// Twiddle table for the local path, or for four-step stage 1.
    pub(super) table: Option<Buffer<T>>,
    /// Twiddle table for four-step stage 2.
    pub(super) table2: Option<Buffer<T>>,
    pub(super) window_sums: (f64, f64),
}

/// `tw[t] = exp(-2 pi i t / n)`, t < n, as interleaved (re, im), computed in f64.
fn twiddles<T: Sample>(n: usize) -> Vec<T> {
    (0..n)
        .flat_map(|t| {
            let a = -2.0 * std::f64::consts::PI * t as f64 / n as f64;
            [T::of_f64(a.cos()), T::of_f64(a.sin())]
        })
        .collect()
}

impl<T: Sample> OpenClEngine<T> {
    fn local_limit(&self) -> usize {
        let dev = (self.dev.info.local_mem as usize).saturating_sub(256);
        match self.options.local_mem_limit {
            Some(l) => l.min(dev),
            None => dev,
        }
    }

    pub(super) fn build_plan(&self, spec: &TransformSpec) -> Result<Plan<T>, String> {
        let real = spec.kind == InputKind::Real;
        let m = if real { spec.n / 2 } else { spec.n };
        let rb = std::mem::size_of::<T>();
        let complex_out = spec.scale == Scale::Complex;
        let mut opts = format!(
            "-D M={m} -D REAL_INPUT={} -D COMPLEX_OUT={}",
            real as u32, complex_out as u32
        );
        if T::NAME == "f64" {
            opts.push_str(" -D USE_DOUBLE");
        }
        if !self.options.extra_defines.is_empty() {
            opts.push(' ');
            opts.push_str(&self.options.extra_defines);
        }
        let coefficients = spec.window.coefficients(spec.n);
        let window_sums = (
            coefficients.iter().sum(),
            coefficients.iter().map(|v| v * v).sum(),
        );
        let wv: Vec<T> = coefficients.into_iter().map(T::of_f64).collect();
        let window = self.upload(&wv)?;
        let geometry = LocalGeometry::new(
            m,
            rb,
            self.local_limit(),
            self.dev.info.max_work_group.min(1024),
            self.options.target_wg.unwrap_or(TARGET_WG),
        );
        let (path, table, table2) = match geometry {
            Some(g) => {
                let tabn = if real { 2 * m } else { m };
                let opts = format!("{opts} -D TABN={tabn} {}", g.defines());
                let program = self.dev.program(
                    "stockham_local",
                    &[SRC_COMMON, SRC_PASSES, SRC_LOCAL],
                    &opts,
                )?;
                let kernel = Kernel::create(&program, "fft_local")
                    .map_err(|e| format!("kernel fft_local: {e}"))?;
                (
                    Path::Local {
                        kernel,
                        geometry: g,
                    },
                    Some(self.upload(&twiddles(tabn))?),
                    None,
                )
            }
            None if fourstep_geometry(m, rb, self.local_limit()).is_some() => {
                let (g1, g2) = fourstep_geometry(m, rb, self.local_limit())
                    .ok_or_else(|| "four-step geometry".to_string())?;
                let (m1, m2) = (g1.m, g2.m);
                let stage = |n: u32, g: &LocalGeometry| {
                    format!(
                        "{opts} -D STAGE={n} -D M1={m1} -D M2={m2} -D MT={m} -D TABN={} {}",
                        g.m,
                        g.defines()
                    )
                    .replacen(
                        &format!("-D M={m} "),
                        &format!("-D M={} ", g.m),
                        1,
                    )
                };
                let src = [SRC_COMMON, SRC_PASSES, SRC_FOURSTEP];
                let p1 = self.dev.program("fourstep", &src, &stage(1, &g1))?;
                let p2 = self.dev.program("fourstep", &src, &stage(2, &g2))?;
                let columns = Kernel::create(&p1, "fourstep_columns")
                    .map_err(|e| format!("kernel fourstep_columns: {e}"))?;
                let rows = Kernel::create(&p2, "fourstep_rows")
                    .map_err(|e| format!("kernel fourstep_rows: {e}"))?;
                let post = if real {
                    let pg = self.dev.program(
                        "stockham_global",
                        &[SRC_COMMON, SRC_GLOBAL, SRC_POST],
                        &opts,
                    )?;
                    Some(Kernel::create(&pg, "post").map_err(|e| format!("kernel post: {e}"))?)
                } else {
                    None
                };
                (
                    Path::FourStep {
                        columns,
                        rows,
                        post,
                        g1,
                        g2,
                    },
                    Some(self.upload(&twiddles(m1))?),
                    Some(self.upload(&twiddles(m2))?),
                )
            }
            None => {
                let program = self.dev.program(
                    "stockham_global",
                    &[SRC_COMMON, SRC_GLOBAL, SRC_POST],
                    &opts,
                )?;
                let k = |name: &str| {
                    Kernel::create(&program, name).map_err(|e| format!("kernel {name}: {e}"))
                };
                let passes = global_radices(m)
                    .into_iter()
                    .map(|r| Ok((r, k(&format!("pass_r{r}"))?)))
                    .collect::<Result<Vec<_>, String>>()?;
                (
                    Path::Global {
                        pack: k("pack")?,
                        passes,
                        post: k("post")?,
                    },
                    None,
                    None,
                )
            }
        };
        Ok(Plan {
            path,
            window,
            table,
            table2,
            window_sums,
        })
    }
}
