//! Output scales: how a bin X_k becomes the value(s) fftd writes. Conventions follow numpy/scipy
//! so users can check fftd against `np.fft.rfft(w*x)` and `scipy.signal`:
//!
//! - `magnitude`: |X_k|, unnormalised (exactly `np.abs(np.fft.rfft(w*x))`).
//! - `db`: 20·log10(max(|X_k|, 1e-12)) — the floor keeps silence at -240 dB instead of -inf
//!   (a NaN |X_k| stays NaN, an infinite one is +inf dB).
//! - `power`: |X_k|².
//! - `spectrum`: |X_k|² / (Σw)², one-sided for real input (all bins but DC and Nyquist doubled),
//!   as scipy's `scaling='spectrum'`.
//! - `density`: |X_k|² / (fs · Σw²), one-sided likewise, as scipy's `scaling='density'`.
//! - `complex`: re and im of X_k, unnormalised (exactly `np.fft.rfft(w*x)` / `np.fft.fft(w*x)`):
//!   two values per bin, interleaved (`TransformSpec::values_out`).

use super::TransformSpec;

use crate::types::{InputKind, Sample};
use serde::Deserialize;
use std::fmt;

/// Floor applied to |X| before taking dB: 1e-12, i.e. -240 dB.
pub(crate) const DB_FLOOR_MAGNITUDE: f64 = 1e-12;

/// `v` raised to `floor` when below it. NaN stays NaN: `max` would give the floor, writing a bin
/// that is not a number as -240 dB.
#[inline]
pub(crate) fn floored<T: PartialOrd>(v: T, floor: T) -> T {
    if v < floor {
        floor
    } else {
        v
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// |X|, unnormalised, as np.abs(np.fft.rfft(w*x)).
    Magnitude,
    /// 20·log10(|X|), floored at -240 dB.
    Db,
    /// |X|².
    Power,
    /// One-sided |X|²/(Σw)², as scipy scaling='spectrum'.
    Spectrum,
    /// One-sided |X|²/(fs·Σw²), as scipy scaling='density'.
    Density,
    /// re, im of each bin, unnormalised, as np.fft.rfft(w*x) / np.fft.fft(w*x).
    Complex,
    /// Not a user's scale: |X|² over the frame's power unit (`Scale::power_unit`), what the
    /// power-domain products (`--bands`, `--average`) sum for magnitude and dB output.
    /// |X| can exceed a sample by the frame length, so |X|² overflows f32 from samples near
    /// 1e15 on; over the unit it stays in range while the samples' own squares do. The products
    /// multiply the unit back in f64 as they finish (`products::Finish`).
    #[value(skip)]
    #[serde(skip)]
    ScaledPower,
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Magnitude => "magnitude",
            Scale::Db => "db",
            Scale::Power => "power",
            Scale::Spectrum => "spectrum",
            Scale::Density => "density",
            Scale::Complex => "complex",
            Scale::ScaledPower => "scaled power",
        }
    }

    /// What a value of this scale is multiplied by to give its power: 4^e for `ScaledPower`,
    /// 2^e the largest power of two not above `n` nor 2^23, 1 for the others. A power of two,
    /// so the scaling is exact. |X| is at most the frame length times the largest sample, so
    /// over 4^e a power fits f32 while that sample's square does; at the other end, a power
    /// below f32's smallest normal number in this unit (which a device may flush to 0) is below
    /// the dB floor (1e-24) while e is at most 23. Tiny magnitudes pay for it: a magnitude
    /// product in f32 holds |X| from about 1.1e-19·2^e up, below which a device may write 0
    /// (`--precision f64` holds them all; dB floors them at -240 dB anyway).
    pub(crate) fn power_unit(self, n: usize) -> f64 {
        match self {
            Scale::ScaledPower => {
                let e = n.max(1).ilog2().min(23);
                4f64.powi(e as i32)
            }
            _ => 1.0,
        }
    }

    /// Output values per bin: 2 (re, im) for `complex`, 1 for every other scale.
    pub fn values_per_bin(self) -> usize {
        match self {
            Scale::Complex => 2,
            _ => 1,
        }
    }

    pub const ALL: [Scale; 6] = [
        Scale::Magnitude,
        Scale::Db,
        Scale::Power,
        Scale::Spectrum,
        Scale::Density,
        Scale::Complex,
    ];
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the final pass does to X, reduced to a few numbers an engine (or a kernel) can use:
/// `out = mode(|X|) * norm * (edge ? 1 : interior_factor)`, or (mode `Complex`) X's re and im.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ScalePlan {
    pub mode: ScaleMode,
    /// Multiplier applied after squaring (power modes) — 1 for magnitude, dB and complex.
    pub norm: f64,
    /// Factor for bins other than DC and Nyquist: 2 for one-sided spectrum/density, else 1.
    pub interior_factor: f64,
    /// Index of the Nyquist bin when it is an edge bin (real input, even n).
    pub nyquist_bin: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScaleMode {
    Magnitude,
    Power,
    Db,
    /// X itself: re, im per bin.
    Complex,
}

impl ScalePlan {
    pub(crate) fn new(spec: &TransformSpec) -> Self {
        let w = spec.window.coefficients(spec.n);
        let sum: f64 = w.iter().sum();
        let sum_sq: f64 = w.iter().map(|v| v * v).sum();
        Self::with_window_sums(spec, sum, sum_sq)
    }

    /// As `new`, from the window's Σw and Σw² when the caller already has them.
    pub(crate) fn with_window_sums(spec: &TransformSpec, sum: f64, sum_sq: f64) -> Self {
        let one_sided = spec.kind == InputKind::Real;
        let nyquist_bin = (one_sided && spec.n % 2 == 0).then_some(spec.n / 2);
        let (mode, norm, interior_factor) = match spec.scale {
            Scale::Magnitude => (ScaleMode::Magnitude, 1.0, 1.0),
            Scale::Db => (ScaleMode::Db, 1.0, 1.0),
            Scale::Power => (ScaleMode::Power, 1.0, 1.0),
            Scale::ScaledPower => (ScaleMode::Power, 1.0 / spec.scale.power_unit(spec.n), 1.0),
            Scale::Spectrum => (
                ScaleMode::Power,
                1.0 / (sum * sum),
                if one_sided { 2.0 } else { 1.0 },
            ),
            Scale::Density => (
                ScaleMode::Power,
                1.0 / (spec.rate * sum_sq),
                if one_sided { 2.0 } else { 1.0 },
            ),
            Scale::Complex => (ScaleMode::Complex, 1.0, 1.0),
        };
        ScalePlan {
            mode,
            norm,
            interior_factor,
            nyquist_bin,
        }
    }

    /// The multiplier for bin `k` (after squaring in power modes).
    #[inline]
    pub(crate) fn factor(&self, k: usize) -> f64 {
        if k == 0 || Some(k) == self.nyquist_bin {
            self.norm
        } else {
            self.norm * self.interior_factor
        }
    }

    /// The output value of bin `k` from its magnitude, in f64 (for `Complex`, which has two
    /// values per bin, the magnitude).
    pub(crate) fn apply_f64(&self, k: usize, magnitude: f64) -> f64 {
        match self.mode {
            ScaleMode::Magnitude | ScaleMode::Complex => magnitude,
            ScaleMode::Db => 20.0 * floored(magnitude, DB_FLOOR_MAGNITUDE).log10(),
            ScaleMode::Power => magnitude * magnitude * self.factor(k),
        }
    }

    /// Writes the output row from the complex spectrum. `Complex`: re, im of each bin (`row` holds
    /// two values per bin). Else |X|² first (a deinterleaving pass), then the scale in place. Two
    /// simple passes beat one fused pass here: the in-place pass is contiguous, so its square
    /// roots / logs vectorise (measured: one fused pass ran at 0.64x of raw realfft for n = 256,
    /// its square roots scalar).
    #[inline]
    pub(crate) fn finish_spectrum<T: Sample>(
        &self,
        spectrum: &[num_complex::Complex<T>],
        row: &mut [T],
    ) {
        if self.mode == ScaleMode::Complex {
            for (dst, z) in row.chunks_exact_mut(2).zip(spectrum) {
                dst[0] = z.re;
                dst[1] = z.im;
            }
            return;
        }
        // (an |X|² of +inf, or below the smallest normal number, is noted in the same pass: two
        // compares and an or, vectorised)
        let mut out_of_range = false;
        let tiny = T::min_positive_value();
        for (dst, z) in row.iter_mut().zip(spectrum) {
            let power = z.re * z.re + z.im * z.im;
            out_of_range |= power == T::infinity() || power < tiny;
            *dst = power;
        }
        self.finish_row(row);
        if out_of_range {
            self.refinish_out_of_range(spectrum, row);
        }
    }

    /// Bins whose |X|² overflowed `T` (|X| above ~1.8e19 in f32, ~1.3e154 in f64) or underflowed
    /// it (|X| below ~1.1e-19 in f32, ~1.5e-154 in f64: a squared part lost, or all of |X|²)
    /// though their value need not: |X| itself, its level in dB, or a power scaled by the
    /// window's sum (`spectrum`, `density`). Each is computed again from |X| = hypot(re, im) in
    /// f64; an X that is itself infinite stays infinite, and an X of 0 stays 0.
    #[cold]
    fn refinish_out_of_range<T: Sample>(
        &self,
        spectrum: &[num_complex::Complex<T>],
        row: &mut [T],
    ) {
        let tiny = T::min_positive_value();
        for (k, (dst, z)) in row.iter_mut().zip(spectrum).enumerate() {
            let power = z.re * z.re + z.im * z.im;
            let zero = z.re == T::zero() && z.im == T::zero();
            if power != T::infinity() && (power >= tiny || zero) {
                continue;
            }
            let magnitude = z.re.into_f64().hypot(z.im.into_f64());
            *dst = T::of_f64(match self.mode {
                // (|X|·√factor)², not |X|²·factor, which overflows f64 itself from ~1.3e154
                ScaleMode::Power => (magnitude * self.factor(k).sqrt()).powi(2),
                _ => self.apply_f64(k, magnitude),
            });
        }
    }

    /// Turns a row of squared magnitudes |X_k|² (`power`, modified in place) into output values.
    /// Working from |X|² avoids a square root for the power scales. Not for `Complex`, whose
    /// values are not a function of |X|² (`finish_spectrum` writes them): the row is left as is.
    #[inline]
    pub(crate) fn finish_row<T: Sample>(&self, power: &mut [T]) {
        match self.mode {
            ScaleMode::Complex => {}
            ScaleMode::Magnitude => power.iter_mut().for_each(|v| *v = v.sqrt()),
            ScaleMode::Db => {
                // 20·log10(|X|) = 10·log10(|X|²), in f64 (`decibels`)
                let floor = T::of_f64(DB_FLOOR_MAGNITUDE * DB_FLOOR_MAGNITUDE);
                super::decibels::powers_to_db(power, floor);
            }
            ScaleMode::Power => {
                let interior = T::of_f64(self.norm * self.interior_factor);
                let edge = T::of_f64(self.norm);
                let dc = power.first().copied();
                let nyquist = self.nyquist_bin.and_then(|k| power.get(k).copied());
                power.iter_mut().for_each(|v| *v = *v * interior);
                if let (Some(v), Some(x)) = (power.first_mut(), dc) {
                    *v = x * edge;
                }
                if let (Some(k), Some(x)) = (self.nyquist_bin, nyquist) {
                    power[k] = x * edge;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowKind;
    use num_complex::Complex;

    fn spec(kind: InputKind, scale: Scale) -> TransformSpec {
        TransformSpec {
            n: 8,
            kind,
            window: WindowKind::Rect,
            scale,
            rate: 1.0,
        }
    }

    #[test]
    fn scaled_power_is_power_over_an_exact_unit() {
        assert_eq!(Scale::ScaledPower.power_unit(8), 64.0);
        assert_eq!(Scale::ScaledPower.power_unit(1000), 4f64.powi(9));
        assert_eq!(Scale::ScaledPower.power_unit(1 << 26), 4f64.powi(23));
        assert_eq!(Scale::Power.power_unit(1 << 20), 1.0);
        let plan = ScalePlan::new(&spec(InputKind::Real, Scale::ScaledPower));
        assert_eq!((plan.mode, plan.norm), (ScaleMode::Power, 1.0 / 64.0));
        assert_eq!(plan.factor(1), plan.factor(0), "one unit for every bin");
        // |X| = 1e20 squares past f32; over the unit it is written
        let spectrum = [num_complex::Complex::new(1e20f32, 0.0); 5];
        let mut row = [0.0f32; 5];
        plan.finish_spectrum(&spectrum, &mut row);
        let want = (1e20f64 / 8.0).powi(2);
        assert!(
            row.iter().all(|&v| (v as f64 - want).abs() <= want * 1e-6),
            "{row:?}"
        );
    }

    #[test]
    fn complex_scale_has_two_values_per_bin() {
        for scale in Scale::ALL {
            let want = if scale == Scale::Complex { 2 } else { 1 };
            assert_eq!(scale.values_per_bin(), want, "{scale}");
            assert_eq!(spec(InputKind::Real, scale).values_out(), 5 * want);
            assert_eq!(spec(InputKind::Complex, scale).values_out(), 8 * want);
        }
    }

    #[test]
    fn complex_plan_writes_re_im_pairs_unscaled() {
        let plan = ScalePlan::new(&spec(InputKind::Real, Scale::Complex));
        assert_eq!(plan.mode, ScaleMode::Complex);
        let spectrum = [
            Complex::new(1.0f32, 0.0),
            Complex::new(-2.5, 0.25),
            Complex::new(3.0, -4.0),
        ];
        let mut row = [f32::NAN; 6];
        plan.finish_spectrum(&spectrum, &mut row);
        assert_eq!(row, [1.0, 0.0, -2.5, 0.25, 3.0, -4.0]);
        // the same spectrum as magnitudes
        let mut magnitudes = [f32::NAN; 3];
        ScalePlan::new(&spec(InputKind::Real, Scale::Magnitude))
            .finish_spectrum(&spectrum, &mut magnitudes);
        assert_eq!(magnitudes[2], 5.0);
    }

    /// Each scale's value of X = big + 0i in `T`, where big² overflows `T` (helper-34: 1e20 in
    /// f32 gave magnitude inf and dB inf); frame 8, rect window (Σw = 8, Σw² = 8).
    fn finished_big<T: Sample>(big: f64, scale: Scale) -> Vec<f64> {
        let plan = ScalePlan::new(&spec(InputKind::Real, scale));
        let spectrum = [
            Complex::new(T::of_f64(big), T::zero()),
            Complex::new(T::zero(), T::of_f64(-big)),
            Complex::new(T::of_f64(3.0), T::of_f64(4.0)),
            Complex::new(T::infinity(), T::zero()),
            Complex::new(T::nan(), T::zero()),
        ];
        let mut row = vec![T::zero(); spectrum.len()];
        plan.finish_spectrum(&spectrum, &mut row);
        row.into_iter().map(T::into_f64).collect()
    }

    #[test]
    fn magnitudes_whose_square_overflows_are_finished_from_the_magnitude() {
        for (big, f32_values) in [(1e20, true), (1e200, false)] {
            let row = |scale| match f32_values {
                true => finished_big::<f32>(big, scale),
                false => finished_big::<f64>(big, scale),
            };
            let close = |got: f64, want: f64| (got - want).abs() <= want.abs() * 1e-6;
            let m = row(Scale::Magnitude);
            assert!(close(m[0], big) && close(m[1], big), "{m:?}");
            assert_eq!(m[2], 5.0);
            assert!(m[3] == f64::INFINITY && m[4].is_nan(), "{m:?}");
            let db = row(Scale::Db);
            let want_db = 20.0 * big.log10();
            assert!(close(db[0], want_db) && close(db[1], want_db), "{db:?}");
            assert!(db[3] == f64::INFINITY && db[4].is_nan(), "{db:?}");
            // spectrum: |X|²/(Σw)², doubled off the edges; finite where (big/8)² is
            let s = row(Scale::Spectrum);
            let want_s = (big / 8.0).powi(2);
            if f32_values {
                assert!(close(s[0], want_s) && close(s[1], 2.0 * want_s), "{s:?}");
            } else {
                assert_eq!(s[0], f64::INFINITY, "(1e200/8)² is beyond f64");
            }
            // power itself overflows: its value is not finite in T
            assert_eq!(row(Scale::Power)[0], f64::INFINITY);
        }
    }
}
