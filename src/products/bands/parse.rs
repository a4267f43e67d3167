//! `--bands` read from text and written back: mel and octave specs with their options
//! (one-line errors naming the value).

use super::{BandSpec, MelBands, MelNorm, MelScale, OctaveBands, OctaveFraction};
use crate::types::{escaped, shown};
use std::fmt;
use std::str::FromStr;

// ---------------------------------------------------------------------------------------------
// Parsing `--bands`
// ---------------------------------------------------------------------------------------------

/// What `--bands` accepts, for error messages.
const BANDS_SYNTAX: &str = "mel:N[,htk][,norm=slaney|none][,fmin=HZ][,fmax=HZ], \
                            octave[:fmin=HZ,fmax=HZ] or third-octave[:fmin=HZ,fmax=HZ]";

impl FromStr for BandSpec {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, String> {
        parse_bands(value).map_err(|why| one_line(&format!("--bands {value}: {why}")))
    }
}

fn parse_bands(value: &str) -> Result<BandSpec, String> {
    let (kind, options) = match value.split_once(':') {
        Some((kind, options)) => (kind, Some(options)),
        None => (value, None),
    };
    match kind {
        "mel" => parse_mel(options).map(BandSpec::Mel),
        "octave" => parse_octave(OctaveFraction::Octave, options).map(BandSpec::Octave),
        "third-octave" => parse_octave(OctaveFraction::ThirdOctave, options).map(BandSpec::Octave),
        _ => Err(format!("expected {BANDS_SYNTAX}")),
    }
}

/// `N[,option]*` after `mel:`.
fn parse_mel(options: Option<&str>) -> Result<MelBands, String> {
    let Some(options) = options else {
        return Err("give the number of mel bands, e.g. mel:128".into());
    };
    let mut items = options.split(',');
    let count = parse_mel_count(items.next().unwrap_or_default())?;
    let mut mel = MelBands {
        count,
        scale: MelScale::Slaney,
        norm: MelNorm::Slaney,
        fmin_hz: 0.0,
        fmax_hz: None,
    };
    let mut seen = Vec::new();
    for item in items {
        let (key, setting) = split_option(item);
        note_first_use(&mut seen, key)?;
        match (key, setting) {
            ("htk", None) => mel.scale = MelScale::Htk,
            ("norm", Some("slaney")) => mel.norm = MelNorm::Slaney,
            ("norm", Some("none")) => mel.norm = MelNorm::None,
            ("norm", Some(other)) => {
                return Err(format!(
                    "norm={other}: expected norm=slaney (the default) or norm=none"
                ))
            }
            ("fmin", Some(hz)) => mel.fmin_hz = parse_hz("fmin", hz)?,
            ("fmax", Some(hz)) => mel.fmax_hz = Some(parse_hz("fmax", hz)?),
            _ => {
                return Err(format!(
                "unknown mel option '{item}': expected htk, norm=slaney|none, fmin=HZ or fmax=HZ"
            ))
            }
        }
    }
    check_fmin_below_fmax(Some(mel.fmin_hz), mel.fmax_hz)?;
    Ok(mel)
}

fn parse_mel_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the number of mel bands must be at least 1".into()),
        Ok(count) => Ok(count),
        Err(_) => Err(format!(
            "'{text}' is not a number of mel bands: expected mel:N with N >= 1, e.g. mel:128"
        )),
    }
}

/// `[fmin=HZ][,fmax=HZ]` after `octave:` or `third-octave:`.
fn parse_octave(fraction: OctaveFraction, options: Option<&str>) -> Result<OctaveBands, String> {
    let mut bands = OctaveBands {
        fraction,
        fmin_hz: None,
        fmax_hz: None,
    };
    let mut seen = Vec::new();
    for item in options.map(|o| o.split(',')).into_iter().flatten() {
        let (key, setting) = split_option(item);
        note_first_use(&mut seen, key)?;
        match (key, setting) {
            ("fmin", Some(hz)) => bands.fmin_hz = Some(parse_hz("fmin", hz)?),
            ("fmax", Some(hz)) => bands.fmax_hz = Some(parse_hz("fmax", hz)?),
            _ => {
                return Err(format!(
                "unknown {} option '{item}': expected fmin=HZ or fmax=HZ (mid-band frequencies)",
                fraction.name()
            ))
            }
        }
    }
    check_fmin_below_fmax(bands.fmin_hz, bands.fmax_hz)?;
    Ok(bands)
}

/// `key=setting` → (key, Some(setting)); `key` → (key, None).
fn split_option(item: &str) -> (&str, Option<&str>) {
    match item.split_once('=') {
        Some((key, setting)) => (key, Some(setting)),
        None => (item, None),
    }
}

/// Fails when `key` was given before (an empty key is reported as such).
fn note_first_use<'a>(seen: &mut Vec<&'a str>, key: &'a str) -> Result<(), String> {
    if key.is_empty() {
        return Err("empty option (two commas, or a comma at the end?)".into());
    }
    if seen.contains(&key) {
        return Err(format!("{key} is given twice"));
    }
    seen.push(key);
    Ok(())
}

/// A frequency option: a finite number of Hz, at least 0, with an optional k, M or G (`1.5k`)
/// as every frequency flag takes it.
pub(super) fn parse_hz(name: &str, text: &str) -> Result<f64, String> {
    match crate::types::scaled_hz(text) {
        Some(hz) if hz >= 0.0 => Ok(hz),
        _ => Err(format!(
            "{name}={text}: expected a frequency in Hz, a number >= 0 with an optional k, M or G (1.5k)"
        )),
    }
}

pub(super) fn check_fmin_below_fmax(
    fmin_hz: Option<f64>,
    fmax_hz: Option<f64>,
) -> Result<(), String> {
    match (fmin_hz, fmax_hz) {
        (Some(fmin), Some(fmax)) if fmin >= fmax => Err(format!(
            "fmin={} Hz is not below fmax={} Hz",
            shown(fmin),
            shown(fmax)
        )),
        _ => Ok(()),
    }
}

/// The message with control characters (line breaks among them) escaped, so it stays on one
/// line whatever the user typed.
pub(super) fn one_line(message: &str) -> String {
    escaped(message).into_owned()
}

impl fmt::Display for BandSpec {
    /// The canonical `--bands` value (parses back to the same spec).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BandSpec::Mel(mel) => write_mel(mel, f),
            BandSpec::Octave(bands) => write_octave(bands, f),
        }
    }
}

fn write_mel(mel: &MelBands, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "mel:{}", mel.count)?;
    if mel.scale == MelScale::Htk {
        f.write_str(",htk")?;
    }
    if mel.norm == MelNorm::None {
        f.write_str(",norm=none")?;
    }
    if mel.fmin_hz != 0.0 {
        write!(f, ",fmin={}", shown(mel.fmin_hz))?;
    }
    if let Some(fmax) = mel.fmax_hz {
        write!(f, ",fmax={}", shown(fmax))?;
    }
    Ok(())
}

fn write_octave(bands: &OctaveBands, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(bands.fraction.name())?;
    let limits: Vec<String> = [("fmin", bands.fmin_hz), ("fmax", bands.fmax_hz)]
        .into_iter()
        .filter_map(|(name, hz)| hz.map(|hz| format!("{name}={}", shown(hz))))
        .collect();
    if !limits.is_empty() {
        write!(f, ":{}", limits.join(","))?;
    }
    Ok(())
}
