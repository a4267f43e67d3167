//! The OpenCL engine's paths for frame sizes that are not powers of two: one kernel in local
//! memory where the frame (or Bluestein's length) fits twice (`kernels/mixed_local.cl`; larger
//! frames: `twolevel`), else (`kernels/mixed_radix.cl`):
//! `pack` -> mixed-radix Stockham passes (radix 16, 8, 4, 2, 3, 5, 7) between the two work
//! buffers -> `post`, all in global memory. Sizes with a prime factor above 7 go through
//! Bluestein's chirp-z transform over a power-of-two length L >= 2M - 1 (two L-point FFTs made of
//! the same passes). Twiddles, the chirp and the chirp filter's spectrum are computed on the host
//! in f64 (the chirp's phase from j² mod 2M in integers) and uploaded, so the device computes no
//! trigonometry here.
//!
//! M, the complex points of a frame's FFT (`plan::fft_points`): n/2 for real input of even n (the
//! same half-length packing and `post` as powers of two), n for odd real n (`-D REAL_FULL=1`:
//! the frame as n complex points with zero imaginary parts) and for complex input.

use super::launch::{enqueue_pack, enqueue_post, Enqueue, Items, Launch};
use super::plan::twiddles;
use super::twolevel::SRC_LPASS;
use super::*;
use opencl3::event::Event;
use opencl3::kernel::ExecuteKernel;
use rustfft::num_complex::Complex;

const SRC_MIXED: &str = include_str!("../../../kernels/mixed_radix.cl");
const SRC_MIXED_LOCAL: &str = include_str!("../../../kernels/mixed_local.cl");

/// Most work-items per group of the one-kernel mixed-radix path.
const LOCAL_WG_MAX: usize = 256;

/// The radices of the passes for `n` (16s, one of 8/4/2, then 3s, 5s, 7s) when its prime
/// factors are 2, 3, 5 and 7 only; None otherwise (Bluestein).
pub(super) fn radices(n: usize) -> Option<Vec<usize>> {
    if n < 2 {
        return None;
    }
    let mut twos = n.trailing_zeros();
    let mut rest = n >> twos;
    let mut out = Vec::new();
    while twos >= 4 {
        out.push(16);
        twos -= 4;
    }
    if twos > 0 {
        out.push(1 << twos);
    }
    for p in [3, 5, 7] {
        while rest % p == 0 {
            out.push(p);
            rest /= p;
        }
    }
    (rest == 1).then_some(out)
}

/// The points a transform of `m` points runs over: `m` when its prime factors are 2, 3, 5 and
/// 7 (powers of two included), else Bluestein's length.
pub(super) fn transform_len(m: usize) -> usize {
    match radices(m) {
        Some(_) => m,
        None => bluestein_len(m),
    }
}

/// Bluestein's length for m points: the power of two at or above 2m - 1.
pub(super) fn bluestein_len(m: usize) -> usize {
    (2 * m - 1).next_power_of_two()
}

/// The chirp c_j = exp(-i π j² / m), j < m; the phase from j² mod 2m in integers, so it is exact
/// in f64 for every j (no large arguments to sin and cos).
pub(super) fn chirp(m: usize) -> Vec<Complex<f64>> {
    let two_m = 2 * m as u128;
    (0..m)
        .map(|j| {
            let r = (j as u128 * j as u128) % two_m;
            Complex::from_polar(1.0, -std::f64::consts::PI * r as f64 / m as f64)
        })
        .collect()
}

/// The spectrum of Bluestein's filter b (b_j = conj c_|j|, circular over `l`), divided by `l`
/// (the inverse transform's scale), in f64.
pub(super) fn filter_spectrum(c: &[Complex<f64>], l: usize) -> Vec<Complex<f64>> {
    let mut b = vec![Complex::new(0.0, 0.0); l];
    for (j, v) in c.iter().enumerate() {
        b[j] = v.conj();
        if j > 0 {
            b[l - j] = v.conj();
        }
    }
    rustfft::FftPlanner::new()
        .plan_fft_forward(l)
        .process(&mut b);
    b.iter().map(|z| z / l as f64).collect()
}

pub(super) fn interleave<T: Sample>(v: &[Complex<f64>]) -> Vec<T> {
    v.iter()
        .flat_map(|z| [T::of_f64(z.re), T::of_f64(z.im)])
        .collect()
}

/// Mixed-radix passes over transforms of `n` points.
pub(super) struct Passes<T: Sample> {
    n: usize,
    tw: Buffer<T>,
    /// (radix, kernel) per pass.
    kernels: Vec<(usize, Kernel)>,
}

/// Bluestein's tables and kernels for m points over `l`.
pub(super) struct Bluestein<T: Sample> {
    l: usize,
    chirp: Buffer<T>,
    filter: Buffer<T>,
    fft: Passes<T>,
    chirp_in: Kernel,
    chirp_mul: Kernel,
    chirp_out: Kernel,
}

enum Core<T: Sample> {
    Stockham(Passes<T>),
    Bluestein(Bluestein<T>),
}

/// The one-kernel path (mixed_local.cl) for sizes of factors 2, 3, 5, 7 whose frame fits local
/// memory twice, and for Bluestein where two arrays of its length L do: one work-group of `wg`
/// work-items per frame.
pub(super) struct MixedLocal<T: Sample> {
    pub(super) kernel: Kernel,
    pub(super) wg: usize,
    /// Bluestein's chirp and filter spectrum (None: plain mixed radix).
    pub(super) bluestein: Option<(Buffer<T>, Buffer<T>)>,
}

/// The one-kernel path and its twiddle table.
type LocalPlan<T> = (MixedLocal<T>, Buffer<T>);

/// The plan of one size that is not a power of two.
pub(super) struct MixedPath<T: Sample> {
    m: usize,
    pack: Kernel,
    post: Kernel,
    core: Core<T>,
}

impl<T: Sample> OpenClEngine<T> {
    /// The mixed-radix (or Bluestein) path for `m` complex points; `opts` are the plan's defines.
    pub(super) fn mixed_path(&self, m: usize, opts: &str) -> Result<MixedPath<T>, String> {
        let src = [SRC_COMMON, SRC_GLOBAL, SRC_POST, SRC_MIXED];
        let program = self.dev.program("mixed_radix", &src, opts)?;
        let k =
            |name: &str| Kernel::create(&program, name).map_err(|e| format!("kernel {name}: {e}"));
        let passes = |n: usize, radices: Vec<usize>| -> Result<Passes<T>, String> {
            let kernels = radices
                .into_iter()
                .map(|r| Ok((r, k(&format!("mpass_r{r}"))?)))
                .collect::<Result<Vec<_>, String>>()?;
            let tw = self.upload(&twiddles(n))?;
            Ok(Passes { n, tw, kernels })
        };
        let core = match radices(m) {
            Some(r) => Core::Stockham(passes(m, r)?),
            None => {
                let l = bluestein_len(m);
                let c = chirp(m);
                let r = radices(l).ok_or("Bluestein length")?;
                Core::Bluestein(Bluestein {
                    l,
                    chirp: self.upload(&interleave::<T>(&c))?,
                    filter: self.upload(&interleave::<T>(&filter_spectrum(&c, l)))?,
                    fft: passes(l, r)?,
                    chirp_in: k("chirp_in")?,
                    chirp_mul: k("chirp_mul")?,
                    chirp_out: k("chirp_out")?,
                })
            }
        };
        Ok(MixedPath {
            m,
            pack: k("pack")?,
            post: k("post")?,
            core,
        })
    }
}

impl<T: Sample> OpenClEngine<T> {
    /// The one-kernel path for `m` complex points over `len` (m, or Bluestein's length when m
    /// has a prime factor above 7) and its twiddle table (`choice::PathChoice::MixedLocal`).
    pub(super) fn mixed_local(
        &self,
        m: usize,
        len: usize,
        opts: &str,
        local_limit: usize,
    ) -> Result<LocalPlan<T>, String> {
        let plain = len == m;
        let radices = radices(len).ok_or("Bluestein length")?;
        // two arrays of len complex values (`a`, `b` in the kernel), padded (one every 16,
        // mixed_lpass.cl's LP_PAD: the stride-R stores spread over the banks) where that fits
        let rb = std::mem::size_of::<T>();
        let pad = 4 * (len + (len >> 4) + 1) * rb <= local_limit;
        let wg = (len / 4)
            .next_multiple_of(32)
            .clamp(32, LOCAL_WG_MAX)
            .min(self.dev.info.max_work_group.max(1));
        let list: Vec<String> = radices.iter().map(|r| r.to_string()).collect();
        let opts = format!(
            "{opts} -D WG={wg} -D NPASSES={} -D RADICES={{{}}} -D LP_LEN={len} -D BLUESTEIN={}{}",
            radices.len(),
            list.join(","),
            !plain as u32,
            if pad { " -D LP_PAD" } else { "" }
        );
        let src = [SRC_COMMON, SRC_MIXED, SRC_LPASS, SRC_MIXED_LOCAL];
        let program = self.dev.program("mixed_local", &src, &opts)?;
        let kernel = Kernel::create(&program, "fft_mixed_local")
            .map_err(|e| format!("kernel fft_mixed_local: {e}"))?;
        let bluestein = if plain {
            None
        } else {
            let c = chirp(m);
            Some((
                self.upload(&interleave::<T>(&c))?,
                self.upload(&interleave::<T>(&filter_spectrum(&c, len)))?,
            ))
        };
        let local = MixedLocal {
            kernel,
            wg,
            bluestein,
        };
        Ok((local, self.upload(&twiddles(len))?))
    }
}

/// Enqueues the one-kernel mixed-radix path: input frames to finished bins, one group per frame.
pub(super) fn enqueue_mixed_local<T: Sample>(
    path: &MixedLocal<T>,
    (window, table): (&Buffer<T>, &Buffer<T>),
    l: &Launch<'_, T>,
) -> Result<Event, String> {
    let frames = l.frames_u32()?;
    // without Bluestein the chirp and filter arguments are never read: the table stands in
    let (chirp, filter) = match &path.bluestein {
        Some((c, f)) => (c, f),
        None => (table, table),
    };
    // SAFETY: arguments in the order of mixed_local.cl's `fft_mixed_local`; one group of `wg`
    // work-items (the kernel's required size) per frame, `frames` groups, each reading its frame
    // at f × step and writing its bins; the twiddle table holds LP_LEN points, the chirp m and
    // the filter LP_LEN (Bluestein only).
    unsafe {
        ExecuteKernel::new(&path.kernel)
            .set_event_wait_list(l.wait)
            .set_arg(l.inb)
            .set_arg(window)
            .set_arg(table)
            .set_arg(l.outb)
            .set_arg(&frames)
            .set_scale(&l.args)
            .set_arg(&l.step)
            .set_arg(chirp)
            .set_arg(filter)
            .launch(Items::groups(l.frames, path.wg), l.q, "fft_mixed_local")
    }
}

impl<T: Sample> MixedPath<T> {
    /// Whether this plan goes through Bluestein's chirp-z transform.
    pub(super) fn is_bluestein(&self) -> bool {
        matches!(self.core, Core::Bluestein(_))
    }

    /// Complex points per frame each work buffer must hold.
    pub(super) fn work_points(&self) -> usize {
        match &self.core {
            Core::Stockham(_) => self.m,
            Core::Bluestein(b) => b.l,
        }
    }

    /// Enqueues one chunk: pack into work buffer a, the transform, post into the output.
    pub(super) fn enqueue(
        &mut self,
        window: &Buffer<T>,
        l: &Launch<'_, T>,
        events: &mut Vec<Event>,
    ) -> Result<(), String> {
        let bufs = l.work()?;
        events.push(enqueue_pack(&mut self.pack, window, l, self.m)?);
        let at = match &mut self.core {
            Core::Stockham(p) => p.enqueue(l, bufs, 0, events)?,
            Core::Bluestein(b) => b.enqueue(l, bufs, self.m, events)?,
        };
        events.push(enqueue_post(&mut self.post, l, bufs[at])?);
        Ok(())
    }
}

impl<T: Sample> Passes<T> {
    /// The passes from `bufs[from]`, ping-ponging between the two; returns where the spectra are.
    fn enqueue(
        &mut self,
        l: &Launch<'_, T>,
        bufs: [&Buffer<T>; 2],
        from: usize,
        events: &mut Vec<Event>,
    ) -> Result<usize, String> {
        let frames = l.frames_u32()?;
        let n = u32::try_from(self.n).map_err(|_| "transform too long")?;
        let (mut at, mut ns) = (from, 1u32);
        for (r, k) in self.kernels.iter_mut() {
            // SAFETY: arguments in the order of mixed_radix.cl's `mpass_rR`: source and
            // destination (each `frames * n` points: the work buffers hold `work_points` per
            // frame), the twiddle table of n points, frame count, n and the stride; items past
            // `frames * n / r` (the rounding up) return early.
            let ev = unsafe {
                ExecuteKernel::new(k)
                    .set_arg(bufs[at])
                    .set_arg(bufs[1 - at])
                    .set_arg(&self.tw)
                    .set_arg(&frames)
                    .set_arg(&n)
                    .set_arg(&ns)
                    .launch(Items::Each(l.frames * self.n / *r), l.q, "mixed pass")?
            };
            events.push(ev);
            ns *= *r as u32;
            at = 1 - at;
        }
        Ok(at)
    }
}

impl<T: Sample> Bluestein<T> {
    /// m points in `bufs[0]` -> chirp, L-point FFT, filter, L-point FFT, chirp -> m points;
    /// returns the buffer holding the spectra.
    fn enqueue(
        &mut self,
        l: &Launch<'_, T>,
        bufs: [&Buffer<T>; 2],
        m: usize,
        events: &mut Vec<Event>,
    ) -> Result<usize, String> {
        let frames = l.frames_u32()?;
        let (m_u32, l_u32) = (m as u32, self.l as u32);
        // SAFETY: arguments in the order of mixed_radix.cl's `chirp_in`: m points per frame in
        // bufs[0], l per frame written to bufs[1] (the work buffers hold l per frame), the
        // chirp's m points; items past `frames * l` return early.
        let ev = unsafe {
            ExecuteKernel::new(&self.chirp_in)
                .set_arg(bufs[0])
                .set_arg(bufs[1])
                .set_arg(&self.chirp)
                .set_arg(&frames)
                .set_arg(&m_u32)
                .set_arg(&l_u32)
                .launch(Items::Each(l.frames * self.l), l.q, "chirp_in")?
        };
        events.push(ev);
        let at = self.fft.enqueue(l, bufs, 1, events)?;
        // SAFETY: `chirp_mul`: l points per frame in place, the filter's l points; items past
        // `frames * l` return early.
        let ev = unsafe {
            ExecuteKernel::new(&self.chirp_mul)
                .set_arg(bufs[at])
                .set_arg(&self.filter)
                .set_arg(&frames)
                .set_arg(&l_u32)
                .launch(Items::Each(l.frames * self.l), l.q, "chirp_mul")?
        };
        events.push(ev);
        let at = self.fft.enqueue(l, bufs, at, events)?;
        // SAFETY: `chirp_out`: l points per frame read, m per frame written to the other work
        // buffer, the chirp's m points; items past `frames * m` return early.
        let ev = unsafe {
            ExecuteKernel::new(&self.chirp_out)
                .set_arg(bufs[at])
                .set_arg(bufs[1 - at])
                .set_arg(&self.chirp)
                .set_arg(&frames)
                .set_arg(&m_u32)
                .set_arg(&l_u32)
                .launch(Items::Each(l.frames * m), l.q, "chirp_out")?
        };
        events.push(ev);
        Ok(1 - at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dft(x: &[Complex<f64>]) -> Vec<Complex<f64>> {
        let n = x.len();
        (0..n)
            .map(|k| {
                x.iter()
                    .enumerate()
                    .map(|(j, v)| {
                        let a = -std::f64::consts::TAU * ((j * k) % n) as f64 / n as f64;
                        v * Complex::from_polar(1.0, a)
                    })
                    .sum()
            })
            .collect()
    }

    fn probe(n: usize) -> Vec<Complex<f64>> {
        (0..n)
            .map(|j| Complex::new((j as f64 * 0.37).sin(), (j as f64 * 1.3).cos() * 0.5))
            .collect()
    }

    fn max_err(a: &[Complex<f64>], b: &[Complex<f64>]) -> f64 {
        let peak = b.iter().map(|z| z.norm()).fold(0.0, f64::max);
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).norm() / peak)
            .fold(0.0, f64::max)
    }

    /// mpass_rR on the host: the kernel's index and twiddle arithmetic, radix DFT by definition.
    fn stockham(x: &[Complex<f64>], radices: &[usize]) -> Vec<Complex<f64>> {
        let n = x.len();
        let tw: Vec<Complex<f64>> = (0..n)
            .map(|t| Complex::from_polar(1.0, -std::f64::consts::TAU * t as f64 / n as f64))
            .collect();
        let (mut src, mut dst) = (x.to_vec(), vec![Complex::new(0.0, 0.0); n]);
        let mut ns = 1;
        for &r in radices {
            let q = n / r;
            for j in 0..q {
                let k = j % ns;
                let v: Vec<Complex<f64>> = (0..r)
                    .map(|i| {
                        src[j + i * q]
                            * if ns > 1 {
                                tw[i * k * (q / ns)]
                            } else {
                                1.0.into()
                            }
                    })
                    .collect();
                let d = (j - k) * r + k;
                for (i, y) in dft(&v).into_iter().enumerate() {
                    dst[d + i * ns] = y;
                }
            }
            ns *= r;
            std::mem::swap(&mut src, &mut dst);
        }
        src
    }

    #[test]
    fn radices_cover_2_3_5_7_only() {
        assert_eq!(radices(44100), Some(vec![4, 3, 3, 5, 5, 7, 7]));
        assert_eq!(radices(48000), Some(vec![16, 8, 3, 5, 5, 5]));
        assert_eq!(radices(1024), Some(vec![16, 16, 4]));
        assert_eq!(radices(1009), None);
        assert_eq!(radices(2 * 11), None);
        for n in [3, 5, 7, 12, 480, 1000, 2400, 3000] {
            assert_eq!(radices(n).map(|r| r.iter().product::<usize>()), Some(n));
        }
    }

    #[test]
    fn mixed_passes_match_the_dft() {
        for n in [3, 6, 12, 15, 30, 60, 105, 210, 240, 1000] {
            let x = probe(n);
            let e = max_err(&stockham(&x, &radices(n).unwrap()), &dft(&x));
            assert!(e < 1e-12, "n={n}: {e:e}");
        }
    }

    #[test]
    fn bluestein_matches_the_dft() {
        for m in [11, 17, 97, 1009] {
            let x = probe(m);
            let l = bluestein_len(m);
            let c = chirp(m);
            let h = filter_spectrum(&c, l);
            let mut a = vec![Complex::new(0.0, 0.0); l];
            for j in 0..m {
                a[j] = x[j] * c[j];
            }
            let a = stockham(&a, &radices(l).unwrap());
            let d: Vec<Complex<f64>> = a.iter().zip(&h).map(|(u, v)| (u * v).conj()).collect();
            let e = stockham(&d, &radices(l).unwrap());
            let got: Vec<Complex<f64>> = (0..m).map(|k| c[k] * e[k].conj()).collect();
            let err = max_err(&got, &dft(&x));
            assert!(err < 1e-12, "m={m}: {err:e}");
        }
    }

    #[test]
    fn the_chirp_phase_is_exact_for_large_indices() {
        let m = 65521;
        let c = chirp(m);
        // j = m - 1: j² ≡ m + 1 (mod 2m) when m is odd, so c = -exp(-iπ/m)
        let want = -Complex::from_polar(1.0, -std::f64::consts::PI / m as f64);
        assert!((c[m - 1] - want).norm() < 1e-15);
    }
}
