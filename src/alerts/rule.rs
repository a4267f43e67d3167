//! `--alert RULE`: a rule such as `name=hum,band=900-1100,above=-20,hysteresis=3,hold=100ms`.
//!
//! - `name=NAME` (required): names the rule in events, metrics and recordings (1 to 64 letters,
//!   digits, `_`, `-`, `.`).
//! - what it reads, one of:
//!   - `band=LO-HI`: the band's power in dB, the band in Hz as the output labels bins (absolute
//!     with `--center-freq`; negative for complex baseband, `band=-5000--1000`; each with an
//!     optional k, M or G, `band=88M-108M`);
//!   - `peak=LO-HI`: the level of the strongest of the row's `--peaks` between LO and HI Hz
//!     (−∞ when none lies there);
//!   - `level=leq|lfmax|lfmin|lsmax|lsmin`: the row's `--levels` reading.
//! - `above=DB` or `below=DB` (one of them): the alert starts when the band's power rises above
//!   (falls below) DB.
//! - `hysteresis=DB` (default 0): it ends only once the power is DB back past the threshold
//!   (`above`: at or below threshold − DB; `below`: at or above threshold + DB).
//! - `hold=DURATION` (default 0: `100ms`, `2s`): a start or an end must hold this long; the event
//!   is the row at which it has.

use std::fmt;
use std::str::FromStr;

/// When a rule's alert is on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    Above(f64),
    Below(f64),
}

/// What a rule reads in each row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reads {
    /// The band's power (edges in Hz, low ≤ high).
    Band(f64, f64),
    /// The strongest `--peaks` peak between the edges.
    Peak(f64, f64),
    /// The `--levels` reading of this index in `LEVEL_NAMES` (`leq` …).
    Level(usize),
}

/// The `--levels` readings a `level=` rule can name, in row order.
pub(crate) use crate::products::measure::LEVEL_NAMES;

/// One checked `--alert` rule.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertRule {
    pub name: String,
    pub reads: Reads,
    pub threshold: Threshold,
    pub hysteresis: f64,
    /// Seconds.
    pub hold: f64,
}

/// A rule that cannot be used, in words that name the part.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("'{rule}': {why}")]
pub struct RuleError {
    pub rule: String,
    pub why: String,
}

impl AlertRule {
    /// Whether a level `db` starts the alert (when off).
    pub fn starts(&self, db: f64) -> bool {
        match self.threshold {
            Threshold::Above(t) => db > t,
            Threshold::Below(t) => db < t,
        }
    }

    /// Whether a level `db` ends the alert (when on).
    pub fn ends(&self, db: f64) -> bool {
        match self.threshold {
            Threshold::Above(t) => db <= t - self.hysteresis,
            Threshold::Below(t) => db >= t + self.hysteresis,
        }
    }
}

/// `LO-HI` in Hz, either possibly negative (`-5000--1000`), each with an optional k, M or G
/// (`-5k--1k`, `88M-108M`).
fn parse_band(text: &str) -> Option<(f64, f64)> {
    let bytes = text.as_bytes();
    // the dash after LO's last digit, point or suffix (a dash after an `e` is an exponent's)
    let ends_a_number = |b: u8| b.is_ascii_digit() || b".kKMGg ".contains(&b);
    let at = (1..bytes.len()).find(|&i| bytes[i] == b'-' && ends_a_number(bytes[i - 1]))?;
    let lo = crate::types::scaled_hz(&text[..at])?;
    let hi = crate::types::scaled_hz(&text[at + 1..])?;
    (lo <= hi).then_some((lo, hi))
}

/// What a `band=`, `peak=` or `level=` part (`key`) reads.
fn reads(key: &str, value: &str) -> Result<Reads, String> {
    if key == "level" {
        let at = LEVEL_NAMES.iter().position(|n| *n == value);
        let why = || {
            format!(
                "level={value}: one of {} (of --levels)",
                LEVEL_NAMES.join(", ")
            )
        };
        return at.map(Reads::Level).ok_or_else(why);
    }
    let (lo, hi) = parse_band(value).ok_or_else(|| {
        format!("{key}={value}: expected LO-HI in Hz (k, M or G allowed: 1k-2k), LO <= HI")
    })?;
    Ok(match key {
        "band" => Reads::Band(lo, hi),
        _ => Reads::Peak(lo, hi),
    })
}

fn db_value(key: &str, text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{key}={text}: expected a number of dB")),
    }
}

impl FromStr for AlertRule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Self, RuleError> {
        let fail = |why: String| RuleError {
            rule: text.to_string(),
            why,
        };
        let (mut name, mut band, mut threshold) = (None, None, None);
        let (mut hysteresis, mut hold) = (0.0, 0.0);
        let mut seen: Vec<&str> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(fail(format!("{part}: expected KEY=VALUE")));
            };
            let value = value.trim();
            // (a key given twice is refused, as --bands refuses it: neither value silently wins)
            if seen.contains(&key.trim()) {
                return Err(fail(format!("{} is given twice", key.trim())));
            }
            seen.push(key.trim());
            match key.trim() {
                "name" => name = Some(checked_name(value).map_err(&fail)?),
                k @ ("band" | "peak" | "level") if band.is_some() => {
                    return Err(fail(format!("{k}: give one of band=, peak= and level=")))
                }
                k @ ("band" | "peak" | "level") => band = Some(reads(k, value).map_err(fail)?),
                k @ ("above" | "below") if threshold.is_some() => {
                    return Err(fail(format!("{k}: give one of above= and below=")))
                }
                "above" => {
                    threshold = Some(Threshold::Above(db_value("above", value).map_err(fail)?))
                }
                "below" => {
                    threshold = Some(Threshold::Below(db_value("below", value).map_err(fail)?))
                }
                "hysteresis" => match db_value("hysteresis", value).map_err(&fail)? {
                    h if h >= 0.0 => hysteresis = h,
                    _ => return Err(fail(format!("hysteresis={value}: must be 0 dB or more"))),
                },
                "hold" => {
                    // (0, the default, needs no unit)
                    let zero = value.trim().parse::<f64>().is_ok_and(|v| v == 0.0);
                    let held = crate::types::duration::seconds(value, false);
                    hold = held.or(zero.then_some(0.0)).ok_or_else(|| {
                        fail(format!(
                            "hold={value}: expected a duration such as 100ms or 2s (or 0)"
                        ))
                    })?
                }
                other => {
                    return Err(fail(format!(
                        "unknown key '{other}' (keys: name, band, peak, level, above, below, hysteresis, hold)"
                    )))
                }
            }
        }
        let name = name.ok_or_else(|| fail("a rule needs name=NAME".into()))?;
        let reads = band
            .ok_or_else(|| fail("a rule needs band=LO-HI (Hz), peak=LO-HI or level=NAME".into()))?;
        let threshold =
            threshold.ok_or_else(|| fail("a rule needs above=DB or below=DB".into()))?;
        Ok(AlertRule {
            name,
            reads,
            threshold,
            hysteresis,
            hold,
        })
    }
}

/// The longest rule name (a metric label and a recording's file name carry it).
const NAME_MAX: usize = 64;

/// `name=`'s value, if it is 1 to `NAME_MAX` letters, digits, '_', '-' and '.'.
fn checked_name(name: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if let Some(c) = name.chars().find(|c| !allowed(*c)) {
        return Err(format!(
            "name={name}: {c:?} is not allowed (letters, digits, '_', '-' and '.')"
        ));
    }
    match name.len() {
        0 => Err("name=: give the rule a name".into()),
        n if n > NAME_MAX => Err(format!("name={name}: {n} characters, at most {NAME_MAX}")),
        _ => Ok(name.to_string()),
    }
}

impl fmt::Display for AlertRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, t) = match self.threshold {
            Threshold::Above(t) => ("above", t),
            Threshold::Below(t) => ("below", t),
        };
        let reads = match self.reads {
            Reads::Band(lo, hi) => format!("band={lo}-{hi}"),
            Reads::Peak(lo, hi) => format!("peak={lo}-{hi}"),
            Reads::Level(at) => format!("level={}", LEVEL_NAMES[at]),
        };
        write!(
            f,
            "name={},{reads},{key}={t},hysteresis={},hold={}s",
            self.name, self.hysteresis, self.hold
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issues_rule_parses() {
        let r: AlertRule = "name=hum,band=900-1100,above=-20,hold=100ms"
            .parse()
            .unwrap();
        assert_eq!(r.name, "hum");
        assert_eq!(r.reads, Reads::Band(900.0, 1100.0));
        assert_eq!(r.threshold, Threshold::Above(-20.0));
        assert!((r.hold - 0.1).abs() < 1e-12);
        let r: AlertRule = "name=quiet,band=-5000--1000,below=-60,hysteresis=3"
            .parse()
            .unwrap();
        assert_eq!(r.reads, Reads::Band(-5000.0, -1000.0));
        assert!(r.starts(-61.0) && !r.starts(-60.0));
        assert!(!r.ends(-58.0) && r.ends(-57.0));
        for (band, lo, hi) in [
            ("88M-108M", 88e6, 108e6),
            ("-5k--1k", -5000.0, -1000.0),
            ("1.5k - 2k", 1500.0, 2000.0),
            ("1e-3-2", 0.001, 2.0),
        ] {
            let r: AlertRule = format!("name=fm,band={band},above=-30").parse().unwrap();
            assert_eq!(r.reads, Reads::Band(lo, hi), "{band}");
        }
        let r: AlertRule = "name=w,peak=900-1100,above=-20".parse().unwrap();
        assert_eq!(r.reads, Reads::Peak(900.0, 1100.0));
        let r: AlertRule = "name=loud,level=lfmax,above=85".parse().unwrap();
        assert_eq!(r.reads, Reads::Level(1));
        assert_eq!(
            r.to_string(),
            "name=loud,level=lfmax,above=85,hysteresis=0,hold=0s"
        );
        // the default written out, with no unit as 0 needs none
        for zero in ["0", "0.0", "0s"] {
            let r: AlertRule = format!("name=a,band=1-2,above=0,hold={zero}")
                .parse()
                .unwrap();
            assert_eq!(r.hold, 0.0, "hold={zero}");
        }
    }

    #[test]
    fn bad_rules_say_which_part() {
        let long_name = format!("name={},band=1-2,above=0", "a".repeat(65));
        for (rule, needle) in [
            ("band=1-2,above=0", "name=NAME"),
            ("name=a,above=0", "band=LO-HI"),
            (
                "name=a,band=1-2,level=leq,above=0",
                "one of band=, peak= and level=",
            ),
            ("name=a,level=loud,above=0", "level=loud"),
            ("name=a,peak=2-1,above=0", "peak=2-1"),
            ("name=a,band=1e3k-2k,above=0", "k, M or G allowed"),
            ("name=a,band=1-2", "above=DB or below=DB"),
            ("name=a,band=2-1,above=0", "band=2-1"),
            (
                "name=a,band=1-2,above=0,below=1",
                "one of above= and below=",
            ),
            ("name=a,band=1-2,above=x", "above=x"),
            ("name=a,band=1-2,above=0,hold=3", "hold=3"),
            ("name=a b,band=1-2,above=0", "name=a b"),
            (long_name.as_str(), "65 characters, at most 64"),
            ("name=a/b,band=1-2,above=0", "'/' is not allowed"),
            ("name=a,band=1-2,above=0,hysteresis=-1", "hysteresis=-1"),
            ("name=a,band=1-2,above=0,colour=red", "unknown key 'colour'"),
            // the last of two values won without a word (helper-42)
            (
                "name=a,band=1-2,above=0,hold=1s,hold=2s",
                "hold is given twice",
            ),
            ("name=a,band=1-2,above=0,name=b", "name is given twice"),
        ] {
            let e = rule.parse::<AlertRule>().unwrap_err().to_string();
            assert!(e.contains(needle), "{rule}: {e}");
        }
    }
}
