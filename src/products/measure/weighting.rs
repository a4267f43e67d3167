//! `--weighting a|c|z`: the frequency weightings of IEC 61672-1:2013 (annex E's analytic form), as
//! a per-bin power gain applied before bands, levels and dB output.
//!
//! C(f) = 20·log10(f4²·f² / ((f² + f1²)(f² + f4²))) − C1000
//! A(f) = 20·log10(f4²·f⁴ / ((f² + f1²)·√(f² + f2²)·√(f² + f3²)·(f² + f4²))) − A1000
//! with f1 = 20.598997 Hz, f2 = 107.65265 Hz, f3 = 737.86223 Hz, f4 = 12194.217 Hz,
//! C1000 = −0.062 dB and A1000 = −2.000 dB (the standard's normalisation constants). Z is flat
//! (0 dB). At 0 Hz A and C are −∞ dB: the DC bin gets power gain 0.

use std::fmt;

const F1: f64 = 20.598997;
const F2: f64 = 107.65265;
const F3: f64 = 737.86223;
const F4: f64 = 12194.217;
const C1000_DB: f64 = -0.062;
const A1000_DB: f64 = -2.000;

/// A frequency weighting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Weighting {
    /// A-weighting (IEC 61672-1).
    A,
    /// C-weighting (IEC 61672-1).
    C,
    /// Z (zero): flat.
    #[default]
    Z,
}

impl Weighting {
    pub fn letter(self) -> &'static str {
        match self {
            Weighting::A => "A",
            Weighting::C => "C",
            Weighting::Z => "Z",
        }
    }

    /// The weighting in dB at `hz` (its magnitude; negative frequencies as positive).
    pub fn db(self, hz: f64) -> f64 {
        let f2 = hz * hz;
        match self {
            Weighting::Z => 0.0,
            Weighting::C => {
                20.0 * (F4 * F4 * f2 / ((f2 + F1 * F1) * (f2 + F4 * F4))).log10() - C1000_DB
            }
            Weighting::A => {
                let den =
                    (f2 + F1 * F1) * (f2 + F2 * F2).sqrt() * (f2 + F3 * F3).sqrt() * (f2 + F4 * F4);
                20.0 * (F4 * F4 * f2 * f2 / den).log10() - A1000_DB
            }
        }
    }

    /// The power gain at `hz`: 10^(dB/10) (0 at DC for A and C).
    pub(crate) fn power_gain(self, hz: f64) -> f64 {
        if self != Weighting::Z && hz == 0.0 {
            return 0.0;
        }
        10f64.powf(self.db(hz) / 10.0)
    }
}

impl fmt::Display for Weighting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.letter().to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IEC 61672-1:2013 table 3: nominal frequency, A and C weightings in dB (one decimal,
    /// computed at the exact base-10 frequencies 1000·10^(x/10) Hz), and the class 1 tolerance
    /// limits (+, −) in dB.
    const TABLE: [(f64, f64, f64, f64, f64); 34] = [
        (10.0, -70.4, -14.3, 3.0, f64::INFINITY),
        (12.5, -63.4, -11.2, 2.5, f64::INFINITY),
        (16.0, -56.7, -8.5, 2.0, 4.0),
        (20.0, -50.5, -6.2, 2.0, 2.0),
        (25.0, -44.7, -4.4, 2.0, 1.5),
        (31.5, -39.4, -3.0, 1.5, 1.5),
        (40.0, -34.6, -2.0, 1.0, 1.0),
        (50.0, -30.2, -1.3, 1.0, 1.0),
        (63.0, -26.2, -0.8, 1.0, 1.0),
        (80.0, -22.5, -0.5, 1.0, 1.0),
        (100.0, -19.1, -0.3, 1.0, 1.0),
        (125.0, -16.1, -0.2, 1.0, 1.0),
        (160.0, -13.4, -0.1, 1.0, 1.0),
        (200.0, -10.9, 0.0, 1.0, 1.0),
        (250.0, -8.6, 0.0, 1.0, 1.0),
        (315.0, -6.6, 0.0, 1.0, 1.0),
        (400.0, -4.8, 0.0, 1.0, 1.0),
        (500.0, -3.2, 0.0, 1.0, 1.0),
        (630.0, -1.9, 0.0, 1.0, 1.0),
        (800.0, -0.8, 0.0, 1.0, 1.0),
        (1000.0, 0.0, 0.0, 0.7, 0.7),
        (1250.0, 0.6, 0.0, 1.0, 1.0),
        (1600.0, 1.0, -0.1, 1.0, 1.0),
        (2000.0, 1.2, -0.2, 1.0, 1.0),
        (2500.0, 1.3, -0.3, 1.0, 1.0),
        (3150.0, 1.2, -0.5, 1.0, 1.0),
        (4000.0, 1.0, -0.8, 1.0, 1.0),
        (5000.0, 0.5, -1.3, 1.5, 1.5),
        (6300.0, -0.1, -2.0, 1.5, 2.0),
        (8000.0, -1.1, -3.0, 1.5, 2.5),
        (10000.0, -2.5, -4.4, 2.0, 3.0),
        (12500.0, -4.3, -6.2, 2.0, 5.0),
        (16000.0, -6.6, -8.5, 2.5, 16.0),
        (20000.0, -9.3, -11.2, 3.0, f64::INFINITY),
    ];

    /// The exact base-10 frequency behind a nominal one.
    fn exact(nominal: f64) -> f64 {
        let x = (10.0 * (nominal / 1000.0).log10()).round();
        1000.0 * 10f64.powf(x / 10.0)
    }

    #[test]
    fn a_and_c_match_the_iec_table_within_rounding_and_class_1_tolerance() {
        for (nominal, a, c, plus, minus) in TABLE {
            let f = exact(nominal);
            for (w, want) in [(Weighting::A, a), (Weighting::C, c)] {
                let got = w.db(f);
                // the table rounds to 0.1 dB (160 Hz's A lies on a rounding boundary: −13.34996)
                assert!(
                    (got - want).abs() <= 0.0501,
                    "{w} at {nominal} Hz: {got} vs {want}"
                );
                // at the nominal frequency itself, within class 1's limits
                let at_nominal = w.db(nominal) - want;
                assert!(
                    at_nominal <= plus && -at_nominal <= minus,
                    "{w} {nominal}: {at_nominal}"
                );
            }
        }
    }

    #[test]
    fn a_and_c_match_the_analytic_formula_to_a_hundredth_of_a_db() {
        // annex E's derivation of the poles from fr, fL, fH, D and fA, normalised at 1 kHz
        let (fr, fl, fh, fa) = (
            1000.0f64,
            10f64.powf(1.5),
            10f64.powf(3.9),
            10f64.powf(2.45),
        );
        let d = 0.5f64.sqrt(); // D² = 1/2
        let c = fl * fl * fh * fh;
        let b = (1.0 / (1.0 - d)) * (fr * fr + c / (fr * fr) - d * (fl * fl + fh * fh));
        let f1 = ((-b - (b * b - 4.0 * c).sqrt()) / 2.0).sqrt();
        let f4 = ((-b + (b * b - 4.0 * c).sqrt()) / 2.0).sqrt();
        let f2 = (3.0 - 5f64.sqrt()) / 2.0 * fa;
        let f3 = (3.0 + 5f64.sqrt()) / 2.0 * fa;
        let c_raw =
            |f: f64| 20.0 * (f4 * f4 * f * f / ((f * f + f1 * f1) * (f * f + f4 * f4))).log10();
        let a_raw = |f: f64| {
            c_raw(f)
                + 20.0 * (f * f / ((f * f + f2 * f2).sqrt() * (f * f + f3 * f3).sqrt())).log10()
        };
        for f in [
            10.0, 31.5, 100.0, 440.0, 1000.0, 3150.0, 8000.0, 16000.0, 20000.0,
        ] {
            let (a, c) = (a_raw(f) - a_raw(1000.0), c_raw(f) - c_raw(1000.0));
            assert!(
                (Weighting::A.db(f) - a).abs() < 0.01,
                "A {f}: {} vs {a}",
                Weighting::A.db(f)
            );
            assert!(
                (Weighting::C.db(f) - c).abs() < 0.01,
                "C {f}: {} vs {c}",
                Weighting::C.db(f)
            );
        }
        assert_eq!(Weighting::A.power_gain(0.0), 0.0);
        assert_eq!(Weighting::Z.power_gain(123.0), 1.0);
    }
}
