//! IEC 61260-1 base-10 fractional-octave bands: a band's exact mid-band frequency and edges
//! (what its power is summed between, and its column's label), and its nominal mid-band
//! frequency (Annex E: the 20, 25, 31.5 … Hz a user names the band by, which `fmin`/`fmax`
//! compare against).

/// IEC 61260-1 reference frequency, Hz.
const REFERENCE_HZ: f64 = 1000.0;

/// IEC 61260-1 base-10 octave frequency ratio G = 10^(3/10).
fn octave_ratio() -> f64 {
    10f64.powf(3.0 / 10.0)
}

/// 1000·G^(half_steps / (2b)) Hz: mid-band frequencies at even `half_steps` (2x → G^(x/b)),
/// band edges at odd ones.
fn frequency_hz(half_steps: i64, per_octave: u32) -> f64 {
    REFERENCE_HZ * octave_ratio().powf(half_steps as f64 / (2 * per_octave) as f64)
}

/// The nominal mid-band frequencies of one decade of third-octave bands, from 1000 Hz up
/// (IEC 61260-1 Annex E; G^(10/3) = 10, so every decade repeats them).
const NOMINAL_DECADE: [f64; 10] = [10.0, 12.5, 16.0, 20.0, 25.0, 31.5, 40.0, 50.0, 63.0, 80.0];

/// The nominal mid-band frequency of band x with b = `per_octave` (1 or 3) bands per octave,
/// Hz: octave band x is third-octave band 3x.
pub(super) fn nominal_hz(x: i64, per_octave: u32) -> f64 {
    let third = x * (3 / per_octave.clamp(1, 3)) as i64;
    let decade = third.div_euclid(10);
    let mantissa = NOMINAL_DECADE[third.rem_euclid(10) as usize];
    // 1000 Hz = 10·10^2; beyond f64's range the value is inf or 0, as the band's edges are.
    // Below 10 Hz divided by a power of ten (exact to 10^22), so 6.3 is the f64 `6.3` parses
    // to (63·10^-1 is 6.300000000000001, and fmax=6.3 dropped the band it names)
    let exponent = (decade + 2).clamp(-400, 400) as i32;
    match exponent {
        e if e < 0 => mantissa / 10f64.powi(-e),
        e => mantissa * 10f64.powi(e),
    }
}

/// One IEC band: mid-band frequency exact and nominal, and edges, Hz.
pub(super) struct IecBand {
    pub(super) centre_hz: f64,
    pub(super) nominal_hz: f64,
    pub(super) lower_hz: f64,
    pub(super) upper_hz: f64,
}

impl IecBand {
    pub(super) fn new(x: i64, per_octave: u32) -> Self {
        IecBand {
            centre_hz: frequency_hz(2 * x, per_octave),
            nominal_hz: nominal_hz(x, per_octave),
            lower_hz: frequency_hz(2 * x - 1, per_octave),
            upper_hz: frequency_hz(2 * x + 1, per_octave),
        }
    }

    /// Whether the band is named within `fmin_hz..=fmax_hz` (each None: no limit): by its
    /// nominal mid-band frequency (the names users type) or its exact one (the column labels),
    /// either taken within 0.1 % (a label rounded to 6 digits; neighbouring bands are 26 % apart).
    pub(super) fn named_within(&self, fmin_hz: Option<f64>, fmax_hz: Option<f64>) -> bool {
        const SLACK: f64 = 1e-3;
        let low = self.nominal_hz.min(self.centre_hz) * (1.0 - SLACK);
        let high = self.nominal_hz.max(self.centre_hz) * (1.0 + SLACK);
        fmin_hz.is_none_or(|fmin| high >= fmin) && fmax_hz.is_none_or(|fmax| low <= fmax)
    }
}

/// The band indices x that can have their edges within [low_hz, high_hz] (a superset; bounded
/// whatever the inputs).
pub(super) fn indices_around(
    low_hz: f64,
    high_hz: f64,
    per_octave: u32,
) -> std::ops::RangeInclusive<i64> {
    let index_of =
        |hz: f64| per_octave as f64 * (hz / REFERENCE_HZ).log10() / octave_ratio().log10();
    // f64 spans about 10^±308: 1030 octaves each way
    let bound = 1100 * per_octave as i64;
    let first = (index_of(low_hz).floor() as i64 - 1).clamp(-bound, bound);
    let last = (index_of(high_hz).ceil() as i64 + 1).clamp(-bound, bound);
    first..=last
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IEC 61260-1 Table E.1's nominal frequencies, 20 Hz to 20 kHz, against the exact ones.
    #[test]
    fn nominal_frequencies_are_annex_e_and_near_the_exact_ones() {
        let thirds = [
            20.0, 25.0, 31.5, 40.0, 50.0, 63.0, 80.0, 100.0, 125.0, 160.0, 200.0, 250.0, 315.0,
            400.0, 500.0, 630.0, 800.0, 1000.0, 1250.0, 1600.0, 2000.0, 2500.0, 3150.0, 4000.0,
            5000.0, 6300.0, 8000.0, 10000.0, 12500.0, 16000.0, 20000.0,
        ];
        for (x, want) in (-17..=13).zip(thirds) {
            let band = IecBand::new(x, 3);
            assert_eq!(band.nominal_hz, want, "third-octave x = {x}");
            assert!(
                (band.centre_hz / want - 1.0).abs() < 0.01,
                "{}",
                band.centre_hz
            );
        }
        let octaves = [
            31.5, 63.0, 125.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0,
        ];
        for (x, want) in (-5..=4).zip(octaves) {
            let band = IecBand::new(x, 1);
            assert_eq!(band.nominal_hz, want, "octave x = {x}");
            assert!(
                (band.centre_hz / want - 1.0).abs() < 0.01,
                "{}",
                band.centre_hz
            );
        }
        assert_eq!(nominal_hz(-27, 3), 2.0);
        // below 10 Hz each is the f64 its decimal name parses to (fmax=6.3 keeps 6.3 Hz)
        for (x, name) in [(-22, "6.3"), (-25, "3.15"), (-31, "0.8"), (-45, "0.0315")] {
            assert_eq!(
                nominal_hz(x, 3),
                name.parse::<f64>().expect("f64"),
                "{name}"
            );
        }
        assert_eq!(nominal_hz(23, 3), 200_000.0);
    }
}
