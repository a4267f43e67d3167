//! The reference transform: one frame's finished output by the O(n²) definition in f64
//! (`naive_spectrum`), which the numerics tests hold both engines to.

use super::{Scale, TransformSpec};
use crate::types::InputKind;

/// Reference transform in f64 by the O(n²) definition, used by tests: returns the
/// `spec.values_out()` finished output values of one frame (window, DFT, then |X| and the scale,
/// or re, im of each bin with `Scale::Complex`).
pub fn naive_spectrum(spec: &TransformSpec, frame: &[f64]) -> Vec<f64> {
    let bins = naive_dft(spec, frame);
    if spec.scale == Scale::Complex {
        return bins.into_iter().flat_map(|(re, im)| [re, im]).collect();
    }
    let plan = spec.scale_plan();
    bins.into_iter()
        .enumerate()
        .map(|(k, (re, im))| plan.apply_f64(k, re.hypot(im)))
        .collect()
}

/// X_k as (re, im) for each of `spec.bins()` bins of the windowed frame, by the definition.
fn naive_dft(spec: &TransformSpec, frame: &[f64]) -> Vec<(f64, f64)> {
    let n = spec.n;
    let w = spec.window.coefficients(n);
    // exact twiddles: e^{-2πi m/n} for m in 0..n, indexed by (k·j) mod n
    let twiddles: Vec<(f64, f64)> = (0..n)
        .map(|m| {
            let ang = -2.0 * std::f64::consts::PI * m as f64 / n as f64;
            (ang.cos(), ang.sin())
        })
        .collect();
    let windowed: Vec<(f64, f64)> = (0..n)
        .map(|j| match spec.kind {
            InputKind::Real => (frame[j] * w[j], 0.0),
            InputKind::Complex => (frame[2 * j] * w[j], frame[2 * j + 1] * w[j]),
        })
        .collect();
    (0..spec.bins())
        .map(|k| {
            let (mut re, mut im) = (0.0f64, 0.0f64);
            let mut m = 0usize;
            for &(xr, xi) in &windowed {
                let (c, s) = twiddles[m];
                re += xr * c - xi * s;
                im += xr * s + xi * c;
                m += k;
                if m >= n {
                    m -= n;
                }
            }
            (re, im)
        })
        .collect()
}
