//! Band rows on the CPU: a band matrix in the form engines take it (`BandWeights`, built by
//! `products::bands::BandMatrix`), the sums of one spectrum's bins into its bands in f64, and the
//! scale each band power is written in (`RowFinish`). Bands are summed a chunk at a time into
//! f64 powers on the stack, then finished together (`decibels`: vector code for dB).
//!
//! Takes: rows of |X|² (a spectrum per row). Gives: rows of band values.

use super::{decibels, scale};
use crate::types::Sample;

/// A band matrix in the form engines use (built by `products::bands::BandMatrix`, which defines
/// the bands): band b is the sum over i < len[b] of weights[offset[b] + i] × bin first[b] + i.
#[derive(Clone, Debug, PartialEq)]
pub struct BandWeights {
    /// Bins per spectrum.
    pub bins: usize,
    pub first: Vec<u32>,
    pub len: Vec<u32>,
    pub offset: Vec<u32>,
    pub weights: Vec<f64>,
    /// Tells matrices apart for device caches (unique per matrix built in this process).
    pub id: u64,
    /// The output scale applied to each band power (`AsIs` when averaging follows), where the
    /// bands are summed: on a device, only finished rows cross back.
    pub finish: RowFinish,
    /// What a band sum is multiplied by, in f64, before `finish` (`Scale::power_unit`), to make
    /// it a power: the unit of the engine's `ScaledPower`; 1 when averaging follows (the
    /// averaging stage's finish multiplies the unit back) or the spectra are powers themselves.
    pub unit: f64,
}

/// How a power value becomes the value written: as it is, its square root (`magnitude`) or
/// 10·log10 of it floored at `DB_FLOOR_MAGNITUDE`² (`db`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowFinish {
    #[default]
    AsIs = 0,
    SquareRoot = 1,
    Decibels = 2,
}

impl RowFinish {
    /// The smallest power `Decibels` takes the log of.
    pub(crate) const DB_FLOOR_POWER: f64 = scale::DB_FLOOR_MAGNITUDE * scale::DB_FLOOR_MAGNITUDE;

    /// Applies the scale to `power`.
    pub fn apply(self, power: f64) -> f64 {
        match self {
            RowFinish::AsIs => power,
            RowFinish::SquareRoot => power.sqrt(),
            RowFinish::Decibels => decibels::ten_log10_floored(power, Self::DB_FLOOR_POWER),
        }
    }

    /// `apply` to each of `powers`, written as `T` into `out` (of the same length).
    pub(crate) fn apply_into<T: Sample>(self, powers: &[f64], out: &mut [T]) {
        match self {
            RowFinish::Decibels => decibels::powers_to_db_into(powers, Self::DB_FLOOR_POWER, out),
            _ => out
                .iter_mut()
                .zip(powers)
                .for_each(|(o, p)| *o = T::of_f64(self.apply(*p))),
        }
    }
}

/// Bands summed before their finish is applied to all of them (`BandWeights::apply`).
const BANDS_PER_CHUNK: usize = 64;

impl BandWeights {
    pub fn bands(&self) -> usize {
        self.first.len()
    }

    /// One spectrum's band powers (`spectrum`: `bins` values; `out`: `bands()`), summed in f64.
    pub fn apply<T: Sample>(&self, spectrum: &[T], out: &mut [T]) {
        match spectrum.is_empty() {
            true => self.bands_of(spectrum, out, lane_sums),
            false => self.apply_rows_of(spectrum.len(), spectrum, out),
        }
    }

    /// `apply` for spectra back to back in `spectra`, rows back to back in `out`.
    pub(crate) fn apply_rows<T: Sample>(&self, spectra: &[T], out: &mut [T]) {
        self.apply_rows_of(self.bins.max(1), spectra, out);
    }

    /// `apply` to each `per_spectrum` values of `spectra` in turn, with 256-bit vectors where
    /// the CPU has AVX2 (the same sums in the same order: the same bits either way).
    fn apply_rows_of<T: Sample>(&self, per_spectrum: usize, spectra: &[T], out: &mut [T]) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { self.apply_rows_avx2(per_spectrum, spectra, out) };
                return;
            }
        }
        self.apply_rows_each(per_spectrum, spectra, out, lane_sums);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn apply_rows_avx2<T: Sample>(&self, per_spectrum: usize, spectra: &[T], out: &mut [T]) {
        // SAFETY: this function runs only where the CPU has AVX2 (`apply_rows_of`).
        let lanes = |weights: &[f64], values: &[T]| unsafe { lane_sums_avx2(weights, values) };
        self.apply_rows_each(per_spectrum, spectra, out, lanes);
    }

    #[inline(always)]
    fn apply_rows_each<T: Sample>(
        &self,
        per_spectrum: usize,
        spectra: &[T],
        out: &mut [T],
        lanes: impl Fn(&[f64], &[T]) -> [f64; 4] + Copy,
    ) {
        let rows = out.chunks_mut(self.bands().max(1));
        for (spectrum, row) in spectra.chunks(per_spectrum).zip(rows) {
            self.bands_of(spectrum, row, lanes);
        }
    }

    /// One row: the bands a chunk at a time, summed into f64 powers, then finished together.
    #[inline(always)]
    fn bands_of<T: Sample>(
        &self,
        spectrum: &[T],
        out: &mut [T],
        lanes: impl Fn(&[f64], &[T]) -> [f64; 4] + Copy,
    ) {
        let mut powers = [0.0f64; BANDS_PER_CHUNK];
        let bands = out.len().min(self.bands());
        for (chunk, out) in out[..bands].chunks_mut(BANDS_PER_CHUNK).enumerate() {
            let first_band = chunk * BANDS_PER_CHUNK;
            let powers = &mut powers[..out.len()];
            let spans = (self.first[first_band..].iter())
                .zip(&self.len[first_band..])
                .zip(&self.offset[first_band..]);
            for (((&first, &len), &at), power) in spans.zip(powers.iter_mut()) {
                let (first, len, at) = (first as usize, len as usize, at as usize);
                let bins = spectrum.get(first..first + len).unwrap_or(&[]);
                *power = dot(&self.weights[at..at + len], bins, lanes);
            }
            if self.unit != 1.0 {
                powers.iter_mut().for_each(|p| *p *= self.unit);
            }
            self.finish.apply_into(powers, out);
        }
    }
}

/// Σ weights[i]·values[i] in f64: four sums, value i into sum i mod 4 (`lanes`, so the
/// additions overlap instead of waiting on each other), added pairwise, then the last values'.
#[inline(always)]
fn dot<T: Sample>(weights: &[f64], values: &[T], lanes: impl Fn(&[f64], &[T]) -> [f64; 4]) -> f64 {
    let sums = lanes(weights, values);
    let (w_rest, v_rest) = (
        weights.chunks_exact(4).remainder(),
        values.chunks_exact(4).remainder(),
    );
    let rest: f64 = w_rest
        .iter()
        .zip(v_rest)
        .map(|(w, v)| w * v.into_f64())
        .sum();
    (sums[0] + sums[1]) + (sums[2] + sums[3]) + rest
}

/// `dot`'s four sums over the whole groups of four.
#[inline(always)]
fn lane_sums<T: Sample>(weights: &[f64], values: &[T]) -> [f64; 4] {
    let mut sums = [0.0f64; 4];
    for (w, v) in weights.chunks_exact(4).zip(values.chunks_exact(4)) {
        for k in 0..4 {
            sums[k] += w[k] * v[k].into_f64();
        }
    }
    sums
}

/// `lane_sums` as one 256-bit vector: the same products and additions, lane by lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn lane_sums_avx2<T: Sample>(weights: &[f64], values: &[T]) -> [f64; 4] {
    use std::arch::x86_64::*;
    let groups = weights.len().min(values.len()) / 4;
    let mut sums = _mm256_setzero_pd();
    let mut add = |at: usize, widened: __m256d| {
        // SAFETY: at + 4 <= groups·4 <= weights.len(): the four loaded values are in `weights`.
        let w = unsafe { _mm256_loadu_pd(weights.as_ptr().add(at)) };
        sums = _mm256_add_pd(sums, _mm256_mul_pd(w, widened));
    };
    if let Some(values) = T::as_f32(values) {
        for at in (0..groups * 4).step_by(4) {
            // SAFETY: at + 4 <= groups·4 <= values.len().
            add(
                at,
                _mm256_cvtps_pd(unsafe { _mm_loadu_ps(values.as_ptr().add(at)) }),
            );
        }
    } else if let Some(values) = T::as_f64(values) {
        for at in (0..groups * 4).step_by(4) {
            // SAFETY: at + 4 <= groups·4 <= values.len().
            add(at, unsafe { _mm256_loadu_pd(values.as_ptr().add(at)) });
        }
    }
    let mut out = [0.0f64; 4];
    // SAFETY: `out` holds four f64.
    unsafe { _mm256_storeu_pd(out.as_mut_ptr(), sums) };
    out
}
