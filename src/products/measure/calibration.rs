//! `--calibration-file PATH`: a microphone's (or sensor's) frequency response, in the format
//! measurement microphones ship with (UMIK-1, REW): lines of `Hz dB` (a third column, phase, is
//! ignored), separated by spaces, tabs, commas or semicolons; lines that do not start with a
//! number are comments (`*`, `#`, `"` …); an optional `Sens Factor =-1.378dB` header anywhere in
//! such a line. The response is interpolated onto the bins linearly in log-frequency, held
//! constant beyond the first and last points; each bin's level is corrected by −(response +
//! Sens Factor) dB, so a microphone that reads 2 dB hot at 8 kHz reads true after correction.

use std::path::Path;

/// The largest |dB| a calibration point may correct by: a response of ±200 dB is no sensor's,
/// and 10^(±x/10) of a larger one leaves what an f64 holds (bins of 0 or inf).
const MOST_CORRECTION_DB: f64 = 200.0;

/// A parsed calibration file.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationCurve {
    /// The file, as given (for messages and `--meta`).
    pub path: String,
    /// (Hz, dB) points, frequencies strictly increasing and > 0.
    pub points: Vec<(f64, f64)>,
    /// The `Sens Factor` header's value in dB (0 when absent).
    pub sens_factor_db: f64,
}

impl CalibrationCurve {
    /// Reads and parses `path`; the error names the file and line.
    pub fn load(path: &Path) -> Result<Self, String> {
        let shown = crate::types::shown_path(path).to_string();
        let text = crate::types::small_file::read_at_most(path, 16 << 20)
            .map_err(|e| format!("--calibration-file {shown}: cannot read it: {e}"))?;
        let text = String::from_utf8_lossy(&text);
        Self::parse(&shown, &text)
    }

    /// Parses the text of a calibration file named `path`.
    pub fn parse(path: &str, text: &str) -> Result<Self, String> {
        let error =
            |line: usize, what: String| format!("--calibration-file {path}: line {line}: {what}");
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut sens_factor_db = 0.0;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim().trim_start_matches('\u{feff}');
            if let Some(at) = line.to_ascii_lowercase().find("sens factor") {
                sens_factor_db = sens_factor(&line[at..]).ok_or_else(|| {
                    error(i + 1, format!("cannot read the Sens Factor in `{line}` (expected `Sens Factor =-1.23dB`)"))
                })?;
                continue;
            }
            let starts_numeric = line
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == '+' || c == '-');
            if !starts_numeric {
                continue; // a comment or a header
            }
            let mut fields = line
                .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
                .filter(|f| !f.is_empty());
            let mut next = |what: &str| -> Result<f64, String> {
                let field = fields.next().ok_or_else(|| {
                    error(i + 1, format!("`{line}` has no {what} (expected `Hz dB`)"))
                })?;
                field
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| error(i + 1, format!("{what} `{field}` is not a finite number")))
            };
            let (hz, db) = (next("frequency")?, next("level in dB")?);
            if hz <= 0.0 {
                return Err(error(i + 1, format!("frequency {hz} Hz must be above 0")));
            }
            if db.abs() > MOST_CORRECTION_DB {
                return Err(error(i + 1, format!("level {} dB is beyond ±{MOST_CORRECTION_DB} dB (a response, not a gain of its own)", crate::types::shown(db))));
            }
            if let Some(&(last, _)) = points.last() {
                if hz <= last {
                    return Err(error(i + 1, format!("frequency {hz} Hz is not above the line before's {last} Hz (points must be in increasing frequency)")));
                }
            }
            points.push((hz, db));
        }
        if points.is_empty() {
            return Err(format!("--calibration-file {path}: no `Hz dB` line in it"));
        }
        Ok(CalibrationCurve {
            path: path.to_string(),
            points,
            sens_factor_db,
        })
    }

    /// The response in dB at `hz`: interpolated linearly in log-frequency, held beyond the ends.
    pub(crate) fn response_db(&self, hz: f64) -> f64 {
        let hz = hz.abs();
        let (first, last) = (self.points[0], self.points[self.points.len() - 1]);
        if hz <= first.0 {
            return first.1;
        }
        if hz >= last.0 {
            return last.1;
        }
        let at = self.points.partition_point(|p| p.0 <= hz);
        let ((f0, d0), (f1, d1)) = (self.points[at - 1], self.points[at]);
        let t = (hz / f0).ln() / (f1 / f0).ln();
        d0 + t * (d1 - d0)
    }

    /// The power gain correcting a bin at `hz`: 10^(−(response + Sens Factor)/10).
    pub(crate) fn power_gain(&self, hz: f64) -> f64 {
        10f64.powf(-(self.response_db(hz) + self.sens_factor_db) / 10.0)
    }
}

/// The number in `Sens Factor =-1.378dB, SERNO: …`.
fn sens_factor(text: &str) -> Option<f64> {
    let after = &text[text.find('=')? + 1..];
    let number: String = after
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
        .collect();
    (number.parse().ok()).filter(|v: &f64| v.is_finite() && v.abs() <= MOST_CORRECTION_DB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_umik_style_file_parses_and_interpolates_in_log_frequency() {
        let text = "\"Sens Factor =-1.5dB, SERNO: 7000000\"\n* comment\n10\t-2.0\n100 0.0 12.5\n1000,3.0\n";
        let curve = CalibrationCurve::parse("mic.txt", text).unwrap();
        assert_eq!(
            curve.points,
            vec![(10.0, -2.0), (100.0, 0.0), (1000.0, 3.0)]
        );
        assert_eq!(curve.sens_factor_db, -1.5);
        assert!((curve.response_db(10f64.powf(2.5)) - 1.5).abs() < 1e-12);
        assert_eq!(curve.response_db(1.0), -2.0);
        assert_eq!(curve.response_db(20000.0), 3.0);
        assert!((curve.power_gain(1000.0) - 10f64.powf(-0.15)).abs() < 1e-12);
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let e = CalibrationCurve::parse("m.txt", "10 1\n5 2\n").unwrap_err();
        assert!(
            e.contains("m.txt: line 2") && e.contains("increasing"),
            "{e}"
        );
        let e = CalibrationCurve::parse("m.txt", "10 x\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("`x`"), "{e}");
        let e = CalibrationCurve::parse("m.txt", "* nothing\n").unwrap_err();
        assert!(e.contains("no `Hz dB` line"), "{e}");
        // (10^(-1e308/10) is 0: every bin would read -inf)
        let e = CalibrationCurve::parse("m.txt", "10 1\n100 1e308\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("200 dB"), "{e}");
        let e = CalibrationCurve::parse("m.txt", "Sens Factor =-1e300dB\n10 1\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("Sens Factor"), "{e}");
    }
}
