//! UTC times: ISO 8601 / RFC 3339 text as SigMF's `core:datetime` writes it, and calendar dates.
//! A time is whole seconds since 1970 and a fraction kept apart: an f64 of ~1.7e9 s holds only
//! 0.24 µs, so `23:59:59.999999999Z` in one f64 would round into the next day.

/// Seconds since 1970-01-01T00:00:00Z: `secs` whole, `fraction` in [0, 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct UtcTime {
    pub(crate) secs: i64,
    pub(crate) fraction: f64,
}

impl UtcTime {
    /// The time `epoch_s` (finite) seconds after 1970-01-01T00:00:00Z.
    pub(crate) fn of_epoch(epoch_s: f64) -> UtcTime {
        UtcTime {
            secs: 0,
            fraction: 0.0,
        }
        .plus(epoch_s)
    }

    /// `self` plus `seconds` (finite), whole seconds carried into `secs`.
    pub(crate) fn plus(self, seconds: f64) -> UtcTime {
        let total = self.fraction + seconds;
        let whole = total.floor();
        UtcTime {
            secs: self.secs + whole as i64,
            fraction: total - whole,
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff…]` then `Z` or an offset `±HH:MM` from UTC (RFC 3339); None for
/// anything else, a date that is not in the calendar included.
pub(crate) fn parse(text: &str) -> Option<UtcTime> {
    if !text.is_ascii() {
        return None;
    }
    let (body, offset_s) = split_zone(text)?;
    let (date, time) = body.split_once(['T', 't'])?;
    let mut date = date.splitn(3, '-');
    let y: i64 = digits(date.next()?, 4)?;
    let (m, d) = (digits(date.next()?, 2)?, digits(date.next()?, 2)?);
    let mut time = time.splitn(3, ':');
    let (h, mi) = (digits(time.next()?, 2)?, digits(time.next()?, 2)?);
    let seconds = time.next()?;
    let (s, fraction) = match seconds.split_once('.') {
        Some((s, f)) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
            (digits(s, 2)?, format!("0.{f}").parse::<f64>().ok()?)
        }
        Some(_) => return None,
        None => (digits(seconds, 2)?, 0.0),
    };
    let valid = (1..=12).contains(&m)
        && (1..=days_in_month(y, m as u32)).contains(&(d as u32))
        && (0..24).contains(&h)
        && (0..60).contains(&mi)
        && (0..=60).contains(&s);
    valid.then(|| {
        let days = days_from_civil(y, m as u32, d as u32);
        UtcTime {
            secs: days * 86_400 + h * 3600 + mi * 60 + s - offset_s,
            fraction: 0.0,
        }
        .plus(fraction)
    })
}

/// The text before the zone, and the zone's offset east of UTC in seconds.
fn split_zone(text: &str) -> Option<(&str, i64)> {
    if let Some(body) = text.strip_suffix(['Z', 'z']) {
        return Some((body, 0));
    }
    let at = text.len().checked_sub(6)?;
    let (body, zone) = text.split_at(at);
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (hh, mm) = zone[1..].split_once(':')?;
    let (hh, mm): (i64, i64) = (digits(hh, 2)?, digits(mm, 2)?);
    (hh < 24 && mm < 60).then_some((body, sign * (hh * 3600 + mm * 60)))
}

/// `text` as a number of exactly `width` decimal digits.
fn digits(text: &str, width: usize) -> Option<i64> {
    let only_digits = text.len() == width && text.bytes().all(|b| b.is_ascii_digit());
    only_digits.then(|| text.parse().ok()).flatten()
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_through_the_calendar() {
        for days in [-1, 0, 59, 60, 365, 10_957, 19_782, 50_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn times_are_read_with_their_zone_and_fraction_apart() {
        let at = |secs, fraction| Some(UtcTime { secs, fraction });
        assert_eq!(parse("2024-02-29T12:34:56.5Z"), at(1_709_210_096, 0.5));
        assert_eq!(parse("2024-02-29T12:34:56Z"), at(1_709_210_096, 0.0));
        // an offset east of UTC is that much earlier in UTC
        assert_eq!(parse("2024-02-29T14:34:56.5+02:00"), at(1_709_210_096, 0.5));
        assert_eq!(parse("2024-02-29T07:04:56.5-05:30"), at(1_709_210_096, 0.5));
        // nine nines stay in their second (helper-37: one f64 rounded into the next day)
        let late = parse("2025-02-28T23:59:59.999999999Z").expect("parse");
        assert_eq!(civil_from_days(late.secs.div_euclid(86_400)), (2025, 2, 28));
        assert_eq!(late.secs.rem_euclid(86_400), 86_399);
        for bad in [
            "yesterday",
            "2024-02-29 12:34:56Z",
            "2024-02-29T12:34:56",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-02-29T24:00:00Z",
            "2024-02-29T12:34:56.Z",
            "2024-02-29T12:34:56+2:00",
            "2024-2-29T12:34:56Z",
            "2024-02-29T12:34Z",
            "2024-02-29T12:34:56.5é",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn whole_seconds_carry() {
        let t = UtcTime::of_epoch(10.75).plus(0.5);
        assert_eq!((t.secs, t.fraction), (11, 0.25));
    }
}
