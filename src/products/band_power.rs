//! A band's power from a spectrum's bins (issue 27's `--alert band=`): 10·log10 of the sum over
//! the band's bins of their `density`-scale values times the bin width (fs/n), so a full-scale
//! sine in the band reads −3.01 dB whatever the window. A bin's value in any power-domain scale
//! becomes its share by a factor f_k: |X|² times c/(n·Σw²) (c = 2 for the one-sided bins of real
//! input, 1 for DC, Nyquist and complex input), `spectrum` times (Σw)²/(n·Σw²), `density` times
//! fs/n; calibrated measurement rows: 1 / the window's equivalent noise bandwidth in bins.
//! `alerts::level` reads levels with them; with `--bands` a rule's band is summed as one more
//! band of the band matrix (`band_bins`, `columns::ColumnPlan::add_alert_bands`).

use crate::fft::Scale;
use crate::types::{InputKind, StreamMeta};
use crate::window::WindowKind;

/// The bin factor f_k (module comment) for frames of `n` samples.
pub(crate) struct BinFactors {
    pub n: usize,
    /// Σw and Σw² of the window.
    pub sum: f64,
    pub sum_sq: f64,
    /// Measurement rows: the window's equivalent noise bandwidth in bins.
    pub enbw: Option<f64>,
    /// The scale of the values the factors apply to (a power-domain one: `Power` for |X|²).
    pub scale: Scale,
}

impl BinFactors {
    /// f_k of bin `k` of `stream`'s spectra.
    pub(crate) fn of(&self, stream: &StreamMeta, k: usize) -> f64 {
        let n = self.n;
        if let Some(enbw) = self.enbw {
            return 1.0 / enbw;
        }
        let c = match stream.kind {
            InputKind::Complex => 1.0,
            InputKind::Real if k == 0 || (n % 2 == 0 && k == n / 2) => 1.0,
            InputKind::Real => 2.0,
        };
        match self.scale {
            Scale::Density => stream.rate / n as f64,
            Scale::Spectrum => self.sum * self.sum / (n as f64 * self.sum_sq),
            _ => c / (n as f64 * self.sum_sq),
        }
    }
}

/// The band `(lo, hi)` (Hz) as weights on `meta`'s full spectrum of `n`-sample frames in the
/// engine's power-domain `scale` (power, spectrum or density), which a band matrix sums into
/// the band's power: the first bin and a factor per bin from it (none when no bin lies in the
/// band).
pub(crate) fn band_bins(
    meta: &StreamMeta,
    n: usize,
    (lo, hi): (f64, f64),
    (scale, window): (Scale, WindowKind),
) -> (usize, Vec<f64>) {
    let w = window.coefficients(n);
    let factors = BinFactors {
        n,
        sum: w.iter().sum(),
        sum_sq: w.iter().map(|v| v * v).sum(),
        enbw: None,
        scale,
    };
    let inside: Vec<usize> = (meta.frequencies(n).iter().enumerate())
        .filter(|(_, f)| **f >= lo && **f <= hi)
        .map(|(k, _)| k)
        .collect();
    match (inside.first(), inside.last()) {
        // real spectra (the only ones --bands takes) rise with the bin: the band is one run
        (Some(&first), Some(&last)) => {
            (first, (first..=last).map(|k| factors.of(meta, k)).collect())
        }
        _ => (0, Vec::new()),
    }
}
