//! `--format rtl-power`: rows as rtl_power writes them, for the tools that read its CSV
//! (heatmap.py, rtl-power-fftw's plotters, pandas): one row per frame, or per `--average`
//! interval,
//!
//! `date, time, Hz low, Hz high, Hz step, samples, dB, dB, …`
//!
//! - date and time: `YYYY-MM-DD, HH:MM:SS` in UTC, of the row's first sample: the `core:datetime`
//!   of the latest SigMF capture at or before it that has one, plus the samples since that
//!   capture began, else the time the run
//!   started plus the row's `time_s` (a live pipe's rows thus carry the time they were taken);
//! - Hz low: the frequency of the first bin (centre + lowest offset; the row's own capture's
//!   centre for a retuned SigMF recording), Hz high: Hz low + bins × Hz step, Hz step: rate / N;
//! - samples: the FFTs the row averages (1 without `--average`; fewer in a final partial
//!   interval), which rtl_power counts there too;
//! - then one value per bin, lowest frequency first, in dB (`--scale db`, the power averaged
//!   before the dB with `--average`), each the shortest decimal that reads back to the value.
//!
//! The format implies `--scale db` and `--fftshift` (bins in ascending frequency); bands and
//! other scales are refused.

use super::{Encoder, OutputFormat, Sample, SpectrumRow};
use crate::error::{FftdError, Result};
use crate::fft::Scale;
use crate::types::number::{push, Syntax};
use crate::types::shown;
use crate::types::InputKind;
use std::io::Write;

pub(crate) struct RtlPowerEncoder {
    /// When the run started, s since 1970 (UTC): rows without a recorded time count from it.
    pub started_s: f64,
}

impl RtlPowerEncoder {
    pub(crate) fn new() -> Self {
        let started_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        RtlPowerEncoder { started_s }
    }

    /// When the row's first sample was taken, s since 1970 (UTC).
    fn row_epoch<T>(&self, row: &SpectrumRow<'_, T>) -> f64 {
        let stream = row.stream;
        let sample = (row.time_s * stream.rate).round().max(0.0) as u64;
        // the latest capture at or before the row that says when it began
        let recorded = stream.tuning.as_ref().and_then(|t| {
            t.captures
                .iter()
                .rev()
                .filter(|c| c.sample_start <= sample)
                .find_map(|c| {
                    let at = parse_iso8601(c.datetime.as_deref()?)?;
                    Some(at + (sample - c.sample_start) as f64 / stream.rate)
                })
        });
        recorded.unwrap_or(self.started_s + row.time_s)
    }
}

impl Default for RtlPowerEncoder {
    fn default() -> Self {
        Self::new()
    }
}

/// `--format rtl-power`'s demands of the other options: `--scale db` (set when not given),
/// no bands, `--fftshift` (set).
pub(crate) fn check(
    format: Option<OutputFormat>,
    scale: &mut Option<Scale>,
    (bands, column_flags): (bool, String),
    fftshift: &mut bool,
) -> Result<()> {
    if format != Some(OutputFormat::RtlPower) {
        return Ok(());
    }
    if !column_flags.is_empty() {
        return Err(FftdError::Usage(format!(
            "--format rtl-power writes dB bins only: {column_flags} go to text, csv, ndjson, f32 or npy"
        )));
    }
    match scale {
        None | Some(Scale::Db) => *scale = Some(Scale::Db),
        Some(other) => {
            return Err(FftdError::Usage(format!(
                "--format rtl-power writes dB: leave out --scale {} (--scale db is its default)",
                other.name()
            )))
        }
    }
    if bands {
        return Err(FftdError::Usage(
            "--format rtl-power writes evenly spaced bins: leave out --bands".into(),
        ));
    }
    *fftshift = true;
    Ok(())
}

impl<T: Sample> Encoder<T> for RtlPowerEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        let stream = row.stream;
        let n = row.n;
        let step = stream.rate / n as f64;
        // the lowest bin's offset from the centre (bins are in ascending order)
        let lowest = match (&stream.columns, stream.kind) {
            (Some(columns), _) => columns.first().copied().unwrap_or(0.0) - stream.label_center(),
            (None, InputKind::Real) => 0.0,
            (None, InputKind::Complex) => -((n / 2) as f64) * step,
        };
        let center = stream
            .row_center(row.time_s)
            .unwrap_or(stream.label_center());
        let low = center + lowest;
        let high = low + row.values.len() as f64 * step;
        push_datetime(out, self.row_epoch(row));
        // writing into a Vec cannot fail
        let _ = write!(out, ", {}, {}, ", shown(low), shown(high));
        push(out, step, Syntax::Text);
        let _ = write!(out, ", {}", row.frames);
        for v in row.values {
            out.extend_from_slice(b", ");
            push(out, *v, Syntax::Text);
        }
        out.push(b'\n');
    }
}

/// Appends `YYYY-MM-DD, HH:MM:SS` (UTC) of `epoch_s` seconds since 1970.
fn push_datetime(out: &mut Vec<u8>, epoch_s: f64) {
    let secs = epoch_s.floor() as i64;
    let (days, day_s) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02}, {:02}:{:02}:{:02}",
        day_s / 3600,
        day_s / 60 % 60,
        day_s % 60
    );
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

/// Seconds since 1970 of a SigMF `core:datetime` (`YYYY-MM-DDTHH:MM:SS[.fff]Z`, UTC); None for
/// anything else.
pub(crate) fn parse_iso8601(text: &str) -> Option<f64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (date.next()??, date.next()??, date.next()??);
    let mut time = time.splitn(3, ':');
    let (h, mi) = (
        time.next()?.parse::<i64>().ok()?,
        time.next()?.parse::<i64>().ok()?,
    );
    let s: f64 = time.next()?.parse().ok()?;
    let valid = (1..=12).contains(&m)
        && (1..=31).contains(&d)
        && (0..24).contains(&h)
        && (0..60).contains(&mi)
        && (0.0..61.0).contains(&s);
    valid.then(|| {
        let days = days_from_civil(y, m as u32, d as u32);
        (days * 86_400 + h * 3600 + mi * 60) as f64 + s
    })
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
        assert_eq!(
            parse_iso8601("2024-02-29T12:34:56.5Z"),
            Some(1_709_210_096.5)
        );
        let mut out = Vec::new();
        push_datetime(&mut out, 1_709_210_096.5);
        assert_eq!(out, b"2024-02-29, 12:34:56");
        assert_eq!(parse_iso8601("2024-02-29 12:34:56"), None);
    }
}
