//! Spectral products: what fftd makes of each stream's spectra between the FFT stage and the
//! sinks, in one place. The order is fixed and documented in the README:
//!
//! 1. the engine computes each frame's spectrum in the power domain when a product needs it
//!    (|X|² over a power of two, `Scale::ScaledPower`, for magnitude and dB output, so f32
//!    holds it; |X|² for power output; or scipy's one-sided `spectrum`/`density` scalings, |X|²
//!    times a factor);
//! 2. `columns`: per frame, `--fftshift`, then `--bands` (band power = weighted sum of the bins'
//!    power) or `--fmin`/`--fmax` (the bins in range, inclusive);
//! 3. `average`: per stream, in frame order, `--average` reduces groups of frames to one row;
//! 4. the requested scale last (`Finish`): the power unit multiplied back in f64, then
//!    `magnitude` is the square root of the (averaged) power, `db` is 10·log10 of it (floored at
//!    -240 dB, as plain dB output).
//!
//! Without products the engine's output goes straight to the sinks, as before. Measurements
//! (`measure`: calibration, weighting, levels, peaks, distortion) hook into steps 1, 2 and 4.

pub mod average;
pub(crate) mod band_power;
pub mod bands;
pub(crate) mod columns;
pub mod measure;

use crate::fft::{RowFinish, Scale};
use average::{AverageMode, AverageSpec};
use bands::BandSpec;

/// The products a run asks for (validated flags).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProductOptions {
    pub average: Option<AverageSpec>,
    pub mode: AverageMode,
    pub fmin: Option<f64>,
    pub fmax: Option<f64>,
    pub bands: Option<BandSpec>,
    /// Calibration, weighting and the measurements (`measure`).
    pub measure: measure::MeasureOptions,
    /// issue 27: with `--bands`, the `--alert band=` rules' bands (Hz), summed from the full
    /// spectrum after the bands (`ColumnPlan::add_alert_bands`) and taken off before rows are
    /// written.
    pub alert_bands: Vec<(f64, f64)>,
}

impl ProductOptions {
    /// Whether the engine's output goes to the sinks untouched.
    pub(crate) fn is_plain(&self) -> bool {
        self.average.is_none()
            && self.fmin.is_none()
            && self.fmax.is_none()
            && self.bands.is_none()
            && !self.measure.is_active()
    }

    /// The grouping of the averaging stage: `--average`, or one frame per row for measurements
    /// (which follow each stream's frames in order there).
    pub(crate) fn row_average(&self) -> Option<AverageSpec> {
        self.average
            .or_else(|| self.measure.is_active().then_some(AverageSpec::Frames(1)))
    }

    /// Whether rows must be reduced in the power domain (and the scale applied after).
    pub(crate) fn in_power_domain(&self) -> bool {
        self.average.is_some() || self.bands.is_some() || self.measure.is_active()
    }

    /// The scale the engine computes for output `scale`: the power-domain one when a product
    /// reduces power, else `scale` itself.
    pub(crate) fn engine_scale(&self, scale: Scale) -> Scale {
        if self.measure.cross.is_some() {
            return Scale::Complex; // `measure::cross` takes X and Y
        }
        match scale {
            // measurements: calibrated power, from scipy's one-sided spectrum scaling
            Scale::Magnitude | Scale::Db | Scale::Power if self.measure.is_active() => {
                Scale::Spectrum
            }
            // power the products sum and average, in range for f32 where the value written is
            // (`Scale::ScaledPower`); `power` output is |X|² itself, as f32 holds it
            Scale::Magnitude | Scale::Db if self.in_power_domain() => Scale::ScaledPower,
            other => other,
        }
    }

    /// Products defined on real signals only (`--bands`, the measurements, `--cross`) against a
    /// run with a receiver among its inputs (`rtl_tcp://`, `soapy://`: complex I/Q always),
    /// refused before it connects; a file's kind is known only once it is open.
    pub(crate) fn check_receiver(&self) -> Result<(), String> {
        let real_only = match (self.measure.is_active(), &self.bands) {
            (true, _) => self.measure.given(),
            (false, Some(spec)) => format!("--bands {spec}"),
            (false, None) => return Ok(()),
        };
        Err(format!(
            "{real_only}: a receiver (rtl_tcp://, soapy://) gives complex (I/Q) input; these are defined on real signals"
        ))
    }

    /// Checks combinations that have no meaning; the message names the flags.
    pub fn check(&self) -> Result<(), String> {
        if let (Some(cross), true) = (
            self.measure.cross,
            self.fmin.is_some() || self.fmax.is_some(),
        ) {
            return Err(format!(
                "--cross {cross} gives every bin: it goes without --fmin/--fmax"
            ));
        }
        if let (Some(bands), true) = (&self.bands, self.fmin.is_some() || self.fmax.is_some()) {
            return Err(format!(
                "--fmin/--fmax with --bands {bands}: give the bands' range inside --bands (mel:128,fmin=20,fmax=8000 or octave:fmin=20,fmax=20000)"
            ));
        }
        if let (Some(lo), Some(hi)) = (self.fmin, self.fmax) {
            if lo > hi {
                return Err(format!(
                    "--fmin {lo} is above --fmax {hi}: the range must not be empty"
                ));
            }
        }
        for (flag, value) in [("--fmin", self.fmin), ("--fmax", self.fmax)] {
            if value.is_some_and(|v| !v.is_finite()) {
                return Err(format!("{flag}: must be a finite number of Hz"));
            }
        }
        Ok(())
    }
}

/// Values `Finish::extend_finished` takes at a time.
const FINISH_PIECE: usize = 256;

/// The final step: a power-domain value in the engine's unit made a power again (times
/// `unit`, in f64: `Scale::power_unit`), then written in the requested scale (`how`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Finish {
    pub how: RowFinish,
    /// What a value is multiplied by to give its power.
    pub unit: f64,
}

impl Finish {
    /// Values left as they are (averaging follows, or the scale is the engine's own).
    pub(crate) const AS_IS: Finish = Finish {
        how: RowFinish::AsIs,
        unit: 1.0,
    };

    /// The value written for `value` (what a row's finish gives each value: the tests' measure).
    #[cfg(test)]
    pub(crate) fn apply(self, value: f64) -> f64 {
        self.how.apply(value * self.unit)
    }

    /// `apply` to each of `values`, appended to `out`: a row at a time, dB in vector code
    /// (`RowFinish::apply_into`; a call of libm's log10 per value made the averaging stage the
    /// bound of a 4 GiB `--average 16 --scale db` run on 16 cores, 6.5 s against 1.6 s in power).
    pub(crate) fn extend_finished<T: crate::types::Sample>(self, values: &[T], out: &mut Vec<T>) {
        let at = out.len();
        out.extend_from_slice(values);
        self.finish_in_place(&mut out[at..]);
    }

    /// `apply` to each of `values`, in place: pieces of `FINISH_PIECE` values at a time, their
    /// powers on the stack.
    pub(crate) fn finish_in_place<T: crate::types::Sample>(self, values: &mut [T]) {
        if self == Finish::AS_IS {
            return;
        }
        let mut powers = [0.0f64; FINISH_PIECE];
        for piece in values.chunks_mut(FINISH_PIECE) {
            let powers = &mut powers[..piece.len()];
            for (p, v) in powers.iter_mut().zip(piece.iter()) {
                *p = v.into_f64() * self.unit;
            }
            self.how.apply_into(powers, piece);
        }
    }
}

/// How product rows (power, in the engine's unit for frames of `n` samples) become the
/// requested scale: `magnitude` √power, `db` 10·log10(max(power, 1e-24)), other scales as they
/// are.
pub(crate) fn finish_for_scale(scale: Scale, options: &ProductOptions, n: usize) -> Finish {
    let how = match scale {
        Scale::Magnitude if options.in_power_domain() => RowFinish::SquareRoot,
        Scale::Db if options.in_power_domain() => RowFinish::Decibels,
        _ => RowFinish::AsIs,
    };
    Finish {
        how,
        unit: options.engine_scale(scale).power_unit(n),
    }
}

/// Why `--scale complex` cannot go with `--average` or `--bands`.
pub(crate) const COMPLEX_NEEDS_POWER: &str = "--scale complex keeps re and im of each bin: --average and --bands work on power; use --scale power|spectrum|density|magnitude|db";

/// The per-frame part of the products for a whole run: one `ColumnPlan` per kind of batch (frames
/// of one kind and rate share a batch, and so a plan), and the scale applied per frame when no
/// averaging follows. The FFT workers call it on every transformed batch.
pub(crate) struct Shaping {
    plans: Vec<(PlanKey, columns::ColumnPlan)>,
    finish: Finish,
}

/// What tells the plans apart: input kind and sample rate (bits).
type PlanKey = (crate::types::InputKind, u64);

impl Shaping {
    /// Plans every stream's columns (frames of `n` samples) and records them in its
    /// `StreamMeta::columns`; None for a run without products. Errors name the flag.
    pub(crate) fn new(
        streams: &mut [crate::types::StreamMeta],
        n: usize,
        options: &ProductOptions,
        (scale, window): (Scale, crate::window::WindowKind),
    ) -> Result<Option<Self>, String> {
        if options.is_plain() {
            return Ok(None);
        }
        if scale == Scale::Complex && options.in_power_domain() {
            return Err(COMPLEX_NEEDS_POWER.into());
        }
        let finish = match options.row_average() {
            Some(_) => Finish::AS_IS, // after averaging
            None => finish_for_scale(scale, options, n),
        };
        let mut plans: Vec<(PlanKey, columns::ColumnPlan)> = Vec::new();
        for meta in streams.iter_mut() {
            let key = (meta.kind, meta.rate.to_bits());
            let plan = match plans.iter().find(|(k, _)| *k == key) {
                // batches share a plan by (kind, rate): its columns must suit every such stream
                Some((_, plan)) if !plan.suits(meta, n) => {
                    return Err(format!(
                        "--fmin/--fmax: {} is labelled at another centre frequency than an input of the same rate; analyse it in a run of its own",
                        meta.input
                    ))
                }
                Some((_, plan)) => plan.clone(),
                None => {
                    let per_bin = options.engine_scale(scale).values_per_bin();
                    let mut plan = columns::ColumnPlan::new(meta, (n, window), options, per_bin)?;
                    let engine = (options.engine_scale(scale), window);
                    let gains = (options.measure.calibrates() && !options.alert_bands.is_empty())
                        .then(|| options.measure.bin_gains(&meta.frequencies(n), n, window));
                    let bands = (engine, gains.as_ref());
                    plan.add_alert_bands(meta, n, &options.alert_bands, bands);
                    // band rows are finished where they are summed (`BandWeights::finish`)
                    plan.set_band_finish(finish);
                    plans.push((key, plan.clone()));
                    plan
                }
            };
            meta.columns = Some(std::sync::Arc::new(plan.frequencies().to_vec()));
        }
        Ok(Some(Shaping { plans, finish }))
    }

    /// The plan for a batch of `spec`.
    pub(crate) fn plan(&self, spec: &crate::fft::TransformSpec) -> Option<&columns::ColumnPlan> {
        let key = (spec.kind, spec.rate.to_bits());
        self.plans.iter().find(|(k, _)| *k == key).map(|(_, p)| p)
    }

    /// Shapes `frames` spectra (back to back in `spectra`) into rows in `rows` (`frames` × the
    /// plan's width); returns the plan's columns, or None when no stream has this spec.
    pub(crate) fn shape<T: crate::types::Sample>(
        &self,
        spec: &crate::fft::TransformSpec,
        frames: usize,
        spectra: &[T],
        rows: &mut [T],
    ) -> Option<usize> {
        let plan = self.plan(spec)?;
        let (from, to) = (spec.values_out(), plan.width());
        for (spectrum, row) in spectra
            .chunks_exact(from)
            .zip(rows.chunks_exact_mut(to))
            .take(frames)
        {
            plan.pick(spectrum, row);
        }
        if plan.band_weights().is_none() {
            self.finish_rows(rows); // band rows are finished as they are summed
        }
        Some(plan.columns() + plan.extra())
    }

    /// Applies the scale to shaped rows when no averaging follows (else the encoders do, after it).
    pub(crate) fn finish_rows<T: crate::types::Sample>(&self, rows: &mut [T]) {
        self.finish.finish_in_place(rows);
    }
}

/// `--average` reduced in part by the FFT workers' engines (on a device: in device memory, so one
/// row per run of frames crosses back): each batch's frames are cut into segments, runs of one
/// stream's frames in one group, at most `MAX_SEGMENT_VALUES` values of spectra each; the
/// averaging stage combines the segments of a group. For modes with a segment op (mean, max,
/// min, peak) and file inputs (frames numbered without gaps).
pub(crate) struct Segmenting {
    /// Each stream's grouping.
    groupings: Vec<average::Grouping>,
    pub op: crate::fft::SegmentOp,
}

/// Values of spectra one segment holds at most (keeps device chunks small).
pub(crate) const MAX_SEGMENT_VALUES: usize = 1 << 20;

impl Segmenting {
    /// None when the mode needs every frame (median, exp) or the input is live.
    pub(crate) fn new(
        options: &ProductOptions,
        streams: &[crate::types::StreamMeta],
        hop: usize,
        live: bool,
    ) -> Result<Option<Self>, String> {
        // measurements follow every frame (`measure::levels`)
        let (Some(spec), Some(op), false, false) = (
            options.average,
            options.mode.segment_op(),
            live,
            options.measure.is_active(),
        ) else {
            return Ok(None);
        };
        let groupings = streams
            .iter()
            .map(|s| spec.grouping(s.rate, hop))
            .collect::<Result<_, _>>()?;
        Ok(Some(Segmenting { groupings, op }))
    }

    /// The run lengths of frames `(stream, frame number, start sample)` (in batch order): a new
    /// run where the stream or its group changes, or after `most` frames.
    pub(crate) fn cut(
        &self,
        frames: impl Iterator<Item = (usize, u64, u64)>,
        most: usize,
    ) -> Vec<u32> {
        let mut lengths: Vec<u32> = Vec::new();
        let mut last: Option<(usize, u64)> = None;
        for (stream, seq, start) in frames {
            let key = (stream, self.groupings[stream].group_of(seq, start));
            match lengths.last_mut() {
                Some(len) if last == Some(key) && (*len as usize) < most.max(1) => *len += 1,
                _ => lengths.push(1),
            }
            last = Some(key);
        }
        lengths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_finished_at_once_is_each_value_finished() {
        let some = [
            0.0f32,
            1e-30,
            3.5,
            1e30,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
            1e-45,
        ];
        // longer than a piece of `FINISH_PIECE`, not a multiple of it
        let values: Vec<f32> = some
            .iter()
            .copied()
            .cycle()
            .take(2 * FINISH_PIECE + 7)
            .collect();
        for how in [RowFinish::AsIs, RowFinish::SquareRoot, RowFinish::Decibels] {
            for unit in [1.0, 4f64.powi(12)] {
                let finish = Finish { how, unit };
                let mut row = vec![7.0f32];
                finish.extend_finished(&values, &mut row);
                let each: Vec<f32> = values
                    .iter()
                    .map(|&v| finish.apply(v as f64) as f32)
                    .collect();
                assert_eq!(row[0], 7.0, "appended after what was there");
                for (got, want) in row[1..].iter().zip(&each) {
                    assert!(
                        got.to_bits() == want.to_bits(),
                        "{how:?} {unit}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
