//! The level an alert rule reads in each row (`rule::Reads`).
//!
//! `band=`: the band's power in dB, 10·log10 of the sum over the band's bins of their
//! `density`-scale values times the bin width (fs/n). A full-scale sine (of amplitude 1) in the
//! band reads 10·log10(1/2) = −3.01 dB whatever the window: by Parseval the one-sided density
//! sums to the mean square. Rows come in the output's scale; each bin's density is got back from
//! it: |X|² from magnitude, dB, power or complex values, then c·|X|²/(fs·Σw²) (c = 2 for the
//! one-sided bins of real input, 1 for DC, Nyquist and complex input); `spectrum` times
//! (Σw)²/(fs·Σw²). So the band power is Σ f_k·g(v_k) with a factor f_k per bin, worked out once
//! per stream.
//!
//! With measurement flags (`--calibration`, `--weighting`, `--levels`, `--peaks`,
//! `--distortion`) the bins are already calibrated, weighted power (docs/measure.md): the band's
//! level is then Σ bins / the window's equivalent noise bandwidth in bins, as `--bands` sums
//! them, in the run's unit (a full-scale sine reads C dB with `--calibration C`, 0 dBFS
//! without). `peak=` reads the strongest of the row's peaks in its range, `level=` one of the
//! row's `--levels` readings: the values after the bins.
//!
//! This is stateless and runs in the encode threads, in any order; `state` follows the levels
//! in each stream's order.

use super::rule::{AlertRule, Reads};
use crate::fft::Scale;
use crate::products::measure::MeasureOptions;
use crate::types::StreamMeta;
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;

/// What one rule reads in one stream's rows.
enum Probe {
    /// Bins: (index, factor).
    Bins(Vec<(usize, f64)>),
    /// The peaks (hz, db pairs) from this index, this many, and the range.
    Peaks {
        at: usize,
        count: usize,
        lo: f64,
        hi: f64,
    },
    /// One value at this index (a `--levels` reading).
    Value(usize),
}

/// Every rule's probe in every stream, for rows of `n`-sample frames.
pub struct BandLevels {
    scale: Scale,
    /// Per stream, per rule.
    bands: Vec<Vec<Probe>>,
    rules: usize,
}

/// The bin factor f_k of `--alert band=` (module comment).
struct Factors {
    n: usize,
    sum: f64,
    sum_sq: f64,
    /// Measurement rows: the window's equivalent noise bandwidth in bins.
    enbw: Option<f64>,
    scale: Scale,
}

impl Factors {
    fn of(&self, stream: &StreamMeta, k: usize) -> f64 {
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

impl BandLevels {
    /// Precomputes each rule's probe for every stream.
    pub fn new(
        rules: &[AlertRule],
        streams: &[StreamMeta],
        n: usize,
        look: (Scale, WindowKind),
        measure: &MeasureOptions,
    ) -> Self {
        let (scale, window) = look;
        let w = window.coefficients(n);
        let factors = Factors {
            n,
            sum: w.iter().sum(),
            sum_sq: w.iter().map(|v| v * v).sum(),
            enbw: measure
                .calibrates()
                .then(|| crate::products::measure::enbw_bins(window, n)),
            scale,
        };
        let bands = streams
            .iter()
            .map(|stream| {
                let freqs = stream.frequencies(n);
                // the values after the bins: levels (5), then peaks (hz, db pairs)
                let levels_at = freqs.len();
                let peaks_at = levels_at + 5 * usize::from(measure.levels);
                rules
                    .iter()
                    .map(|rule| match rule.reads {
                        Reads::Band(lo, hi) => Probe::Bins(
                            freqs
                                .iter()
                                .enumerate()
                                .filter(|(_, f)| **f >= lo && **f <= hi)
                                // real rows are never shifted: column i is bin i (complex: c = 1)
                                .map(|(i, _)| (i, factors.of(stream, i)))
                                .collect(),
                        ),
                        Reads::Peak(lo, hi) => Probe::Peaks {
                            at: peaks_at,
                            count: measure.peaks,
                            lo,
                            hi,
                        },
                        Reads::Level(k) => Probe::Value(levels_at + k),
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
        let v = |j: usize| values.get(j).map_or(f64::NAN, |x| x.into_f64());
        for probe in bands {
            out.push(match probe {
                Probe::Bins(band) => {
                    let power: f64 = band
                        .iter()
                        .map(|&(i, f)| f * self.bin_power(values, i))
                        .sum();
                    10.0 * power.log10()
                }
                Probe::Peaks { at, count, lo, hi } => (0..*count)
                    .filter(|k| (*lo..=*hi).contains(&v(at + 2 * k)))
                    .map(|k| v(at + 2 * k + 1))
                    .filter(|db| !db.is_nan())
                    .fold(f64::NEG_INFINITY, f64::max),
                Probe::Value(at) => v(*at),
            });
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
