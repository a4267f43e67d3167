//! The measurement layer (`--calibration`, `--calibration-file`, `--weighting`, `--levels`,
//! `--peaks`, `--distortion`): what turns spectra into numbers a user can report. Semantics in
//! one place; one small module per measurement.
//!
//! How a run with measurements flows (docs/measure.md):
//! 1. the engine computes scipy's one-sided `spectrum` scaling (power, a full-scale sine's bin
//!    reads 0.5 = its mean square);
//! 2. per frame (`columns`), every bin's power is multiplied by its gain
//!    ([`MeasureOptions::bin_gains`]): 2·10^(C/10) (C: `--calibration`, 0 without, so a full-scale
//!    sine's bin reads C dB; dBFS as AES17 defines it) × the weighting's power gain × the
//!    calibration file's correction. Band weights (`--bands`) get the gains folded in, divided
//!    by the window's equivalent noise bandwidth in bins (so a band's power is the mean square of
//!    what it holds: a tone in it reads its level), and an engine that sums bands (an OpenCL
//!    device) applies them there. With `--levels` each frame
//!    also gets its weighted, calibrated total power (Σ bins × gain / the window's equivalent
//!    noise bandwidth in bins), an extra value after the columns (a band of all bins, fused
//!    alike);
//! 3. rows always pass the averaging stage (one frame per row without `--average`), which keeps
//!    each stream's frames in order: [`levels::LevelMeter`] follows the totals (Leq, Fast, Slow);
//! 4. each finished row ([`Measuring::finish_row`]): the columns in the requested scale, then the
//!    measurements appended in [`MeasureLayout::names`] order (levels, peaks, distortion), which
//!    the csv and ndjson encoders name (`sink::measured`) and text, f32 and npy carry as the last
//!    values of a row.

pub(crate) mod calibration;
pub(crate) mod cross;
pub(crate) mod distortion;
pub(crate) mod levels;
pub(crate) mod peaks;
pub mod weighting;

use super::Finish;
use crate::fft::Scale;
use crate::types::{shown, Sample};
use crate::window::WindowKind;
use calibration::CalibrationCurve;
use std::sync::Arc;
use weighting::Weighting;

/// The measurement flags of a run (validated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeasureOptions {
    /// `--calibration DB`: the level a full-scale sine (amplitude 1.0) reads.
    pub calibration_db: Option<f64>,
    pub calibration_file: Option<CalibrationCurve>,
    pub weighting: Option<Weighting>,
    /// `--unit NAME`: the name of the calibrated level unit.
    pub unit: Option<String>,
    pub levels: bool,
    /// `--peaks N` (0: none).
    pub peaks: usize,
    pub distortion: bool,
    /// `--tone HZ`: the distortion's fundamental, instead of the strongest tone.
    pub tone_hz: Option<f64>,
    /// `--cross A,B`: cross-spectral density, coherence and H1 between two channels.
    pub cross: Option<cross::CrossSpec>,
}

/// The harmonics `--distortion` counts: 2nd to this one (those below the top bin).
pub(crate) const LAST_HARMONIC: usize = 10;

impl MeasureOptions {
    /// Each measurement flag, and whether it is given.
    fn flags(&self) -> [(bool, &'static str); 7] {
        [
            (self.calibration_db.is_some(), "--calibration"),
            (self.calibration_file.is_some(), "--calibration-file"),
            (self.weighting.is_some(), "--weighting"),
            (self.levels, "--levels"),
            (self.peaks > 0, "--peaks"),
            (self.distortion, "--distortion"),
            (self.cross.is_some(), "--cross"),
        ]
    }

    /// Whether any measurement flag is given.
    pub(crate) fn is_active(&self) -> bool {
        self.flags().iter().any(|(given, _)| *given)
    }

    /// The measurement flags given, for messages (`--calibration/--levels`).
    pub(crate) fn given(&self) -> String {
        self.given_of(|_| true)
    }

    /// The flags given that add columns after the bins (`--levels`, `--peaks`, `--distortion`)
    /// or replace them (`--cross`), for messages of formats that carry bins only; empty when
    /// none is given.
    pub(crate) fn column_flags(&self) -> String {
        let adding = ["--levels", "--peaks", "--distortion", "--cross"];
        self.given_of(|flag| adding.contains(&flag))
    }

    /// The flags given among those `pick` takes, joined with `/`.
    fn given_of(&self, pick: impl Fn(&str) -> bool) -> String {
        let flags = self.flags();
        let given: Vec<&str> = (flags.iter())
            .filter(|(on, flag)| *on && pick(flag))
            .map(|(_, f)| *f)
            .collect();
        given.join("/")
    }

    /// Whether bins get gains (calibration, weighting, levels, peaks, distortion: all but
    /// `--cross`, which takes the complex spectra as they are).
    pub(crate) fn calibrates(&self) -> bool {
        self.is_active() && self.cross.is_none()
    }

    /// The unit levels (and dB bins) are in: `--unit`, else `dB SPL` with `--calibration` and
    /// `dBFS` without; an A or C weighting is named after it.
    pub fn unit(&self) -> String {
        let base = self.unit.clone().unwrap_or_else(|| {
            match self.calibration_db {
                Some(_) => "dB SPL",
                None => "dBFS",
            }
            .to_string()
        });
        match self.weighting {
            Some(w @ (Weighting::A | Weighting::C)) => format!("{base} ({}-weighted)", w.letter()),
            _ => base,
        }
    }

    /// Checks the flags against each other and the run's scale and bands.
    pub fn check(&self, scale: Scale, bands: bool, png: bool) -> Result<(), String> {
        if let Some(db) = self.calibration_db.filter(|v| !v.is_finite()) {
            return Err(format!("--calibration {db}: must be a finite number of dB"));
        }
        if let Some(hz) = self.tone_hz.filter(|v| !v.is_finite() || *v <= 0.0) {
            return Err(format!("--tone {hz}: must be a frequency above 0 Hz"));
        }
        // (an uncalibrated level is dBFS whatever it is called: helper-52 found --levels
        // --unit dBV labelling dBFS readings dBV)
        let calibrated = self.calibration_db.is_some() || self.calibration_file.is_some();
        if let Some(unit) = self.unit.as_ref().filter(|_| !calibrated) {
            return Err(format!(
                "--unit {unit} names the calibrated level unit: give --calibration DB or --calibration-file too (uncalibrated levels are dBFS)"
            ));
        }
        if !self.is_active() {
            if self.tone_hz.is_some() {
                return Err(
                    "--tone HZ picks --distortion's fundamental: give --distortion too".into(),
                );
            }
            return Ok(());
        }
        if let Some(cross) = self.cross {
            let others = self.calibration_db.is_some()
                || self.calibration_file.is_some()
                || self.weighting.is_some()
                || self.levels
                || self.peaks > 0
                || self.distortion
                || bands;
            if others || png {
                return Err(format!("--cross {cross} gives csd, coherence and H1 of the channels' spectra as they are: it goes without --calibration, --weighting, --levels, --peaks, --distortion, --bands and --format png"));
            }
            return Ok(());
        }
        if self.tone_hz.is_some() && !self.distortion {
            return Err("--tone HZ picks --distortion's fundamental: give --distortion too".into());
        }
        if matches!(scale, Scale::Complex | Scale::Density) {
            return Err(format!("--scale {scale} with --calibration/--weighting/--levels/--peaks/--distortion: measurements are calibrated power; use --scale db, power, magnitude or spectrum"));
        }
        if bands && (self.peaks > 0 || self.distortion) {
            return Err("--peaks and --distortion read a spectrum's bins; --bands sums them away (use --fmin/--fmax for a range)".into());
        }
        if png {
            return Err("--format png draws the spectrum only: measurements go to text, csv, ndjson, f32 or npy".into());
        }
        if self
            .unit
            .as_deref()
            .is_some_and(|u| u.is_empty() || u.contains(['"', ',', '\n']))
        {
            return Err(
                "--unit: give a name without commas, quotes or newlines (such as \"dB re 1 g\")"
                    .into(),
            );
        }
        Ok(())
    }

    /// Each bin's gains, for bins at `frequencies` of frames of `n` samples windowed by
    /// `window`, whose power the engine computes in scipy's `spectrum` scaling.
    pub(crate) fn bin_gains(&self, frequencies: &[f64], n: usize, window: WindowKind) -> BinGains {
        let reference = 2.0 * 10f64.powf(self.calibration_db.unwrap_or(0.0) / 10.0);
        let column: Vec<f64> = frequencies
            .iter()
            .map(|&f| {
                let w = self.weighting.map_or(1.0, |w| w.power_gain(f));
                let k = self
                    .calibration_file
                    .as_ref()
                    .map_or(1.0, |c| c.power_gain(f));
                reference * w * k
            })
            .collect();
        let enbw = enbw_bins(window, n);
        let level = self
            .levels
            .then(|| column.iter().map(|g| g / enbw).collect());
        BinGains {
            column,
            level,
            enbw,
        }
    }

    pub fn layout(&self, bands: bool, scale: Scale) -> MeasureLayout {
        MeasureLayout {
            levels: self.levels,
            bands: bands && self.levels,
            peaks: self.peaks,
            distortion: self.distortion,
            unit: self.unit(),
            column_scale: scale,
            cross_bins: None,
        }
    }
}

/// The window's equivalent noise bandwidth in bins: n·Σw²/(Σw)².
pub(crate) fn enbw_bins(window: WindowKind, n: usize) -> f64 {
    let w = window.coefficients(n);
    let (sum, sum_sq) = w.iter().fold((0.0, 0.0), |(s, q), v| (s + v, q + v * v));
    n as f64 * sum_sq / (sum * sum)
}

/// Per-bin power gains of a run with measurements.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BinGains {
    /// Applied to each bin's power in the rows (and folded into band weights).
    pub column: Vec<f64>,
    /// With `--levels`: the weights of the frame's total power.
    pub level: Option<Vec<f64>>,
    /// The window's equivalent noise bandwidth in bins: band weights get `column / enbw`, so a
    /// band's power is the mean square of what it holds (a tone in it reads its level).
    pub enbw: f64,
}

/// What a measured row carries after its columns, the same for every stream of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasureLayout {
    pub levels: bool,
    /// Levels of bands: the columns are band powers (ndjson also writes them as `bands` in dB).
    pub bands: bool,
    pub peaks: usize,
    pub distortion: bool,
    /// The unit of the levels.
    pub unit: String,
    /// The scale the columns are written in (`--scale`).
    pub column_scale: Scale,
    /// With `--cross`: the bins of its rows (which hold csd, coherence, h1_db, h1_deg only).
    pub cross_bins: Option<usize>,
}

/// Names of the level values, in row order.
pub(crate) const LEVEL_NAMES: [&str; 5] = ["leq", "lfmax", "lfmin", "lsmax", "lsmin"];
/// Names of the distortion values, in row order.
pub(crate) const DISTORTION_NAMES: [&str; 5] =
    ["thd_db", "thdn_db", "sinad_db", "snr_db", "tone_hz"];

impl MeasureLayout {
    /// A column's value (in `column_scale`) as a level in dB: a band's Leq in ndjson's `bands`.
    pub(crate) fn column_db(&self, v: f64) -> f64 {
        match self.column_scale {
            Scale::Db => v,
            Scale::Magnitude => db(v * v),
            _ => db(v),
        }
    }

    /// The appended values' names, in row order (csv's header cells).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        if self.levels {
            names.extend(LEVEL_NAMES.iter().map(|s| s.to_string()));
        }
        for i in 1..=self.peaks {
            names.push(format!("peak{i}_hz"));
            names.push(format!("peak{i}_db"));
        }
        if self.distortion {
            names.extend(DISTORTION_NAMES.iter().map(|s| s.to_string()));
        }
        names
    }

    /// Values appended to each finished row.
    pub(crate) fn extras(&self) -> usize {
        if let Some(bins) = self.cross_bins {
            return cross::row_values(bins);
        }
        5 * usize::from(self.levels) + 2 * self.peaks + 5 * usize::from(self.distortion)
    }

    /// Values a frame's row carries after its columns before finishing (the level total).
    pub(crate) fn extra_in(&self) -> usize {
        usize::from(self.levels)
    }
}

/// `--distortion` on fewer than 3 columns, or a `--tone` outside a stream's bins, would give
/// every row NaN figures: refused before the run writes anything, naming the bins (frames of
/// `n` samples; `--frame whole`: known per input only, not checked).
pub(crate) fn check_tone_bins(
    measure: &MeasureOptions,
    streams: &[crate::types::StreamMeta],
    n: usize,
) -> Result<(), String> {
    let (distortion, tone_hz) = (measure.distortion, measure.tone_hz);
    if !distortion || n < 2 {
        return Ok(());
    }
    for stream in streams {
        let freqs = stream.column_frequencies(n);
        let cropped = match freqs.len() < stream.bins(n) {
            true => ", as --fmin/--fmax crop them",
            false => "",
        };
        if freqs.len() < 3 {
            return Err(format!(
                "--distortion: {} has {} column(s) at --frame {n}{cropped}: the figures need the tone's column and its neighbours'",
                stream.input,
                freqs.len()
            ));
        }
        let Some(hz) = tone_hz else {
            continue;
        };
        if distortion::tone_column(&freqs, hz).is_some() {
            continue;
        }
        let (low, high) = stream.column_span(n);
        return Err(format!(
            "--tone {}: outside the bins of {} ({} to {} Hz at --frame {n}{cropped}): give the fundamental's frequency within them",
            shown(hz),
            stream.input,
            shown(low),
            shown(high)
        ));
    }
    Ok(())
}

/// A and C weightings are curves of audio frequency, and `--distortion` counts harmonics at
/// whole multiples of the tone from 0 Hz: a stream whose bins are labelled about a centre
/// (`--center-freq`, a recording's or a radio's) would be weighted at the labels (its DC bin as
/// 1 kHz with `--center-freq 1k`), and its harmonics sought at multiples of the label (helper-54:
/// a 1 kHz tone at --center-freq 1M read thd_db null and snr_db 25 dB low): refused, naming the
/// centre.
pub(crate) fn check_audio_figures_centre(
    measure: &MeasureOptions,
    streams: &[crate::types::StreamMeta],
) -> Result<(), String> {
    let weighting = measure.weighting.filter(|w| *w != Weighting::Z);
    let flag = match (weighting, measure.distortion) {
        (Some(w), _) => format!("--weighting {}", w.letter().to_lowercase()),
        (None, true) => "--distortion".to_string(),
        (None, false) => return Ok(()),
    };
    let what = match weighting {
        Some(_) => "A and C weightings are for audio, from 0 Hz",
        None => "its harmonics are whole multiples of the tone's frequency from 0 Hz, which these labels are not",
    };
    let centre = |s: &crate::types::StreamMeta| {
        let captures = s.tuning.as_ref().map_or(&[][..], |t| &t.captures[..]);
        captures
            .iter()
            .find_map(|c| c.frequency.filter(|&f| f != 0.0))
    };
    match streams.iter().find_map(|s| Some((s, centre(s)?))) {
        Some((stream, hz)) => Err(format!(
            "{flag}: {}'s bins are labelled about a centre of {} Hz (--center-freq, or the input's own): {what}",
            stream.input,
            shown(hz)
        )),
        None => Ok(()),
    }
}

/// The frequencies `--peaks` and `--distortion` write (`tone_hz`) are row values: in f32 rows
/// (the default precision) they are rounded to f32, whose step at a radio's centre is coarser
/// than the bins (helper-54: 2400000999.99 Hz written as 2400001024 at 16 Hz bins). Refused
/// where half that step passes a tenth of a bin, naming the step and `--precision f64`.
pub(crate) fn check_frequencies_held(
    measure: &MeasureOptions,
    streams: &[crate::types::StreamMeta],
    n: usize,
    f32_rows: bool,
) -> Result<(), String> {
    let flag = match (measure.peaks, measure.distortion) {
        _ if !f32_rows || n < 2 => return Ok(()),
        (0, false) => return Ok(()),
        (0, true) => "--distortion",
        _ => "--peaks",
    };
    for stream in streams {
        let freqs = stream.column_frequencies(n);
        let (Some(&a), Some(&b)) = (freqs.first(), freqs.get(1)) else {
            continue;
        };
        let bin = (b - a).abs();
        let top = freqs.iter().fold(0.0f64, |top, f| top.max(f.abs()));
        let f32_step = f32_step_at(top);
        if f32_step / 2.0 > bin / 10.0 {
            return Err(format!(
                "{flag}: {}'s columns reach {} Hz, where f32 values step by {} Hz, against bins of {} Hz: the measured frequencies would be written rounded by up to {} Hz; add --precision f64",
                stream.input,
                shown(top),
                shown(f32_step),
                shown(bin),
                shown(f32_step / 2.0)
            ));
        }
    }
    Ok(())
}

/// The distance between adjacent f32 values at `hz` (its unit in the last place).
fn f32_step_at(hz: f64) -> f64 {
    let v = (hz as f32).abs();
    let next = f32::from_bits(v.to_bits() + 1);
    f64::from(next) - f64::from(v)
}

/// One stream's part: what its rows' columns are.
#[derive(Clone, Debug)]
pub(crate) struct StreamMeasure {
    /// Frequency of each column (bin or band centre), Hz.
    pub frequencies: Arc<Vec<f64>>,
    /// Seconds between frames (hop / rate), for the time weightings.
    pub frame_step_s: f64,
    /// The input, as messages name it.
    pub input: String,
}

/// The measurement layer of a run: the layout and each stream's columns.
#[derive(Clone, Debug)]
pub(crate) struct Measuring {
    pub layout: Arc<MeasureLayout>,
    pub streams: Vec<StreamMeasure>,
    tone_hz: Option<f64>,
    /// Bins either side of a tone's centre counted as the tone (the window's main lobe and one).
    lobe: usize,
}

impl Measuring {
    /// The layer for `streams` (their `columns` set by `Shaping`); None without measurements.
    pub(crate) fn new(
        options: &super::ProductOptions,
        streams: &[crate::types::StreamMeta],
        (n, hop): (usize, usize),
        scale: Scale,
        window: WindowKind,
    ) -> Option<Self> {
        let measure = &options.measure;
        if !measure.is_active() {
            return None;
        }
        let streams = streams
            .iter()
            .map(|s| StreamMeasure {
                frequencies: s
                    .columns
                    .clone()
                    .unwrap_or_else(|| Arc::new(s.frequencies(n))),
                frame_step_s: hop as f64 / s.rate,
                input: s.input.clone(),
            })
            .collect();
        let mut layout = measure.layout(options.bands.is_some(), scale);
        if measure.cross.is_some() {
            layout.cross_bins = Some(n / 2 + 1);
        }
        Some(Measuring {
            layout: Arc::new(layout),
            streams,
            tone_hz: measure.tone_hz,
            lobe: window.main_lobe_bins() + 1,
        })
    }

    /// A level meter for `stream`, with `--levels`.
    pub(crate) fn meter(&self, stream: usize) -> Option<levels::LevelMeter> {
        self.layout
            .levels
            .then(|| levels::LevelMeter::new(self.streams[stream].frame_step_s))
    }

    /// The frame's total power in a row before finishing (`--levels`).
    pub(crate) fn total(&self, stream: usize, row: &[impl Sample]) -> Option<f64> {
        let columns = self.streams[stream].frequencies.len();
        self.layout
            .levels
            .then(|| row.get(columns).map_or(f64::NAN, |v| v.into_f64()))
    }

    /// Appends a finished row to `out`: the columns of `values` (power) in the requested scale,
    /// then the measurements (the level meter's reading of the row's frames), then what `values`
    /// holds after its columns and level total (the alert rules' bands), in the requested scale.
    pub(crate) fn finish_row<T: Sample>(
        &self,
        stream: usize,
        finish: Finish,
        values: &[T],
        meter: Option<&mut levels::LevelMeter>,
        out: &mut Vec<T>,
    ) {
        let frequencies = &self.streams[stream].frequencies;
        let columns = frequencies.len().min(values.len());
        // the measurements read the row's power in f64 (only levels: no copy needed)
        let power: Vec<f64> = if self.layout.peaks > 0 || self.layout.distortion {
            values[..columns].iter().map(|v| v.into_f64()).collect()
        } else {
            Vec::new()
        };
        finish.extend_finished(&values[..columns], out);
        let mut extras: Vec<f64> = Vec::with_capacity(self.layout.extras());
        if self.layout.levels {
            let reading = meter.map_or([f64::NAN; 5], |m| m.take());
            extras.extend(reading);
        }
        if self.layout.peaks > 0 {
            let found = peaks::strongest(frequencies, &power, self.layout.peaks);
            for i in 0..self.layout.peaks {
                let (hz, db) = found.get(i).copied().unwrap_or((f64::NAN, f64::NAN));
                extras.extend([hz, db]);
            }
        }
        if self.layout.distortion {
            let d = distortion::measure(frequencies, &power, self.tone_hz, self.lobe);
            self.say_unmeasured(stream, &d);
            extras.extend([d.thd_db, d.thdn_db, d.sinad_db, d.snr_db, d.tone_hz]);
        }
        out.extend(extras.into_iter().map(T::of_f64));
        // issue 27: `--alert band=` rules' own bands (with --bands) follow, in the same scale
        // (`alerts::level`, taken off before the row is written)
        let tail = (columns + self.layout.extra_in()).min(values.len());
        finish.extend_finished(&values[tail..], out);
    }
}

impl Measuring {
    /// Says once per input when a row's tone has a figure its columns cannot give (NaN).
    fn say_unmeasured(&self, stream: usize, d: &distortion::Distortion) {
        let missing = match (d.thd_db.is_nan(), d.snr_db.is_nan()) {
            _ if d.tone_hz.is_nan() => return,
            (true, true) => "thd_db and snr_db: no harmonic and no noise column lie",
            (true, false) => "thd_db: no harmonic lies",
            (false, true) => "snr_db: no noise column lies",
            (false, false) => return,
        };
        let stream = &self.streams[stream];
        let top = stream.frequencies.last().copied().unwrap_or(f64::NAN);
        crate::fft::log_once::warn_once(
            format!("distortion {} {missing}", stream.input),
            &format!(
                "--distortion: {}: {missing} within the columns (to {} Hz) beside the tone at {:.0} Hz: written as NaN (null in JSON)",
                stream.input,
                shown(top),
                d.tone_hz
            ),
        );
    }
}

/// dB of a power, floored as plain dB output (-240 dB).
pub fn db(power: f64) -> f64 {
    crate::fft::RowFinish::Decibels.apply(power)
}
