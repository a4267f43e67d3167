//! The CPU's transform of real frames of even length n: a complex FFT of n/2 (rustfft) over the
//! frame read as n/2 complex values, then the step that untangles it into the n/2+1 bins of
//! the real transform (bins k and n/2−k from one pair of the complex result and one twiddle).
//!
//! The untangling is the arithmetic of realfft's `RealToComplexEven`, operation for operation
//! (so spectra are the same bytes), in a loop over separate real and imaginary parts that the
//! compiler turns into 256-bit vector code where the CPU has AVX2. realfft's own loop runs one
//! bin pair at a time and took longer than the complex FFT it follows (2048-point frames,
//! measured with perf, session 25).
//!
//! Takes: a frame of n real values (its buffer is the FFT's scratch). Gives: n/2+1 bins.

use crate::types::Sample;
use num_complex::Complex;
use rustfft::{Fft, FftPlanner};
use std::sync::Arc;

/// The planned transform of one even size.
pub(crate) struct RealEven<T: Sample> {
    fft: Arc<dyn Fft<T>>,
    /// ½·e^(−2πik/n) for k = 1 ..= pairs, real and imaginary parts apart.
    twiddle_re: Vec<T>,
    twiddle_im: Vec<T>,
}

impl<T: Sample> RealEven<T> {
    /// The transform of `n` real values; `n` is even and at least 2.
    pub(crate) fn new(n: usize, planner: &mut FftPlanner<T>) -> Self {
        // bins k and n/2 − k for k = 1 .. the last below n/4 (n/4 itself, when whole, is the
        // centre bin, its own partner)
        let pairs = n.div_ceil(4).saturating_sub(1);
        let twiddle = |k: usize| {
            let angle = -2.0 * std::f64::consts::PI / n as f64 * k as f64;
            let half = T::of_f64(0.5);
            (T::of_f64(angle.cos()) * half, T::of_f64(angle.sin()) * half)
        };
        let (twiddle_re, twiddle_im) = (1..=pairs).map(twiddle).unzip();
        RealEven {
            fft: planner.plan_fft_forward(n / 2),
            twiddle_re,
            twiddle_im,
        }
    }

    /// Complex values of scratch `process` needs.
    pub(crate) fn scratch_len(&self) -> usize {
        self.fft.get_outofplace_scratch_len()
    }

    /// The n/2+1 bins of `frame` (n values, left as scratch) into `bins`, with `scratch` of
    /// `scratch_len()` values.
    pub(crate) fn process(
        &self,
        frame: &mut [T],
        bins: &mut [Complex<T>],
        scratch: &mut [Complex<T>],
    ) {
        let half = frame.len() / 2;
        let packed = as_complex(frame);
        self.fft
            .process_outofplace_with_scratch(packed, &mut bins[..half], scratch);
        let first = bins[0];
        bins[0] = Complex::new(first.re + first.im, T::zero());
        bins[half] = Complex::new(first.re - first.im, T::zero());
        untangle(bins, &self.twiddle_re, &self.twiddle_im);
        if half % 2 == 0 && half > 0 {
            bins[half / 2].im = -bins[half / 2].im;
        }
    }
}

/// `frame`'s values as complex values, two by two.
fn as_complex<T: Sample>(frame: &mut [T]) -> &mut [Complex<T>] {
    let len = frame.len() / 2;
    // SAFETY: `Complex<T>` is `#[repr(C)]` with two fields of `T` (re, im), so it has the size
    // and alignment of `[T; 2]`; the first 2·len values of `frame` are `len` such pairs, and the
    // returned slice borrows `frame` mutably for its whole life.
    unsafe { std::slice::from_raw_parts_mut(frame.as_mut_ptr().cast::<Complex<T>>(), len) }
}

/// Bins k and n/2 − k for k = 1 ..= pairs, from the complex FFT's values there.
fn untangle<T: Sample>(bins: &mut [Complex<T>], twiddle_re: &[T], twiddle_im: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { untangle_avx2(bins, twiddle_re, twiddle_im) };
            return;
        }
    }
    untangle_pairs(bins, twiddle_re, twiddle_im, 0);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn untangle_avx2<T: Sample>(bins: &mut [Complex<T>], twiddle_re: &[T], twiddle_im: &[T]) {
    let done = match as_f32_values(bins) {
        // SAFETY: this function runs only where the CPU has AVX2 (`untangle`).
        Some(values) => unsafe { avx2::untangle_f32(values, twiddle_re, twiddle_im) },
        None => 0,
    };
    untangle_pairs(bins, twiddle_re, twiddle_im, done);
}

/// `bins`' values, re and im in turn, when `T` is f32.
fn as_f32_values<T: Sample>(bins: &mut [Complex<T>]) -> Option<&mut [f32]> {
    let len = 2 * bins.len();
    // SAFETY: `Complex<T>` is `#[repr(C)]` with two fields of `T`, so `bins` is 2·len values
    // of `T` back to back; the slice borrows `bins` mutably for its whole life.
    let values = unsafe { std::slice::from_raw_parts_mut(bins.as_mut_ptr().cast::<T>(), len) };
    T::as_f32_mut(values)
}

/// Bins k and n/2 − k for k = `from` + 1 ..= pairs, one pair at a time in order (realfft's
/// loop: where no vector code does them, f64 and the last few f32 pairs).
#[inline(always)]
fn untangle_pairs<T: Sample>(
    bins: &mut [Complex<T>],
    twiddle_re: &[T],
    twiddle_im: &[T],
    from: usize,
) {
    let half = bins.len() - 1;
    let pairs = twiddle_re.len().min(twiddle_im.len());
    // low[k] is bin k (k <= pairs); high holds bins pairs + 1 .. half − 1, so bin half − k is
    // high[high.len() − k]
    let (low, high) = bins.split_at_mut(pairs + 1);
    let high = &mut high[..half - pairs - 1];
    let lows = low[1 + from..].iter_mut();
    let high_end = high.len() - from;
    let highs = high[..high_end].iter_mut().rev();
    let twiddles = twiddle_re[from..].iter().zip(&twiddle_im[from..]);
    for ((l, r), (&t_re, &t_im)) in lows.zip(highs).zip(twiddles) {
        (*l, *r) = untangle_one((l.re, l.im, r.re, r.im), (t_re, t_im));
    }
}

/// Bins k and n/2 − k from the complex FFT's values there (`l_re, l_im, r_re, r_im`) and the
/// twiddle ½·e^(−2πik/n): realfft's operations in realfft's order.
#[inline(always)]
fn untangle_one<T: Sample>(
    (l_re, l_im, r_re, r_im): (T, T, T, T),
    (t_re, t_im): (T, T),
) -> (Complex<T>, Complex<T>) {
    let (sum_re, sum_im) = (l_re + r_re, l_im + r_im);
    let (diff_re, diff_im) = (l_re - r_re, l_im - r_im);
    let twiddled_re = sum_im * t_re + diff_re * t_im;
    let twiddled_im = sum_im * t_im - diff_re * t_re;
    let half = T::of_f64(0.5);
    let (half_sum_re, half_diff_im) = (half * sum_re, half * diff_im);
    (
        Complex::new(half_sum_re + twiddled_re, half_diff_im + twiddled_im),
        Complex::new(half_sum_re - twiddled_re, twiddled_im - half_diff_im),
    )
}

/// f32 pairs eight at a time in 256-bit vectors.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use crate::types::Sample;
    use std::arch::x86_64::*;

    /// Untangles whole blocks of eight pairs from k = 1 (`values`: the bins' re and im in
    /// turn, f32); returns the pairs done. Each lane does `untangle_one`'s operations.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn untangle_f32<T: Sample>(
        values: &mut [f32],
        twiddle_re: &[T],
        twiddle_im: &[T],
    ) -> usize {
        let (Some(t_re), Some(t_im)) = (T::as_f32(twiddle_re), T::as_f32(twiddle_im)) else {
            return 0;
        };
        let half = values.len() / 2 - 1;
        let pairs = t_re.len().min(t_im.len());
        let blocks = pairs / 8;
        let reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
        let ptr = values.as_mut_ptr();
        for block in 0..blocks {
            let k = 1 + 8 * block;
            // bins k .. k + 7 and half − k − 7 .. half − k: inside 1 ..= pairs and
            // half − pairs ..= half − 1, apart, and inside `values` (2·(half + 1) values)
            let (low, high) = (2 * k, 2 * (half - k - 7));
            // SAFETY: each load and store covers 8 values at `low`, `low + 8`, `high`,
            // `high + 8` (bins above, all below half + 1), or `k − 1 + 8·i` of the
            // twiddles (k − 1 + 8 <= pairs).
            unsafe {
                let (l_re, l_im) = split(ptr.add(low));
                let (r_re, r_im) = split(ptr.add(high));
                let (r_re, r_im) = (
                    _mm256_permutevar8x32_ps(r_re, reverse),
                    _mm256_permutevar8x32_ps(r_im, reverse),
                );
                let tw_re = _mm256_loadu_ps(t_re.as_ptr().add(k - 1));
                let tw_im = _mm256_loadu_ps(t_im.as_ptr().add(k - 1));
                let (l, r) = untangle8(
                    (l_re, l_im, r_re, r_im),
                    (unsplit_order(tw_re), unsplit_order(tw_im)),
                );
                join(ptr.add(low), l);
                let r = (
                    _mm256_permutevar8x32_ps(r.0, reverse),
                    _mm256_permutevar8x32_ps(r.1, reverse),
                );
                join(ptr.add(high), r);
            }
        }
        8 * blocks
    }

    /// Eight complex values at `at` as (re, im) vectors, lanes in the order 0 1 4 5 2 3 6 7.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn split(at: *const f32) -> (__m256, __m256) {
        // SAFETY: the caller guarantees 16 readable values at `at`.
        let (a, b) = unsafe { (_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(8))) };
        (
            _mm256_shuffle_ps::<0b10_00_10_00>(a, b),
            _mm256_shuffle_ps::<0b11_01_11_01>(a, b),
        )
    }

    /// Eight values in order as lanes in `split`'s order (0 1 4 5 2 3 6 7).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn unsplit_order(v: __m256) -> __m256 {
        _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7))
    }

    /// `split`'s inverse: (re, im) vectors back to eight complex values at `at`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn join(at: *mut f32, (re, im): (__m256, __m256)) {
        let (a, b) = (_mm256_unpacklo_ps(re, im), _mm256_unpackhi_ps(re, im));
        // SAFETY: the caller guarantees 16 writable values at `at`.
        unsafe {
            _mm256_storeu_ps(at, a);
            _mm256_storeu_ps(at.add(8), b);
        }
    }

    /// `untangle_one` on eight lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn untangle8(
        (l_re, l_im, r_re, r_im): (__m256, __m256, __m256, __m256),
        (t_re, t_im): (__m256, __m256),
    ) -> ((__m256, __m256), (__m256, __m256)) {
        let (sum_re, sum_im) = (_mm256_add_ps(l_re, r_re), _mm256_add_ps(l_im, r_im));
        let (diff_re, diff_im) = (_mm256_sub_ps(l_re, r_re), _mm256_sub_ps(l_im, r_im));
        let mul = _mm256_mul_ps;
        let twiddled_re = _mm256_add_ps(mul(sum_im, t_re), mul(diff_re, t_im));
        let twiddled_im = _mm256_sub_ps(mul(sum_im, t_im), mul(diff_re, t_re));
        let half = _mm256_set1_ps(0.5);
        let (half_sum_re, half_diff_im) = (mul(half, sum_re), mul(half, diff_im));
        (
            (
                _mm256_add_ps(half_sum_re, twiddled_re),
                _mm256_add_ps(half_diff_im, twiddled_im),
            ),
            (
                _mm256_sub_ps(half_sum_re, twiddled_re),
                _mm256_sub_ps(twiddled_im, half_diff_im),
            ),
        )
    }
}

#[cfg(test)]
mod tests;
