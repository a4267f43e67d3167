//! `--distortion` (and `--tone HZ`): an audio analyzer's figures for a row's tone. The
//! fundamental is the strongest bin (or the bin nearest `--tone`), its frequency interpolated
//! as for `--peaks`; a component's power is the sum of its bin and `lobe` bins either side (the
//! window's main lobe, plus one). Harmonics counted: the 2nd to the 10th, those that lie below
//! the row's top column. Noise: every other column but the DC's lobe. With P1 the fundamental,
//! H the harmonics' sum and T the total:
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

/// The column of evenly spaced `frequencies` nearest `hz` (`--tone`), None when `hz` is more than
/// half a column beyond either end.
pub(crate) fn tone_column(frequencies: &[f64], hz: f64) -> Option<usize> {
    let (first, second) = (*frequencies.first()?, *frequencies.get(1)?);
    let k = ((hz - first) / (second - first)).round();
    (k >= 0.0 && k < frequencies.len() as f64).then_some(k as usize)
}

/// The figures of a row of `power` at evenly spaced `frequencies`.
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
    let step = frequencies[1] - frequencies[0];
    let index = |hz: f64| ((hz - frequencies[0]) / step).round();
    // columns starting at 0 Hz: the DC lobe is not signal
    let dc_end = if frequencies[0] == 0.0 { lobe + 1 } else { 0 };
    let k0 = match tone_hz {
        Some(hz) => match tone_column(&frequencies[..len], hz) {
            Some(k) => k,
            None => return NONE,
        },
        None => match (dc_end..len).max_by(|&a, &b| power[a].total_cmp(&power[b])) {
            Some(k) => k,
            None => return NONE,
        },
    };
    let lobe_sum = |k: usize| -> f64 {
        power[k.saturating_sub(lobe)..(k + lobe + 1).min(len)]
            .iter()
            .sum()
    };
    let fundamental = lobe_sum(k0);
    let tone = match super::peaks::strongest(
        &frequencies[k0.saturating_sub(1)..(k0 + 2).min(len)],
        &power[k0.saturating_sub(1)..(k0 + 2).min(len)],
        1,
    )
    .first()
    {
        Some(&(hz, _)) => hz,
        None => frequencies[k0],
    };
    let mut harmonics = 0.0;
    for h in 2..=LAST_HARMONIC {
        let k = index(h as f64 * tone);
        if k >= len as f64 || k < 0.0 {
            break;
        }
        let k = k as usize;
        if k.abs_diff(k0) > 2 * lobe {
            harmonics += lobe_sum(k);
        }
    }
    let total: f64 = power[dc_end.min(len)..len].iter().sum();
    let rest = total - fundamental;
    let ratio = |num: f64, den: f64| 10.0 * (num / den).log10();
    Distortion {
        thd_db: ratio(harmonics, fundamental),
        thdn_db: ratio(rest, fundamental),
        sinad_db: ratio(total, rest),
        snr_db: ratio(fundamental, rest - harmonics),
        tone_hz: tone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
