//! Analysis windows, in the periodic ("DFT-even") form that `scipy.signal.get_window(name, n)` returns
//! by default (`fftbins=True`). Coefficients are computed in f64 and converted once per frame size.

use serde::Deserialize;
use std::fmt;

/// A window applied to each frame before the FFT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum WindowKind {
    /// Rectangular (no window).
    Rect,
    /// Hann: 0.5 - 0.5 cos(2πk/n).
    Hann,
    /// Hamming: 0.54 - 0.46 cos(2πk/n).
    Hamming,
    /// Blackman (scipy's classic 0.42/0.5/0.08).
    Blackman,
    /// 4-term Blackman-Harris (scipy's `blackmanharris`).
    BlackmanHarris,
    /// Flat top (scipy's `flattop`), for accurate amplitudes.
    Flattop,
}

impl WindowKind {
    /// The cosine-sum coefficients a0, a1, a2, ... : w[k] = Σ (-1)^j a_j cos(2π j k / n).
    fn cosine_terms(self) -> &'static [f64] {
        match self {
            WindowKind::Rect => &[1.0],
            WindowKind::Hann => &[0.5, 0.5],
            WindowKind::Hamming => &[0.54, 0.46],
            WindowKind::Blackman => &[0.42, 0.50, 0.08],
            WindowKind::BlackmanHarris => &[0.35875, 0.48829, 0.14128, 0.01168],
            WindowKind::Flattop => &[
                0.215_578_95,
                0.416_631_58,
                0.277_263_158,
                0.083_578_947,
                0.006_947_368,
            ],
        }
    }

    /// Half the main lobe's width in bins (the cosine terms: 1 for rect, 2 for Hann, ...).
    pub(crate) fn main_lobe_bins(self) -> usize {
        self.cosine_terms().len()
    }

    /// The periodic window of length `n`, in f64.
    pub fn coefficients(self, n: usize) -> Vec<f64> {
        let terms = self.cosine_terms();
        (0..n)
            .map(|k| {
                let phase = 2.0 * std::f64::consts::PI * k as f64 / n as f64;
                terms
                    .iter()
                    .enumerate()
                    .map(|(j, a)| {
                        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
                        sign * a * (phase * j as f64).cos()
                    })
                    .sum()
            })
            .collect()
    }

    /// The name used on the command line and in the config file.
    pub fn name(self) -> &'static str {
        match self {
            WindowKind::Rect => "rect",
            WindowKind::Hann => "hann",
            WindowKind::Hamming => "hamming",
            WindowKind::Blackman => "blackman",
            WindowKind::BlackmanHarris => "blackman-harris",
            WindowKind::Flattop => "flattop",
        }
    }

    pub const ALL: [WindowKind; 6] = [
        WindowKind::Rect,
        WindowKind::Hann,
        WindowKind::Hamming,
        WindowKind::Blackman,
        WindowKind::BlackmanHarris,
        WindowKind::Flattop,
    ];
}

impl fmt::Display for WindowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hann_is_periodic_and_matches_closed_form() {
        let w = WindowKind::Hann.coefficients(8);
        assert_eq!(w[0], 0.0);
        assert!((w[4] - 1.0).abs() < 1e-15);
        // periodic: w[k] == w[n-k]
        for k in 1..8 {
            assert!((w[k] - w[8 - k]).abs() < 1e-15);
        }
    }

    #[test]
    fn scipy_reference_values() {
        // scipy.signal.get_window('blackmanharris', 8)[3], ('flattop', 8)[4], ('blackman', 8)[2]
        let bh = WindowKind::BlackmanHarris.coefficients(8);
        assert!((bh[3] - 0.695_764_162_981_320_4).abs() < 1e-15, "{}", bh[3]);
        let bl = WindowKind::Blackman.coefficients(8);
        assert!((bl[2] - 0.34).abs() < 1e-15, "{}", bl[2]);
        let ft = WindowKind::Flattop.coefficients(8);
        assert!((ft[4] - 1.000_000_003).abs() < 1e-12, "{}", ft[4]);
        let hm = WindowKind::Hamming.coefficients(4);
        assert!((hm[0] - 0.08).abs() < 1e-15 && (hm[2] - 1.0).abs() < 1e-15);
    }
}
