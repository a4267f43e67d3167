//! Powers to decibels on the CPU: 10·log10(max(p, floor)) for whole rows, in one loop the
//! compiler turns into vector code. libm's `log10` is a call per value that no compiler can
//! vectorise; in a log-mel row (128 bands of a 2048-point frame) those calls took as long as the
//! band sums and half as long as the FFT itself.
//!
//! The logarithm is fdlibm's `log10` (Sun's, as musl carries it): the argument reduced to
//! 2^k·m with m in [√½, √2), log(m) from a degree-14 polynomial in s = (m−1)/(m+1), then
//! split into high and low parts so that log10 is within one unit in the last place of f64.
//! The reduction is written with 64-bit integer operations only (AVX2 has no i64 → f64
//! conversion), and no step fuses a multiply with an add, so every CPU, vector width or not,
//! computes the same bits. Rows narrow to f32 once, from the f64 value.
//!
//! Takes: rows of powers (|X|² or band powers), in f32 or f64. Gives: the same rows in dB.

use super::cpu_features::with_cpu_features;
use crate::types::Sample;

// fdlibm's constants for log10, as bit patterns (exact).
const IVLN10_HI: f64 = f64::from_bits(0x3fdb_cb7b_1520_0000);
const IVLN10_LO: f64 = f64::from_bits(0x3dbb_9438_ca9a_add5);
const LOG10_2_HI: f64 = f64::from_bits(0x3fd3_4413_509f_6000);
const LOG10_2_LO: f64 = f64::from_bits(0x3d59_fef3_11f1_2b36);
const LG1: f64 = f64::from_bits(0x3fe5_5555_5555_5593);
const LG2: f64 = f64::from_bits(0x3fd9_9999_9997_fa04);
const LG3: f64 = f64::from_bits(0x3fd2_4924_9422_9359);
const LG4: f64 = f64::from_bits(0x3fcc_71c5_1d8e_78af);
const LG5: f64 = f64::from_bits(0x3fc7_4664_96cb_03de);
const LG6: f64 = f64::from_bits(0x3fc3_9a09_d078_c69f);
const LG7: f64 = f64::from_bits(0x3fc2_f112_df3e_5244);
/// The high 32 bits of √½: mantissas from here up belong to the next exponent.
const SQRT_HALF_HIGH: u64 = 0x3fe6_a09e;
/// 2^52 as f64: its bits OR'd with an integer below 2^52 give 2^52 plus that integer.
const TWO_52: f64 = 4_503_599_627_370_496.0;

/// log10(x) for a positive normal finite `x`, within one ulp (other arguments give a wrong
/// value, not a fault: `ten_log10_floored` selects around them).
#[inline(always)]
fn log10_positive(x: f64) -> f64 {
    // x = 2^k · m, m in [√½, √2): moving the high word up by 1 − √½ carries into the exponent
    // exactly where m would pass √2
    let shifted = x
        .to_bits()
        .wrapping_add((0x3ff0_0000 - SQRT_HALF_HIGH) << 32);
    let k = f64::from_bits(TWO_52.to_bits() | (shifted >> 52)) - (TWO_52 + 1023.0);
    let m = f64::from_bits((shifted & 0x000f_ffff_ffff_ffff) + (SQRT_HALF_HIGH << 32));
    // log(m) = log(1 + f) = f − f²/2 + s·(f²/2 + R(s²)), s = f / (2 + f)
    let f = m - 1.0;
    let half_f2 = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let even = w * (LG2 + w * (LG4 + w * LG6));
    let odd = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = odd + even;
    // hi + lo = log(1 + f), hi with its low 32 bits clear so that hi·IVLN10_HI is exact
    let hi = f64::from_bits((f - half_f2).to_bits() & 0xffff_ffff_0000_0000);
    let lo = f - hi - half_f2 + s * (half_f2 + r);
    // log10(x) = k·log10(2) + log(1 + f)/ln(10), summed high parts last
    let value_hi = hi * IVLN10_HI;
    let y = k * LOG10_2_HI;
    let mut value_lo = k * LOG10_2_LO + (lo + hi) * IVLN10_LO + lo * IVLN10_HI;
    let sum = y + value_hi;
    value_lo += (y - sum) + value_hi;
    value_lo + sum
}

/// 10·log10(max(`power`, `floor`)) for a positive normal `floor`: NaN stays NaN and +∞ stays +∞
/// (selected, not branched on, so a loop of these stays vector code).
#[inline(always)]
pub(crate) fn ten_log10_floored(power: f64, floor: f64) -> f64 {
    let x = if power < floor { floor } else { power };
    let finite = x <= f64::MAX;
    10.0 * if finite { log10_positive(x) } else { x }
}

/// Replaces each power in `values` by 10·log10(max(power, `floor`)), computed in f64 and
/// narrowed once; `floor` is a positive normal value of `T`.
pub(crate) fn powers_to_db<T: Sample>(values: &mut [T], floor: T) {
    with_cpu_features!("avx2" ["avx2"] powers_to_db_each<T: Sample>(values: &mut [T], floor: T))
}

#[inline(always)]
fn powers_to_db_each<T: Sample>(values: &mut [T], floor: T) {
    let floor = floor.into_f64();
    for v in values.iter_mut() {
        *v = T::of_f64(ten_log10_floored(v.into_f64(), floor));
    }
}

/// `powers_to_db` from f64 powers into `out` (of the same length) as `T`.
pub(crate) fn powers_to_db_into<T: Sample>(powers: &[f64], floor: f64, out: &mut [T]) {
    with_cpu_features!("avx2" ["avx2"]
        powers_to_db_into_each<T: Sample>(powers: &[f64], floor: f64, out: &mut [T]))
}

#[inline(always)]
fn powers_to_db_into_each<T: Sample>(powers: &[f64], floor: f64, out: &mut [T]) {
    for (o, p) in out.iter_mut().zip(powers) {
        *o = T::of_f64(ten_log10_floored(*p, floor));
    }
}

#[cfg(test)]
mod tests;
