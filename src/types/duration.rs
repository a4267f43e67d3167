//! Durations as a user types them: a number and a unit (`250ms`, `2.5s`, `10min`, `1h`). The one
//! reader of every duration a flag, config key or option takes (`--average`, `--settle`,
//! `--pre`/`--post`, `--rotate`, `--retry`, `--duration`, `--idle-exit`, `--max-latency`,
//! `--alert ...,hold=`), so each takes the same units.

/// The units, with their length in nanoseconds. A unit another ends with comes after it (`ms`
/// and `us` before `s`, `min` before `m`).
pub(crate) const UNITS: [(&str, u64); 8] = [
    ("min", 60_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
    ("w", 604_800_000_000_000),
];

/// The units as a message lists them.
pub(crate) const UNIT_NAMES: &str = "us, ms, s, min (or m), h, d, w";

/// Splits `250ms` into `("250", 1_000_000)`; None when `text` ends in no unit.
pub(crate) fn split_unit(text: &str) -> Option<(&str, u64)> {
    UNITS
        .iter()
        .find_map(|(unit, nanos)| text.strip_suffix(unit).map(|number| (number, *nanos)))
}

/// A bare number's unit, for a flag given in SECONDS or in MS.
pub(crate) const SECOND: u64 = 1_000_000_000;
pub(crate) const MILLISECOND: u64 = 1_000_000;

/// Seconds of `text`: a number with a unit, or a bare number of seconds where `bare_seconds`
/// (else a unit is required). None for anything else, and for a negative or infinite duration.
pub(crate) fn seconds(text: &str, bare_seconds: bool) -> Option<f64> {
    in_unit(text, SECOND, bare_seconds).filter(|s| s.is_finite() && *s >= 0.0)
}

/// `text` counted in `unit` (`SECOND`, `MILLISECOND`): a number with a unit, scaled; a bare
/// number where `bare` is allowed, exactly as typed. Negative and infinite values too (1e400s),
/// for a message that names the range a flag takes; None for anything else.
pub(crate) fn in_unit(text: &str, unit: u64, bare: bool) -> Option<f64> {
    let text = text.trim();
    let (number, nanos) = match split_unit(text) {
        Some((number, nanos)) => (number.trim_end(), nanos),
        None if bare => (text, unit),
        None => return None,
    };
    let value: f64 = number.parse().ok().filter(|v: &f64| !v.is_nan())?;
    // (an exact count of nanoseconds divided once: 250ms is exactly the double 0.25 s; a count
    // too large for that is still as large as it is)
    let counted = match nanos == unit {
        true => value,
        false => match value * nanos as f64 / unit as f64 {
            v if v.is_finite() => v,
            _ => value * (nanos as f64 / unit as f64),
        },
    };
    Some(counted + 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_reads_and_a_bare_number_only_where_it_has_one() {
        for (text, want) in [
            ("250ms", 0.25),
            ("2.5s", 2.5),
            (" 10 min ", 600.0),
            ("3m", 180.0),
            ("1h", 3600.0),
            ("1d", 86_400.0),
            ("1w", 604_800.0),
            ("500us", 0.0005),
            ("1e-3s", 0.001),
            ("0s", 0.0),
        ] {
            assert_eq!(seconds(text, false), Some(want), "{text}");
        }
        assert_eq!(seconds("2", true), Some(2.0));
        assert_eq!(seconds("50ms", true), Some(0.05));
        // a bare number in ms as typed (1001 ms, not 1000.9999999999999 through seconds)
        assert_eq!(in_unit("1001", MILLISECOND, true), Some(1001.0));
        assert_eq!(in_unit("4.9", MILLISECOND, true), Some(4.9));
        assert_eq!(in_unit("2min", MILLISECOND, true), Some(120_000.0));
        assert_eq!(in_unit("1e400s", SECOND, false), Some(f64::INFINITY));
        assert_eq!(in_unit("-2s", SECOND, false), Some(-2.0));
        for text in ["2", "-1s", "s", "1 x", "infs", "nans", "1hs", "1e400s", ""] {
            assert_eq!(seconds(text, false), None, "{text}");
        }
        assert_eq!(seconds("-2", true), None);
    }
}
