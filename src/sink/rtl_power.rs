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
//!   centre for a retuned SigMF recording), Hz high: Hz low + bins × Hz step, both rounded to
//!   whole Hz as rtl_power writes them (`%i`; heatmap.py reads them with `int()`), Hz step:
//!   rate / N;
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
use crate::types::utc_time::{self, civil_from_days, UtcTime};
use crate::types::InputKind;
use std::io::Write;

pub(crate) struct RtlPowerEncoder {
    /// When the run started: rows without a recorded time count from it.
    pub started: UtcTime,
}

impl RtlPowerEncoder {
    pub(crate) fn new() -> Self {
        let started_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        RtlPowerEncoder {
            started: UtcTime::of_epoch(started_s),
        }
    }

    /// When the row's first sample was taken.
    fn row_time<T>(&self, row: &SpectrumRow<'_, T>) -> UtcTime {
        let stream = row.stream;
        let sample = (row.time_s * stream.rate).round().max(0.0) as u64;
        // the latest capture at or before the row that says when it began
        let recorded = stream.tuning.as_ref().and_then(|t| {
            t.captures
                .iter()
                .rev()
                .filter(|c| c.sample_start <= sample)
                .find_map(|c| {
                    let at = utc_time::parse(c.datetime.as_deref()?)?;
                    Some(at.plus((sample - c.sample_start) as f64 / stream.rate))
                })
        });
        recorded.unwrap_or(self.started.plus(row.time_s))
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
        push_datetime(out, self.row_time(row));
        // whole Hz, as rtl_power writes them (`%i`) and its readers take them (`int()`)
        let _ = write!(out, ", {}, {}, ", shown(low.round()), shown(high.round()));
        push(out, step, Syntax::Text);
        let _ = write!(out, ", {}", row.frames);
        for v in row.values {
            out.extend_from_slice(b", ");
            push(out, *v, Syntax::Text);
        }
        out.push(b'\n');
    }
}

/// Appends `YYYY-MM-DD, HH:MM:SS` (UTC) of `at`, its fraction of a second left out.
fn push_datetime(out: &mut Vec<u8>, at: UtcTime) {
    let secs = at.secs;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_written_to_its_second() {
        let mut out = Vec::new();
        push_datetime(&mut out, UtcTime::of_epoch(1_709_210_096.5));
        assert_eq!(out, b"2024-02-29, 12:34:56");
    }
}
