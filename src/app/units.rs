//! Frequencies and durations as a user types them: flag values and config-file keys. A
//! frequency is a number of Hz with an optional k, M or G (`2.4M`); a duration a number with a
//! unit (`500ms`, `10min`), or a bare number in the flag's own unit (SECONDS, MS). A flag with a
//! fixed range is checked by its parser, so the message quotes what was typed (`--rate -1k:
//! ...`, not `-1000`); its config key by the same range (`fftd.toml:3: rate = "-1k": ...`).

use crate::limits;
use crate::types::duration::{self, MILLISECOND, SECOND};
use crate::types::shown;
use serde::{Deserialize, Deserializer};

type Checked = Result<f64, String>;

/// How a key's text is read (as its flag's) and how a number given for it is checked.
type ReadAndCheck = (fn(&str) -> Checked, fn(f64) -> Checked);

/// A frequency in Hz, with an optional k, M or G suffix as `--sweep` takes (`100M`).
pub(crate) fn hz(text: &str) -> Checked {
    crate::types::scaled_hz(text).ok_or_else(|| {
        "expected a number of Hz, with an optional k, M or G (100M; an exponent takes none: 1e6)"
            .to_string()
    })
}

/// `--rate`: a sample rate fftd takes.
pub(crate) fn rate_hz(text: &str) -> Checked {
    hz(text).and_then(rate_in_range)
}

/// `--center-freq`: a frequency from 0 Hz.
pub(super) fn center_hz(text: &str) -> Checked {
    hz(text).and_then(center_in_range)
}

/// `--tone`: a frequency above 0 Hz.
pub(super) fn tone_hz(text: &str) -> Checked {
    hz(text).and_then(tone_in_range)
}

/// `--duration`: seconds of signal, above 0 (a bare number is seconds).
pub(super) fn duration_s(text: &str) -> Checked {
    in_unit(text, SECOND).and_then(duration_in_range)
}

/// `--idle-exit`: seconds without input, above 0 and at most a week.
pub(super) fn idle_exit_s(text: &str) -> Checked {
    in_unit(text, SECOND).and_then(idle_exit_in_range)
}

/// `--max-latency`: in ms (a bare number is ms), 0 to `limits::MAX_LATENCY_MS`.
pub(super) fn max_latency_ms(text: &str) -> Checked {
    in_unit(text, MILLISECOND).and_then(max_latency_in_range)
}

/// `--calibration`: the level in dB a full-scale sine reads, in `limits::CALIBRATION_DB`.
pub(super) fn calibration_db(text: &str) -> Checked {
    let number = text.trim().parse::<f64>();
    number
        .map_err(|_| "expected a number of dB".to_string())
        .and_then(calibration_in_range)
}

/// A duration counted in `unit` (`SECOND`, `MILLISECOND`), a bare number being one of those.
pub(crate) fn in_unit(text: &str, unit: u64) -> Checked {
    let name = if unit == SECOND { "seconds" } else { "ms" };
    duration::in_unit(text, unit, true).ok_or_else(|| {
        format!(
            "expected a duration: a number of {name}, or with a unit ({}: 500ms, 10min)",
            duration::UNIT_NAMES
        )
    })
}

/// A parser for a duration above 0 and at most `most` seconds (a bare number is seconds).
pub(crate) fn seconds_up_to(most: f64) -> impl Fn(&str) -> Checked + Clone + Send + Sync {
    move |text| {
        let up_to = |s: f64| {
            within(s, s > 0.0 && s <= most, || {
                format!("must be a duration above 0 and at most {} s", shown(most))
            })
        };
        in_unit(text, SECOND).and_then(up_to)
    }
}

fn within(v: f64, ok: bool, why: impl FnOnce() -> String) -> Checked {
    ok.then_some(v).ok_or_else(why)
}

fn rate_in_range(v: f64) -> Checked {
    let (low, high) = limits::RATE_HZ;
    within(v, limits::rate_in_range(v), || {
        format!("the sample rate must be a number of Hz from {low:e} to {high:e}")
    })
}

fn center_in_range(v: f64) -> Checked {
    let most = limits::CENTER_HZ_MAX;
    within(v, (0.0..=most).contains(&v), || {
        format!("must be a frequency from 0 to {most:e} Hz")
    })
}

fn tone_in_range(v: f64) -> Checked {
    within(v, v.is_finite() && v > 0.0, || {
        "must be a frequency above 0 Hz".into()
    })
}

fn duration_in_range(v: f64) -> Checked {
    within(v, v.is_finite() && v > 0.0, || {
        "must be a duration above 0 and finite (seconds, or with a unit: 500ms, 10min)".into()
    })
}

fn idle_exit_in_range(v: f64) -> Checked {
    let most = limits::IDLE_EXIT_S_MAX;
    within(v, v > 0.0 && v <= most, || {
        format!("must be a duration above 0 and at most {most} s (a week)")
    })
}

fn max_latency_in_range(ms: f64) -> Checked {
    let most = limits::MAX_LATENCY_MS;
    within(ms, (0.0..=most).contains(&ms), || {
        format!("must be from 0 to {most} ms")
    })
}

fn calibration_in_range(db: f64) -> Checked {
    let (least, most) = limits::CALIBRATION_DB;
    within(db, (least..=most).contains(&db), || {
        format!("must be the level in dB a full-scale sine reads, from {least} to {most}")
    })
}

/// `value`, which must be finite ("expected a finite number"): `config_value`'s check of a
/// number.
fn finite_value<E: serde::de::Error>(value: f64) -> std::result::Result<Option<f64>, E> {
    match value.is_finite() {
        true => Ok(Some(value)),
        false => Err(E::custom("expected a finite number")),
    }
}

/// What a config key of each kind takes, for a value of another type (`rate = true`).
const HZ: &str = "expected a number of Hz, or text such as \"2.4M\"";
const SECONDS: &str = "expected a number of seconds, or text such as \"10min\"";
const MS: &str = "expected a number of ms, or text such as \"0.5s\"";
const DB: &str = "expected a number of dB";

/// A config key's value: a number (in the flag's own unit), or text as the flag takes it
/// (`parse`); then `check`ed as the flag is. Another type is `what` the key takes.
fn config_value<'de, D: Deserializer<'de>>(
    d: D,
    (parse, check): ReadAndCheck,
    what: &str,
) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }
    let checked = match NumberOrText::deserialize(d) {
        Ok(NumberOrText::Number(value)) => finite_value(value)?.map(check).transpose(),
        Ok(NumberOrText::Text(text)) => parse(&text).map(Some),
        Err(_) => Err(what.to_string()),
    };
    checked.map_err(serde::de::Error::custom)
}

/// The `fmin` and `fmax` keys (any sign).
pub(super) fn config_hz<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (hz, Ok), HZ)
}

/// The `rate` key.
pub(super) fn config_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (rate_hz, rate_in_range), HZ)
}

/// The `center-freq` key.
pub(super) fn config_center<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (center_hz, center_in_range), HZ)
}

/// The `tone` key.
pub(super) fn config_tone<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (tone_hz, tone_in_range), HZ)
}

/// The `calibration` key.
pub(super) fn config_calibration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (calibration_db, calibration_in_range), DB)
}

/// The `duration` key.
pub(super) fn config_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (duration_s, duration_in_range), SECONDS)
}

/// The `idle-exit` key.
pub(super) fn config_idle_exit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (idle_exit_s, idle_exit_in_range), SECONDS)
}

/// The `max-latency` key.
pub(super) fn config_max_latency<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_value(d, (max_latency_ms, max_latency_in_range), MS)
}

/// A key that names a file or folder (`output`, `meta`, `trace`, ...): an empty string names
/// none, and is refused as the flag refuses it (before, the run failed with "`: No such file`").
pub(super) fn config_path<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<std::path::PathBuf>, D::Error> {
    use serde::de::Error;
    let text = String::deserialize(d).map_err(|_| D::Error::custom("expected a path, as text"))?;
    if text.is_empty() {
        return Err(D::Error::custom("a path is required, not \"\""));
    }
    Ok(Some(text.into()))
}
