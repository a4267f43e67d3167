//! The level an alert rule reads: the band's power in dB, 10·log10 of the sum over the band's
//! bins of their `density`-scale values times the bin width (fs/n). A full-scale sine (of
//! amplitude 1) in the band reads 10·log10(1/2) = −3.01 dB whatever the window: by Parseval the
//! one-sided density sums to the mean square.
//!
//! Rows come in the output's scale; each bin's density is got back from it: |X|² from
//! magnitude, dB, power or complex values, then c·|X|²/(fs·Σw²) (c = 2 for the one-sided bins of
//! real input, 1 for DC, Nyquist and complex input); `spectrum` times (Σw)²/(fs·Σw²). So the
//! band power is Σ f_k·g(v_k) with a factor f_k per bin, worked out once per stream.
//! This is stateless and runs in the encode threads, in any order; `state` follows the levels
//! in each stream's order.

use super::rule::AlertRule;
use crate::fft::Scale;
use crate::types::StreamMeta;
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;

/// One rule's bins in one stream: (bin index, factor).
type Band = Vec<(usize, f64)>;

/// Every rule's band in every stream, for rows of `n`-sample frames.
pub struct BandLevels {
    scale: Scale,
    /// Per stream, per rule.
    bands: Vec<Vec<Band>>,
    rules: usize,
}

impl BandLevels {
    /// Precomputes each rule's bins and factors for every stream.
    pub fn new(
        rules: &[AlertRule],
        streams: &[StreamMeta],
        n: usize,
        scale: Scale,
        window: WindowKind,
    ) -> Self {
        let w = window.coefficients(n);
        let sum: f64 = w.iter().sum();
        let sum_sq: f64 = w.iter().map(|v| v * v).sum();
        let bands = streams
            .iter()
            .map(|stream| {
                let freqs = stream.frequencies(n);
                let fs = stream.rate;
                let factor = |k: usize| -> f64 {
                    let c = match stream.kind {
                        InputKind::Complex => 1.0,
                        InputKind::Real if k == 0 || (n % 2 == 0 && k == n / 2) => 1.0,
                        InputKind::Real => 2.0,
                    };
                    match scale {
                        Scale::Density => fs / n as f64,
                        Scale::Spectrum => sum * sum / (n as f64 * sum_sq),
                        _ => c / (n as f64 * sum_sq),
                    }
                };
                rules
                    .iter()
                    .map(|rule| {
                        let (lo, hi) = rule.band;
                        freqs
                            .iter()
                            .enumerate()
                            .filter(|(_, f)| **f >= lo && **f <= hi)
                            // real rows are never shifted: column i is bin i (complex: c = 1)
                            .map(|(i, _)| (i, factor(i)))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        BandLevels {
            scale,
            bands,
            rules: rules.len(),
        }
    }

    pub fn rules(&self) -> usize {
        self.rules
    }

    /// Appends the level in dB of every rule for a row of `stream` (values in output order).
    pub fn measure<T: Sample>(&self, stream: usize, values: &[T], out: &mut Vec<f64>) {
        let Some(bands) = self.bands.get(stream) else {
            out.extend(std::iter::repeat_n(f64::NAN, self.rules));
            return;
        };
        for band in bands {
            let power: f64 = band
                .iter()
                .map(|&(i, f)| f * self.bin_power(values, i))
                .sum();
            out.push(10.0 * power.log10());
        }
    }

    /// g(v) of bin `i`: |X|² (or the density/spectrum value itself).
    fn bin_power<T: Sample>(&self, values: &[T], i: usize) -> f64 {
        let v = |j: usize| values.get(j).map_or(f64::NAN, |x| x.into_f64());
        match self.scale {
            Scale::Magnitude => v(i).powi(2),
            Scale::Db => 10f64.powf(v(i) / 10.0),
            Scale::Power | Scale::Spectrum | Scale::Density => v(i),
            Scale::Complex => v(2 * i).powi(2) + v(2 * i + 1).powi(2),
        }
    }
}
