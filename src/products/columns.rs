//! Per-frame columns: what a row carries of a frame's spectrum — `--bands` (band powers, from
//! `bands::BandMatrix`), or the bins after `--fftshift` (complex input: DC in the centre) and
//! `--fmin`/`--fmax` (the bins whose frequency lies in [fmin, fmax], inclusive). Stateless, so
//! the FFT workers run it in parallel. With measurements (`measure`) each bin's power is
//! multiplied by its gain, folded into band weights (with `--bands`; without, a one-bin band per
//! picked bin), and with `--levels` the frame's total follows the columns (a band of every bin):
//! so an engine that sums bands (an OpenCL device) does the whole per-frame part where the
//! spectra are.

use super::bands::BandMatrix;
use super::ProductOptions;
use crate::fft::BandWeights;
use crate::types::shown;
use crate::types::Sample;
use crate::types::StreamMeta;
use std::ops::Range;

/// How one stream's frames of `n` samples become rows.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ColumnPlan {
    /// Values in a frame's spectrum (bins).
    bins: usize,
    /// Rotation to the left applied before picking (fftshift), in bins.
    shift: usize,
    /// Runs of bins (after the rotation) that the row carries, in order.
    picks: Vec<Range<usize>>,
    /// Frequency in Hz of each column (band centres with `--bands`).
    frequencies: Vec<f64>,
    /// Band powers instead of picked bins.
    bands: Option<BandWeights>,
    /// Values per bin: 2 for `--scale complex` (re, im), else 1.
    per_bin: usize,
    /// Values after the columns (the level total; the alert rules' bands).
    extra: usize,
}

impl ColumnPlan {
    /// The plan for `meta`'s frames of `n` samples; an error when the range holds no bin.
    /// `per_bin`: values per bin (2 for complex output).
    pub(crate) fn new(
        meta: &StreamMeta,
        (n, window): (usize, crate::window::WindowKind),
        options: &ProductOptions,
        per_bin: usize,
    ) -> Result<Self, String> {
        let mut plan = match &options.bands {
            Some(spec) => Self::band_powers(meta, n, spec),
            None => Self::picked_bins(meta, n, options),
        }?;
        plan.per_bin = per_bin.max(1);
        if options.measure.is_active() {
            if meta.kind == crate::types::InputKind::Complex {
                return Err(format!(
                    "{}: {} is complex (I/Q) input; measurements are defined on real signals",
                    options.measure.given(),
                    meta.input
                ));
            }
            if options.measure.calibrates() {
                let gains = options.measure.bin_gains(&meta.frequencies(n), n, window);
                plan.apply_gains(gains);
            }
        }
        Ok(plan)
    }

    /// issue 27: with `--bands`, each `--alert band=` rule's band (`band_power::band_bins`)
    /// as one more band after the columns (and the level total), summed where the bands are.
    /// With measurements (`gains`) a band's weights are its bins' gains over the ENBW, as the
    /// bands' own: its calibrated, weighted power.
    pub(crate) fn add_alert_bands(
        &mut self,
        meta: &StreamMeta,
        n: usize,
        alert_bands: &[(f64, f64)],
        (engine, gains): (
            (crate::fft::Scale, crate::window::WindowKind),
            Option<&super::measure::BinGains>,
        ),
    ) {
        let Some(weights) = self.bands.as_mut() else {
            return;
        };
        for &band in alert_bands {
            let (first, mut factors) = super::band_power::band_bins(meta, n, band, engine);
            if let Some(gains) = gains {
                for (k, f) in factors.iter_mut().enumerate() {
                    *f = gains.column.get(first + k).copied().unwrap_or(0.0) / gains.enbw;
                }
            }
            weights.first.push(first as u32);
            weights.len.push(factors.len() as u32);
            weights.offset.push(weights.weights.len() as u32);
            weights.weights.extend_from_slice(&factors);
            self.extra += 1;
        }
    }

    /// Takes measurement gains in: folded into the band weights, or the picked bins made one-bin
    /// bands of their gains (`gain_bands`); with `--levels`, a band of all bins for the total.
    fn apply_gains(&mut self, gains: super::measure::BinGains) {
        self.extra = usize::from(gains.level.is_some());
        let Some(weights) = self.bands.as_mut() else {
            self.bands = Some(self.gain_bands(gains));
            return;
        };
        for b in 0..weights.bands() {
            let (first, len, at) = (
                weights.first[b] as usize,
                weights.len[b] as usize,
                weights.offset[b] as usize,
            );
            for i in 0..len {
                let gain = gains.column.get(first + i).copied().unwrap_or(0.0);
                weights.weights[at + i] *= gain / gains.enbw;
            }
        }
        if let Some(level) = gains.level {
            weights.first.push(0);
            weights.len.push(level.len() as u32);
            weights.offset.push(weights.weights.len() as u32);
            weights.weights.extend_from_slice(&level);
        }
    }

    /// The picked bins with their gains as a band matrix, so an engine that sums bands (an
    /// OpenCL device) applies the weighting and calibration and sums the level total where the
    /// spectra are: a one-bin band per picked bin (weight: its gain), then, with `--levels`, a
    /// band of every bin weighted by the total's weights. The same numbers as picking the bins
    /// and multiplying (`BandWeights::apply` sums in f64 on the host).
    fn gain_bands(&self, gains: super::measure::BinGains) -> BandWeights {
        let picked: Vec<usize> = self
            .picks
            .iter()
            .flat_map(|run| run.clone().map(|i| (i + self.shift) % self.bins))
            .collect();
        let mut weights = BandWeights {
            bins: self.bins,
            first: Vec::with_capacity(picked.len() + 1),
            len: Vec::with_capacity(picked.len() + 1),
            offset: Vec::with_capacity(picked.len() + 1),
            weights: Vec::with_capacity(picked.len() + self.bins),
            id: crate::products::bands::next_matrix_id(),
            finish: crate::fft::RowFinish::AsIs,
            unit: 1.0,
        };
        let mut push = |first: usize, w: &[f64]| {
            weights.first.push(first as u32);
            weights.len.push(w.len() as u32);
            weights.offset.push(weights.weights.len() as u32);
            weights.weights.extend_from_slice(w);
        };
        for &j in &picked {
            push(j, &[gains.column.get(j).copied().unwrap_or(0.0)]);
        }
        if let Some(level) = &gains.level {
            push(0, &level[..level.len().min(self.bins)]);
        }
        weights
    }

    fn band_powers(
        meta: &StreamMeta,
        n: usize,
        spec: &super::bands::BandSpec,
    ) -> Result<Self, String> {
        if meta.kind == crate::types::InputKind::Complex {
            return Err(format!(
                "--bands {spec}: {} is complex (I/Q) input; bands are defined on real signals' spectra",
                meta.input
            ));
        }
        let matrix = BandMatrix::new(spec, n, meta.rate)?;
        let empty = matrix.empty_bands();
        if !empty.is_empty() {
            tracing::warn!(
                "--bands {spec}: {} of {} bands are narrower than a bin of frame {n} and stay 0 (bands {:?}); use fewer bands or a longer frame",
                empty.len(),
                matrix.bands(),
                empty
            );
        }
        Ok(ColumnPlan {
            bins: matrix.bins(),
            shift: 0,
            picks: Vec::new(),
            frequencies: matrix.centres_hz().to_vec(),
            bands: Some(matrix.weights()),
            per_bin: 1,
            extra: 0,
        })
    }

    fn picked_bins(meta: &StreamMeta, n: usize, options: &ProductOptions) -> Result<Self, String> {
        let all = meta.frequencies(n);
        let bins = all.len();
        let shift = if meta.fftshift && meta.kind == crate::types::InputKind::Complex {
            bins.div_ceil(2)
        } else {
            0
        };
        let (lo, hi) = (
            options.fmin.unwrap_or(f64::NEG_INFINITY),
            options.fmax.unwrap_or(f64::INFINITY),
        );
        let mut picks: Vec<Range<usize>> = Vec::new();
        for (i, f) in all.iter().enumerate() {
            if !(lo..=hi).contains(f) {
                continue;
            }
            match picks.last_mut() {
                Some(run) if run.end == i => run.end = i + 1,
                _ => picks.push(i..i + 1),
            }
        }
        if picks.is_empty() {
            return Err(format!(
                "--fmin/--fmax: no frequency bin of {} lies in [{}, {}] Hz (frame {n} at {} Hz: bins {} Hz apart, from {} to {} Hz)",
                meta.input,
                shown(lo),
                shown(hi),
                shown(meta.rate),
                shown(meta.rate / n as f64),
                shown(all.iter().copied().fold(f64::INFINITY, f64::min)),
                shown(all.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            ));
        }
        let frequencies = picks.iter().flat_map(|r| all[r.clone()].to_vec()).collect();
        Ok(ColumnPlan {
            bins,
            shift,
            picks,
            frequencies,
            bands: None,
            per_bin: 1,
            extra: 0,
        })
    }

    /// Whether this plan's column frequencies are those `meta`'s rows would get (the same
    /// centre frequency: `--center-freq`, SigMF).
    pub(crate) fn suits(&self, meta: &StreamMeta, n: usize) -> bool {
        self.picks.is_empty() || {
            let all = meta.frequencies(n);
            let mine = self
                .picks
                .iter()
                .flat_map(|r| all[r.clone()].iter().copied());
            mine.eq(self.frequencies.iter().copied())
        }
    }

    /// Values per row.
    pub(crate) fn columns(&self) -> usize {
        self.frequencies.len()
    }

    /// Frequency in Hz of each column.
    pub(crate) fn frequencies(&self) -> &[f64] {
        &self.frequencies
    }

    /// Band rows leave the engine in `finish`'s scale (see `Shaping::new`).
    pub(crate) fn set_band_finish(&mut self, finish: super::Finish) {
        if let Some(b) = self.bands.as_mut() {
            (b.finish, b.unit) = (finish.how, finish.unit);
        }
    }

    /// The band matrix, when rows are band powers (an engine can sum them itself).
    pub(crate) fn band_weights(&self) -> Option<&BandWeights> {
        self.bands.as_ref()
    }

    /// Values per row: the columns', then the level total's.
    pub(crate) fn width(&self) -> usize {
        self.columns() * self.per_bin + self.extra
    }

    /// Values after the columns (the level total with `--levels`; `--alert` rules' bands).
    pub(crate) fn extra(&self) -> usize {
        self.extra
    }

    /// Whether a row is its frame's spectrum as it is: every bin in order, nothing after.
    pub(crate) fn keeps_spectrum(&self) -> bool {
        let every_bin = self.picks.len() == 1 && self.picks[0] == (0..self.bins);
        every_bin && self.bands.is_none() && self.shift == 0 && self.extra == 0
    }

    /// Writes one frame's row (`spectrum`: its `bins` × values per bin) into `row` (`width`
    /// values): each run of bins copied whole (in two pieces where the rotation wraps it).
    pub(crate) fn pick<T: Sample>(&self, spectrum: &[T], row: &mut [T]) {
        if let Some(weights) = &self.bands {
            weights.apply(spectrum, row);
            return;
        }
        let (per_bin, bins) = (self.per_bin, self.bins.max(1));
        let mut at = 0;
        for run in &self.picks {
            let (mut from, mut left) = ((run.start + self.shift) % bins, run.len());
            while left > 0 {
                let take = left.min(bins - from);
                let piece = take * per_bin;
                let source = spectrum.get(from * per_bin..(from + take) * per_bin);
                if let (Some(o), Some(v)) = (row.get_mut(at..at + piece), source) {
                    o.copy_from_slice(v);
                }
                (at, left, from) = (at + piece, left - take, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::InputKind;

    fn meta(kind: InputKind, fftshift: bool) -> StreamMeta {
        StreamMeta {
            id: 0,
            input: "x".into(),
            channel: None,
            rate: 8000.0,
            kind,
            fftshift,
            columns: None,
            tuning: None,
        }
    }

    fn options(fmin: Option<f64>, fmax: Option<f64>) -> ProductOptions {
        ProductOptions {
            fmin,
            fmax,
            ..ProductOptions::default()
        }
    }

    #[test]
    fn a_range_keeps_the_bins_inside_inclusive() {
        // frame 8 at 8 kHz: bins at 0, 1000, ..., 4000 Hz
        let plan = ColumnPlan::new(
            &meta(InputKind::Real, false),
            (8, crate::window::WindowKind::Hann),
            &options(Some(1000.0), Some(3000.0)),
            1,
        )
        .unwrap();
        assert_eq!(plan.frequencies(), &[1000.0, 2000.0, 3000.0]);
        let mut row = [0.0f32; 3];
        plan.pick(&[0.0, 1.0, 2.0, 3.0, 4.0], &mut row);
        assert_eq!(row, [1.0, 2.0, 3.0]);
    }

    #[test]
    fn complex_input_picks_negative_and_positive_frequencies_in_output_order() {
        // frame 4 at 8 kHz, unshifted: 0, 2000, -4000, -2000; shifted: -4000, -2000, 0, 2000
        let spectrum = [10.0f64, 11.0, 12.0, 13.0];
        let unshifted = ColumnPlan::new(
            &meta(InputKind::Complex, false),
            (4, crate::window::WindowKind::Hann),
            &options(Some(-2000.0), Some(0.0)),
            1,
        )
        .unwrap();
        assert_eq!(unshifted.frequencies(), &[0.0, -2000.0]);
        let mut row = [0.0; 2];
        unshifted.pick(&spectrum, &mut row);
        assert_eq!(row, [10.0, 13.0]);
        let shifted = ColumnPlan::new(
            &meta(InputKind::Complex, true),
            (4, crate::window::WindowKind::Hann),
            &options(Some(-2000.0), None),
            1,
        )
        .unwrap();
        assert_eq!(shifted.frequencies(), &[-2000.0, 0.0, 2000.0]);
        let mut row = [0.0; 3];
        shifted.pick(&spectrum, &mut row);
        assert_eq!(row, [13.0, 10.0, 11.0]);
        assert!(!shifted.keeps_spectrum() && !unshifted.keeps_spectrum());
    }

    #[test]
    fn runs_are_picked_as_bin_by_bin_in_every_rotation() {
        // frame 9, complex: every range of bins, shifted and not, two values per bin
        let spectrum: Vec<f64> = (0..18).map(f64::from).collect();
        let edges = [-4000.0, -3000.0, -1000.0, 0.0, 500.0, 3000.0, 4000.0];
        for fftshift in [false, true] {
            for (lo, hi) in edges
                .iter()
                .flat_map(|&a| edges.iter().map(move |&b| (a, b)))
            {
                let Ok(plan) = ColumnPlan::new(
                    &meta(InputKind::Complex, fftshift),
                    (9, crate::window::WindowKind::Hann),
                    &options(Some(lo), Some(hi)),
                    2,
                ) else {
                    continue;
                };
                let mut want = Vec::new();
                for run in &plan.picks {
                    for i in run.clone() {
                        let j = (i + plan.shift) % plan.bins;
                        want.extend_from_slice(&spectrum[2 * j..2 * j + 2]);
                    }
                }
                let mut row = vec![-1.0; plan.width()];
                plan.pick(&spectrum, &mut row);
                assert_eq!(row, want, "fftshift {fftshift} [{lo}, {hi}]");
            }
        }
    }

    #[test]
    fn an_empty_range_is_an_error_naming_the_bins() {
        let e = ColumnPlan::new(
            &meta(InputKind::Real, false),
            (8, crate::window::WindowKind::Hann),
            &options(Some(1100.0), Some(1900.0)),
            1,
        )
        .unwrap_err();
        assert!(e.contains("1000 Hz apart"), "{e}");
        let whole = ColumnPlan::new(
            &meta(InputKind::Real, false),
            (8, crate::window::WindowKind::Hann),
            &options(None, None),
            1,
        );
        assert!(whole.unwrap().keeps_spectrum());
    }

    #[test]
    fn measurements_without_bands_are_a_band_matrix_an_engine_can_sum() {
        use crate::products::measure::weighting::Weighting;
        let mut options = options(Some(1000.0), Some(3000.0));
        options.measure.weighting = Some(Weighting::A);
        options.measure.calibration_db = Some(94.0);
        options.measure.levels = true;
        let window = crate::window::WindowKind::Hann;
        let meta = meta(InputKind::Real, false);
        let plan = ColumnPlan::new(&meta, (8, window), &options, 1).unwrap();
        // three picked bins (1, 2, 3 kHz), then the level total: four bands the engine sums
        let weights = plan.band_weights().expect("gains as band weights");
        assert_eq!((weights.bands(), plan.columns(), plan.width()), (4, 3, 4));
        let gains = options.measure.bin_gains(&meta.frequencies(8), 8, window);
        let spectrum = [1.0f64, 2.0, 3.0, 4.0, 5.0];
        let mut row = [0.0f64; 4];
        weights.apply(&spectrum, &mut row);
        for k in 0..3 {
            let want = spectrum[k + 1] * gains.column[k + 1];
            assert!((row[k] - want).abs() <= 1e-12 * want, "{k}: {row:?}");
        }
        let level = gains.level.expect("level weights");
        let total: f64 = level.iter().zip(&spectrum).map(|(w, v)| w * v).sum();
        assert!((row[3] - total).abs() <= 1e-12 * total, "{row:?}");
    }
}
