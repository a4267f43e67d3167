//! `--average N|DURATION` and `--average-mode` read from text and written back (one-line errors
//! naming the value).

use super::{AverageMode, AverageSpec, MAX_FRACTION_DIGITS, NANOS_PER_SECOND};
use crate::types::duration::{split_unit, UNITS, UNIT_NAMES};
use crate::types::escaped;
use std::fmt;
use std::str::FromStr;

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// A user's value as it goes into a one-line message (control characters escaped).
fn shown(value: &str) -> String {
    escaped(value).into_owned()
}

fn average_usage(value: &str) -> String {
    format!(
        "--average {}: must be a number of frames >= 1 or a duration like 250ms (units: {UNIT_NAMES})",
        shown(value)
    )
}

impl FromStr for AverageSpec {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let text = value.trim();
        if let Some((number, unit_nanos)) = split_unit(text) {
            return parse_interval(number.trim_end(), unit_nanos, value);
        }
        parse_frame_count(text, value)
    }
}

fn parse_frame_count(text: &str, value: &str) -> Result<AverageSpec, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<usize>() {
            Ok(0) => Err(average_usage(value)),
            Ok(frames) => Ok(AverageSpec::Frames(frames)),
            Err(_) => Err(format!(
                "--average {}: too many frames (at most {})",
                shown(value),
                usize::MAX
            )),
        };
    }
    if split_decimal(text).is_some() {
        return Err(format!(
            "--average {}: a number of frames must be whole; a duration needs a unit ({UNIT_NAMES})",
            shown(value)
        ));
    }
    Err(average_usage(value))
}

fn parse_interval(number: &str, unit_nanos: u64, value: &str) -> Result<AverageSpec, String> {
    let Some((whole, fraction)) = split_decimal(number) else {
        return Err(average_usage(value));
    };
    match decimal_times(whole, fraction, unit_nanos) {
        Some(0) => Err(format!(
            "--average {}: a duration must be more than 0 (in {UNIT_NAMES}; 1 ns at least)",
            shown(value)
        )),
        Some(nanos) => match u64::try_from(nanos) {
            Ok(nanos) => Ok(AverageSpec::Interval { nanos }),
            Err(_) => Err(too_long(value)),
        },
        None => Err(too_long(value)),
    }
}

fn too_long(value: &str) -> String {
    format!(
        "--average {}: longer than fftd can count (2^64 ns, about 584 years)",
        shown(value)
    )
}

/// `"1.5"` → `("1", "5")`: ASCII digits with at most one '.', at least one digit in all.
fn split_decimal(number: &str) -> Option<(&str, &str)> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let has_digit = !whole.is_empty() || !fraction.is_empty();
    (has_digit && digits_only(whole) && digits_only(fraction)).then_some((whole, fraction))
}

/// floor(whole.fraction × unit), exactly; None on overflow.
fn decimal_times(whole: &str, fraction: &str, unit: u64) -> Option<u128> {
    let unit = u128::from(unit);
    let whole_part = digits_value(whole)?.checked_mul(unit)?;
    let fraction = &fraction[..fraction.len().min(MAX_FRACTION_DIGITS)];
    let scale = 10u128.pow(fraction.len() as u32);
    let fraction_part = digits_value(fraction)? * unit / scale;
    whole_part.checked_add(fraction_part)
}

/// The value of a string of ASCII digits ("" is 0); None on overflow.
fn digits_value(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |acc, b| {
        acc.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })
}

impl fmt::Display for AverageSpec {
    /// Text that parses back to the same spec: `64`, `250ms`, `2min`, `0.0000005s`, ... (a
    /// sweep's per-hop rows: their frames, as `--average` would give them to one hop)
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AverageSpec::Frames(frames) => write!(f, "{frames}"),
            AverageSpec::Interval { nanos } => write_duration(f, nanos),
            AverageSpec::PerHop { frames, .. } => write!(f, "{frames}"),
        }
    }
}

fn write_duration(f: &mut fmt::Formatter<'_>, nanos: u64) -> fmt::Result {
    // the largest unit that divides it: 1s, not 1000ms ("m" is "min" by another name)
    let whole = UNITS
        .iter()
        .filter(|(name, u)| *name != "m" && nanos % u == 0);
    if let Some((unit, unit_nanos)) = whole.max_by_key(|(_, u)| *u) {
        return write!(f, "{}{unit}", nanos / unit_nanos);
    }
    let fraction = format!("{:09}", nanos % NANOS_PER_SECOND);
    write!(
        f,
        "{}.{}s",
        nanos / NANOS_PER_SECOND,
        fraction.trim_end_matches('0')
    )
}

fn mode_usage(value: &str) -> String {
    format!(
        "--average-mode {}: expected mean, median, max, min, peak or exp:ALPHA with 0 < ALPHA <= 1",
        shown(value)
    )
}

impl FromStr for AverageMode {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let text = value.trim();
        let mode = match text {
            "mean" => AverageMode::Mean,
            "median" => AverageMode::Median,
            "max" => AverageMode::Max,
            "min" => AverageMode::Min,
            "peak" => AverageMode::Peak,
            _ => {
                let alpha = text.strip_prefix("exp:").ok_or_else(|| mode_usage(value))?;
                AverageMode::Exp {
                    alpha: parse_alpha(alpha.trim()).ok_or_else(|| mode_usage(value))?,
                }
            }
        };
        Ok(mode)
    }
}

/// ALPHA of `exp:ALPHA`: a finite number in (0, 1].
fn parse_alpha(text: &str) -> Option<f64> {
    let alpha = text.parse::<f64>().ok()?;
    (alpha > 0.0 && alpha <= 1.0).then_some(alpha)
}

impl fmt::Display for AverageMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AverageMode::Mean => f.write_str("mean"),
            AverageMode::Median => f.write_str("median"),
            AverageMode::Max => f.write_str("max"),
            AverageMode::Min => f.write_str("min"),
            AverageMode::Peak => f.write_str("peak"),
            AverageMode::Exp { alpha } => write!(f, "exp:{alpha}"),
        }
    }
}
