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
//! With `--fmin`/`--fmax` the row's columns are the bins in the range: a `band=` rule sums those
//! of its bins (its band must lie in the range: `check_band_columns`). With `--bands` the columns
//! are band powers, so each `band=` rule's band is summed from the full spectrum as one more band
//! of the band matrix (`products::band_power::band_bins`, where the bands are summed: on the host or a device), after
//! the row's columns (and its measurements: with measurement flags the band's weights are the
//! bins' gains over the ENBW, as the bands'); it is read here and taken off the row before it
//! is written (`hidden`).
//!
//! This is stateless and runs in the encode threads, in any order; `state` follows the levels
//! in each stream's order.

use super::rule::{AlertRule, Reads};
use crate::fft::Scale;
use crate::products::band_power::BinFactors;
use crate::products::measure::MeasureOptions;
use crate::types::Sample;
use crate::types::StreamMeta;
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
pub(crate) struct BandLevels {
    scale: Scale,
    /// Per stream, per rule.
    bands: Vec<Vec<Probe>>,
    rules: usize,
    /// Values at the end of each row that are the rules' bands (`--bands`), not the output's.
    hidden: usize,
}

/// `--fmin`/`--fmax`: a `band=` rule reads the row's bins, so its band must lie in the range.
pub(crate) fn check_band_columns(
    rules: &[AlertRule],
    fmin: Option<f64>,
    fmax: Option<f64>,
) -> Result<(), String> {
    let (from, to) = (
        fmin.unwrap_or(f64::NEG_INFINITY),
        fmax.unwrap_or(f64::INFINITY),
    );
    for rule in rules {
        if let Reads::Band(lo, hi) = rule.reads {
            if lo < from || hi > to {
                return Err(format!(
                    "--alert {}: band={lo}-{hi} reaches outside --fmin/--fmax ({from} to {to} Hz), whose bins are all the rows carry: narrow the band or widen the range",
                    rule.name
                ));
            }
        }
    }
    Ok(())
}

/// A `band=` rule whose band holds no bin of a stream would read nothing: refused before the
/// run writes anything, naming the stream's bins (frames of `n` samples; `columns`: the rows
/// carry only some, `--fmin`/`--fmax` or a sweep's).
pub(crate) fn check_band_bins(
    rules: &[AlertRule],
    streams: &[StreamMeta],
    n: usize,
) -> Result<(), String> {
    if n < 2 {
        return Ok(()); // (`--frame whole`: the bins are known per input only)
    }
    for rule in rules {
        let Reads::Band(lo, hi) = rule.reads else {
            continue;
        };
        for stream in streams {
            let freqs = stream.column_frequencies(n);
            let (low, high) = stream.column_span(n);
            if freqs.iter().any(|f| *f >= lo && *f <= hi) {
                warn_if_past_the_bins(rule, stream, (low, high), n);
                continue;
            }
            return Err(format!(
                "--alert {}: band={lo}-{hi} holds no bin of {} (bins every {} Hz from {low} to {high} Hz at --frame {n}): widen the band or move it",
                rule.name,
                stream.input,
                crate::types::shown(stream.rate / n as f64)
            ));
        }
    }
    Ok(())
}

/// A band that holds bins but reaches past the stream's (above Nyquist, say) reads only those:
/// said once per rule and stream, since a level read over a narrower band is easy to misread.
fn warn_if_past_the_bins(rule: &AlertRule, stream: &StreamMeta, span: (f64, f64), n: usize) {
    let Reads::Band(lo, hi) = rule.reads else {
        return;
    };
    let half_bin = stream.rate / n as f64 / 2.0;
    if lo < span.0 - half_bin || hi > span.1 + half_bin {
        let shown = crate::types::shown;
        let (low, high) = (shown(span.0), shown(span.1));
        let (from, to) = (shown(lo.max(span.0)), shown(hi.min(span.1)));
        tracing::warn!(
            "--alert {}: band={lo}-{hi} reaches past the bins of {} (from {low} to {high} Hz at --frame {n}): it reads the bins from {from} to {to} Hz",
            rule.name,
            stream.input
        );
    }
}

impl BandLevels {
    /// Precomputes each rule's probe for every stream. `bands`: the rows are `--bands` powers,
    /// followed by each `band=` rule's band (`products::band_power::band_bins`).
    pub(crate) fn new(
        rules: &[AlertRule],
        streams: &[StreamMeta],
        n: usize,
        look: (Scale, WindowKind),
        (measure, bands): (&MeasureOptions, bool),
    ) -> Self {
        let (scale, window) = look;
        let w = window.coefficients(n);
        let factors = BinFactors {
            n,
            sum: w.iter().sum(),
            sum_sq: w.iter().map(|v| v * v).sum(),
            enbw: measure
                .calibrates()
                .then(|| crate::products::measure::enbw_bins(window, n)),
            scale,
        };
        let band_rules = rules
            .iter()
            .filter(|r| matches!(r.reads, Reads::Band(..)))
            .count();
        let hidden = if bands { band_rules } else { 0 };
        let probes = streams
            .iter()
            .map(|stream| {
                let bins = stream.frequencies(n);
                // the row's columns: the bins, or those in --fmin/--fmax, or --bands' centres
                let freqs = stream.columns.as_deref().unwrap_or(&bins);
                // the values after the columns: levels (5), then peaks (hz, db pairs)
                let levels_at = freqs.len();
                let peaks_at = levels_at + 5 * usize::from(measure.levels);
                // --bands: the rules' bands follow the measurements
                let measured = 5 * usize::from(measure.levels)
                    + 2 * measure.peaks
                    + 5 * usize::from(measure.distortion);
                let mut band_at = freqs.len() + measured..;
                rules
                    .iter()
                    .map(|rule| match rule.reads {
                        // --bands: the band's power follows the columns, finished as they are
                        Reads::Band(..) if bands => {
                            Probe::Bins(vec![(band_at.next().unwrap_or(0), 1.0)])
                        }
                        Reads::Band(lo, hi) => Probe::Bins(
                            freqs
                                .iter()
                                .enumerate()
                                .filter(|(_, f)| **f >= lo && **f <= hi)
                                // column i's bin (real rows are never shifted; complex: c = 1)
                                .map(|(i, f)| {
                                    let k = bins.iter().position(|b| b == f).unwrap_or(i);
                                    (i, factors.of(stream, k))
                                })
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
            bands: probes,
            rules: rules.len(),
            hidden,
        }
    }

    /// Values at the end of each row that are the rules' own (`--bands`): taken off before the
    /// row is written.
    pub(crate) fn hidden(&self) -> usize {
        self.hidden
    }

    /// Appends the level in dB of every rule for a row of `stream` (values in output order).
    pub(crate) fn measure<T: Sample>(&self, stream: usize, values: &[T], out: &mut Vec<f64>) {
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
            Scale::Power | Scale::Spectrum | Scale::Density | Scale::ScaledPower => v(i),
            Scale::Complex => v(2 * i).powi(2) + v(2 * i + 1).powi(2),
        }
    }
}
