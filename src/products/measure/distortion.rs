//! `--distortion` (and `--tone HZ`): an audio analyzer's figures for a row's tone. The
//! fundamental is the strongest bin (or the bin nearest `--tone`), its frequency interpolated
//! as for `--peaks`; a component's power is the sum of its bin and `lobe` bins either side (the
//! window's main lobe, plus one), each column counted once: the fundamental's first, then each
//! harmonic's columns not counted yet. Harmonics counted: the 2nd to the 10th, those that lie
//! below the row's top column. Noise: every other column but the DC's lobe. A tone whose main
//! lobe meets the DC's (its column below 2·lobe − 1, the DC lobe's columns left out) has no
//! figures. A figure whose columns a row lacks is NaN: `thd_db` when no harmonic lies below the
//! top column (a tone above a quarter of the rate, or `--fmax` below its 2nd harmonic),
//! `snr_db` when every other column is the tone's or a harmonic's. With P1 the
//! fundamental, H the harmonics' sum and T the total:
//! - `thd_db` = 10·log10(H / P1);
//! - `thdn_db` = 10·log10((T − P1) / P1) (everything but the tone, re the tone);
//! - `sinad_db` = 10·log10(T / (T − P1));
//! - `snr_db` = 10·log10(P1 / (T − P1 − H)) (noise without the harmonics);
//! - `tone_hz`: the fundamental's frequency.

use super::LAST_HARMONIC;

/// A row's distortion figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Distortion {
    pub thd_db: f64,
    pub thdn_db: f64,
    pub sinad_db: f64,
    pub snr_db: f64,
    pub tone_hz: f64,
}

const NONE: Distortion = Distortion {
    thd_db: f64::NAN,
    thdn_db: f64::NAN,
    sinad_db: f64::NAN,
    snr_db: f64::NAN,
    tone_hz: f64::NAN,
};

/// The weakest strongest column that is a tone, as a share of the row's total power (−120 dB):
/// below it, what is left beside DC is the transform's rounding.
const TONE_FLOOR: f64 = 1e-12;

/// The column of evenly spaced `frequencies` nearest `hz` (`--tone`), None when `hz` is more than
/// half a column beyond either end.
pub(crate) fn tone_column(frequencies: &[f64], hz: f64) -> Option<usize> {
    let (first, second) = (*frequencies.first()?, *frequencies.get(1)?);
    let k = ((hz - first) / (second - first)).round();
    (k >= 0.0 && k < frequencies.len() as f64).then_some(k as usize)
}

/// The figures of a row of `power` at evenly spaced `frequencies`; none (NaN) where the tone's
/// main lobe meets the DC's (a frame this short cannot tell them apart).
pub(crate) fn measure(
    frequencies: &[f64],
    power: &[f64],
    tone_hz: Option<f64>,
    lobe: usize,
) -> Distortion {
    let len = power.len().min(frequencies.len());
    if len < 3 {
        return NONE;
    }
    // columns starting at 0 Hz: the DC lobe is not signal
    let dc_end = if frequencies[0] == 0.0 { lobe + 1 } else { 0 };
    let k0 = match tone_hz {
        Some(hz) => tone_column(&frequencies[..len], hz),
        // (a row without power, silence, has no tone; nor one whose strongest column outside
        // DC is at the rounding's floor, 120 dB below the row's total: DC alone)
        None => (dc_end..len)
            .max_by(|&a, &b| power[a].total_cmp(&power[b]))
            .filter(|&k| power[k] > TONE_FLOOR * power[..len].iter().sum::<f64>()),
    };
    // (the main lobes, `lobe` - 1 columns either side, of the tone and of DC apart)
    let Some(k0) = k0.filter(|&k| dc_end == 0 || k + 1 >= 2 * lobe) else {
        return NONE;
    };
    let tone = interpolated_tone(&frequencies[..len], &power[..len], k0);
    let harmonics = harmonic_ranges(&frequencies[..len], tone, k0, lobe);
    let fundamental = k0.saturating_sub(lobe).max(dc_end)..(k0 + lobe + 1).min(len);
    let (mut p1, mut h, mut noise, mut noise_columns) = (0.0, 0.0, 0.0, 0);
    for (k, &p) in power[..len].iter().enumerate().skip(dc_end) {
        if fundamental.contains(&k) {
            p1 += p;
        } else if harmonics.iter().any(|r| r.contains(&k)) {
            h += p;
        } else {
            noise += p;
            noise_columns += 1;
        }
    }
    let rest = h + noise;
    let ratio = |num: f64, den: f64| 10.0 * (num / den).log10();
    // a figure whose columns the row does not have is not measured: NaN, not the ±inf dB of
    // an empty sum (a harmonic beyond the top column, every column the tone's)
    let measured = |figure: f64, has_columns: bool| if has_columns { figure } else { f64::NAN };
    let (has_harmonics, has_noise) = (!harmonics.is_empty(), noise_columns > 0);
    Distortion {
        thd_db: measured(ratio(h, p1), has_harmonics),
        thdn_db: measured(ratio(rest, p1), has_harmonics || has_noise),
        sinad_db: measured(ratio(p1 + rest, rest), has_harmonics || has_noise),
        snr_db: measured(ratio(p1, noise), has_noise),
        tone_hz: tone,
    }
}

/// The tone's frequency, interpolated about its column `k0` as for `--peaks`.
fn interpolated_tone(frequencies: &[f64], power: &[f64], k0: usize) -> f64 {
    let near = k0.saturating_sub(1)..(k0 + 2).min(power.len());
    match super::peaks::strongest(&frequencies[near.clone()], &power[near], 1).first() {
        Some(&(hz, _)) => hz,
        None => frequencies[k0],
    }
}

/// The columns of the 2nd to the 10th harmonic of `tone` below the top column: each one's
/// column and `lobe` either side, less the fundamental's (`k0`'s) and those of a harmonic
/// below it, so that no column is counted twice.
fn harmonic_ranges(
    frequencies: &[f64],
    tone: f64,
    k0: usize,
    lobe: usize,
) -> Vec<std::ops::Range<usize>> {
    let len = frequencies.len();
    let step = frequencies[1] - frequencies[0];
    let mut ranges = Vec::new();
    let mut covered = k0 + lobe + 1;
    for h in 2..=LAST_HARMONIC {
        let k = ((h as f64 * tone - frequencies[0]) / step).round();
        if !(0.0..len as f64).contains(&k) {
            break;
        }
        let k = k as usize;
        let range = (k.saturating_sub(lobe)).max(covered)..(k + lobe + 1).min(len);
        if !range.is_empty() {
            covered = range.end;
            ranges.push(range);
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_without_its_columns_is_nan_not_an_empty_sum() {
        // 48 kHz, frame 64: columns every 750 Hz to 24 kHz; a tone at 15 kHz has no harmonic
        // below the top column
        let frequencies: Vec<f64> = (0..=32).map(|k| k as f64 * 750.0).collect();
        let mut power = vec![1e-6; 33];
        power[20] = 1.0;
        let d = measure(&frequencies, &power, None, 3);
        assert!(d.thd_db.is_nan(), "{d:?}");
        assert!(d.snr_db.is_finite() && d.thdn_db.is_finite(), "{d:?}");
        assert!((d.tone_hz - 15000.0).abs() < 1.0, "{d:?}");
        // a crop of three columns about the tone: every column is the tone's
        let d = measure(&frequencies[19..22], &power[19..22], None, 3);
        assert!(d.tone_hz.is_finite(), "{d:?}");
        for figure in [d.thd_db, d.thdn_db, d.sinad_db, d.snr_db] {
            assert!(figure.is_nan(), "{d:?}");
        }
        // with a harmonic in range and noise beside it, every figure is a number
        power[10] = 1.0;
        power[20] = 0.01;
        let d = measure(&frequencies, &power, None, 3);
        assert!((d.thd_db + 20.0).abs() < 0.01, "{d:?}");
        assert!(d.snr_db.is_finite(), "{d:?}");
    }

    #[test]
    fn a_tone_within_half_a_column_of_either_end_has_a_column() {
        // --fmin 1000 at 48 kHz, frame 1024: columns every 46.875 Hz from 1031.25
        let columns: Vec<f64> = (22..=64).map(|k| k as f64 * 46.875).collect();
        assert_eq!(tone_column(&columns, 1031.25), Some(0));
        assert_eq!(tone_column(&columns, 1010.0), Some(0));
        assert_eq!(tone_column(&columns, 1000.0), None);
        assert_eq!(tone_column(&columns, 3000.0), Some(42));
        assert_eq!(tone_column(&columns, 3020.0), Some(42));
        assert_eq!(tone_column(&columns, 3030.0), None);
        assert_eq!(tone_column(&columns[..1], 1031.25), None);
    }
}
