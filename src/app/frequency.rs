//! Frequencies as a user types them: flag values and config-file keys in Hz, with an optional
//! k, M or G (`2.4M`). A flag with a fixed range is checked by its parser, so the message
//! quotes what was typed (`--rate -1k: ...`, not `-1000`); its config key is checked by the same
//! range (`fftd.toml:3: rate = "-1k": ...`).

use super::options::finite_value;
use serde::{Deserialize, Deserializer};

/// A frequency in Hz, with an optional k, M or G suffix as `--sweep` takes (`100M`).
pub(crate) fn hz(text: &str) -> Result<f64, String> {
    crate::types::scaled_hz(text).ok_or_else(|| {
        "expected a number of Hz, with an optional k, M or G (100M; an exponent takes none: 1e6)"
            .to_string()
    })
}

/// `--rate`: a sample rate fftd takes.
pub(crate) fn rate_hz(text: &str) -> Result<f64, String> {
    hz(text).and_then(rate_in_range)
}

/// `--center-freq`: a frequency from 0 Hz.
pub(super) fn center_hz(text: &str) -> Result<f64, String> {
    hz(text).and_then(center_in_range)
}

/// `--tone`: a frequency above 0 Hz.
pub(super) fn tone_hz(text: &str) -> Result<f64, String> {
    hz(text).and_then(tone_in_range)
}

fn rate_in_range(v: f64) -> Result<f64, String> {
    let (low, high) = crate::limits::RATE_HZ;
    match crate::limits::rate_in_range(v) {
        true => Ok(v),
        false => Err(format!(
            "the sample rate must be a number of Hz from {low:e} to {high:e}"
        )),
    }
}

fn center_in_range(v: f64) -> Result<f64, String> {
    let most = crate::limits::CENTER_HZ_MAX;
    match (0.0..=most).contains(&v) {
        true => Ok(v),
        false => Err(format!("must be a frequency from 0 to {most:e} Hz")),
    }
}

fn tone_in_range(v: f64) -> Result<f64, String> {
    match v.is_finite() && v > 0.0 {
        true => Ok(v),
        false => Err("must be a frequency above 0 Hz".to_string()),
    }
}

/// A config file's frequency in Hz: a number, or a string with a k, M or G suffix as the flag
/// takes (`rate = "2.4M"`); finite.
pub(super) fn config_hz<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }
    let value = match NumberOrText::deserialize(d) {
        Ok(NumberOrText::Number(value)) => value,
        Ok(NumberOrText::Text(text)) => hz(&text).map_err(serde::de::Error::custom)?,
        Err(_) => return Err(serde::de::Error::custom("expected a number of Hz")),
    };
    finite_value(value)
}

/// `config_hz` within `range`.
fn config_in<'de, D: Deserializer<'de>>(
    d: D,
    range: fn(f64) -> Result<f64, String>,
) -> Result<Option<f64>, D::Error> {
    match config_hz(d)? {
        Some(v) => range(v).map(Some).map_err(serde::de::Error::custom),
        None => Ok(None),
    }
}

/// The `rate` key.
pub(super) fn config_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_in(d, rate_in_range)
}

/// The `center-freq` key.
pub(super) fn config_center<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_in(d, center_in_range)
}

/// The `tone` key.
pub(super) fn config_tone<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    config_in(d, tone_in_range)
}
