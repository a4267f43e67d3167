//! The products' flags validated (part of `config`'s `Settings`): `--average`, `--bands`,
//! `--fmin`/`--fmax`, the measurements (`--calibration`, `--levels`, `--peaks`, `--cross`, ...)
//! and the `--scale` they allow.

use super::config::{in_range, usage};
use super::options::Options;
use crate::error::{FftdError, Result};
use crate::fft::Scale;
use crate::frame::FrameSize;
use crate::products::ProductOptions;
use crate::sink::OutputFormat;
use crate::source::channels::ChannelSelect;

/// The measurement flags (`products::measure`); the calibration file is read here.
pub(super) fn measure_options(o: &Options) -> Result<crate::products::measure::MeasureOptions> {
    use crate::products::measure::calibration::CalibrationCurve;
    let calibration_file = match &o.calibration_file {
        Some(path) => Some(CalibrationCurve::load(path).map_err(FftdError::Usage)?),
        None => None,
    };
    // (--calibration's range is checked where it is read: app::units)
    Ok(crate::products::measure::MeasureOptions {
        calibration_db: o.calibration,
        calibration_file,
        weighting: o.weighting,
        unit: o.unit.clone(),
        levels: o.levels,
        peaks: match o.peaks {
            None => 0,
            Some(n) => in_range("--peaks", n, 1, Some(100), "peaks")?,
        },
        distortion: o.distortion,
        tone_hz: o.tone,
        cross: o.cross,
    })
}

/// `--average`, `--bands`, `--fmin`/`--fmax` and the measurements, with the scale they allow.
pub(super) fn products_and_scale(
    o: &mut Options,
    measure: crate::products::measure::MeasureOptions,
    frame: FrameSize,
) -> Result<(ProductOptions, Scale)> {
    if o.average_mode.is_some() && o.average.is_none() {
        return usage(
            "--average-mode needs --average N|DURATION (how many frames or how long a row averages)".into(),
        );
    }
    let products = ProductOptions {
        average: o.average,
        mode: o.average_mode.unwrap_or_default(),
        fmin: o.fmin,
        fmax: o.fmax,
        bands: o.bands.clone(),
        measure,
        // issue 27: with --bands, the alert rules' bands are summed with them
        alert_bands: match o.bands {
            Some(_) => (o.alert.iter())
                .filter_map(|r| match r.reads {
                    crate::alerts::rule::Reads::Band(lo, hi) => Some((lo, hi)),
                    _ => None,
                })
                .collect(),
            None => Vec::new(),
        },
    };
    if let Some(cross) = o.cross {
        check_cross(o, cross)?;
    }
    products.check().map_err(FftdError::Usage)?;
    let bands = products.bands.is_some();
    let columns = (bands, products.measure.column_flags());
    crate::sink::rtl_power::check(o.format, &mut o.scale, columns, &mut o.fftshift)?;
    let scale = o.scale.unwrap_or(Scale::Magnitude);
    let image = o.format == Some(OutputFormat::Png);
    (products.measure)
        .check(scale, bands, image)
        .map_err(FftdError::Usage)?;
    if scale == Scale::Complex && products.in_power_domain() {
        // (a fleet worker would otherwise learn it only from its first block)
        return usage(crate::products::COMPLEX_NEEDS_POWER.into());
    }
    if !products.is_plain() && frame == FrameSize::Whole {
        return usage(
            "--average, --bands, --fmin, --fmax and the measurements (--levels, --weighting, ...) need a fixed --frame N, not whole".into(),
        );
    }
    Ok((products, scale))
}

/// `--cross`'s flags: two channels read, its columns in their own units (csd, coherence, H1 in
/// dB and degrees) and Welch's mean over `--average` frames, so `--scale` and `--average-mode`
/// would be taken and do nothing.
fn check_cross(o: &Options, cross: crate::products::measure::cross::CrossSpec) -> Result<()> {
    if matches!(
        o.channel,
        Some(ChannelSelect::Mix | ChannelSelect::Index(_))
    ) {
        return usage(format!(
            "--cross {cross} reads two channels: leave --channel out or give --channel all"
        ));
    }
    if let Some(scale) = o.scale {
        return usage(format!(
            "--scale {scale} with --cross {cross}: its columns have their own units (csd, coherence, h1_db, h1_deg); leave --scale out"
        ));
    }
    if let Some(mode) = &o.average_mode {
        return usage(format!(
            "--average-mode {mode} with --cross {cross}: the cross-spectra are Welch's mean over --average N frames; leave --average-mode out"
        ));
    }
    Ok(())
}
