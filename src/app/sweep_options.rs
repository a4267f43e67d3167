//! `--sweep` and its flags (issue 42), checked and turned into the source's `SweepSchedule`. A
//! sweep decides what other flags would otherwise say, so they are refused beside it: the frame
//! (the power of two that BIN asks for), the bins each row keeps (each hop's middle ones, as
//! `--fmin`/`--fmax` around its centre), `--fftshift` (bins in ascending frequency), the centre
//! (each hop's own) and one row per hop (`--average` of the hop's frames).

use super::config::usage;
use super::options::Options;
use crate::error::{FftdError, Result};
use crate::frame::{FrameSize, Tail};
use crate::products::average::AverageSpec;
use crate::source::rtl_tcp;
use crate::source::soapy;
use crate::source::sweep::plan::HopPlan;
use crate::source::sweep::SweepSchedule;

/// The sweep the options ask for, with the options it decides set; None without `--sweep`.
pub(super) fn resolve(o: &mut Options) -> Result<Option<SweepSchedule>> {
    let sweeps = match o.sweeps {
        None => None,
        Some(n) if n >= 1 => Some(n as u64),
        Some(n) => {
            return usage(format!(
                "--sweeps {n}: must be a whole number of sweeps, at least 1"
            ))
        }
    };
    let Some(range) = o.sweep else {
        let given = [
            (o.crop.is_some(), "--crop"),
            (o.settle.is_some(), "--settle"),
            (o.sweeps.is_some(), "--sweeps"),
        ];
        return match given.iter().find(|g| g.0) {
            Some((_, flag)) => usage(format!("{flag} goes with --sweep LOW:HIGH:BIN")),
            None => Ok(None),
        };
    };
    let receiver = receiver_defaults(o)?;
    let rate = o.rate.unwrap_or(receiver.rate);
    if !(rate.is_finite() && rate > 0.0) {
        return Ok(None); // `source_spec` names the bad --rate
    }
    let text = format!(
        "{}:{}:{}",
        crate::types::shown(range.low),
        crate::types::shown(range.high),
        crate::types::shown(range.bin)
    );
    let crop = o.crop.map_or(0.0, |c| c.0);
    let plan = HopPlan::new(&range, rate, crop, crate::limits::MAX_FRAME_SAMPLES)
        .map_err(|e| FftdError::Usage(format!("--sweep {text}: {e}")))?;
    if rtl_tcp::is_rtl_tcp(&o.file[0]) {
        for &centre in &plan.centres {
            rtl_tcp::whole_hz("--sweep", centre).map_err(|_| {
                FftdError::Usage(format!(
                    "--sweep {text}: a hop would tune to {} Hz; rtl_tcp tunes whole Hz from 1 to {}",
                    crate::types::shown(centre),
                    u32::MAX
                ))
            })?;
        }
    }
    let n = plan.n;
    let hop = o.hop.filter(|&h| h >= 1).map_or(n, |h| h as usize);
    let frames = frames_per_hop(o.average, rate, n, hop);
    // at least one sample: each hop's framing restarts where its samples begin
    let settle = match o.settle {
        Some(s) => (s.seconds * rate).ceil() as u64,
        None => (receiver.settle)(rate),
    }
    .max(1);
    let hop_samples = ((frames - 1) as u64)
        .checked_mul(hop as u64)
        .and_then(|s| s.checked_add(n as u64))
        .filter(|&s| s.checked_add(settle).is_some())
        .ok_or_else(|| {
            FftdError::Usage(format!(
                "--average: {frames} frames of {n} samples per hop is more than a sweep can count"
            ))
        })?;
    let first_hop_s = (settle + hop_samples) as f64 / rate;
    if let Some(d) = o.duration.filter(|&d| d < first_hop_s) {
        return usage(format!(
            "--duration {} s: a hop of this sweep takes {} s (its settle, then {frames} × {n} samples), so no row would be written: give at least that",
            crate::types::shown(d),
            crate::types::shown((first_hop_s * 1e3).ceil() / 1e3)
        ));
    }
    decide_options(o, &plan, frames, settle + hop_samples);
    Ok(Some(SweepSchedule {
        hop_samples,
        plan,
        settle,
        sweeps,
    }))
}

/// What a sweep's receiver takes when the options do not say.
struct ReceiverDefaults {
    /// Samples per second.
    rate: f64,
    /// The settle after each retune, in samples at a rate.
    settle: fn(f64) -> u64,
}

/// The sweep's receiver (one `rtl_tcp://` or `soapy://` input) and its defaults, after refusing
/// the flags a sweep decides itself.
fn receiver_defaults(o: &Options) -> Result<ReceiverDefaults> {
    let one = (o.mic.is_none() && o.file.len() == 1).then(|| o.file[0].as_str());
    let defaults = match one {
        Some(p) if rtl_tcp::is_rtl_tcp(p) => ReceiverDefaults {
            rate: rtl_tcp::DEFAULT_RATE,
            settle: rtl_tcp::default_settle_samples,
        },
        Some(p) if soapy::is_soapy(p) => ReceiverDefaults {
            rate: soapy::DEFAULT_RATE,
            settle: soapy::default_settle_samples,
        },
        _ => {
            return usage(
                "--sweep retunes a receiver: give one --file rtl_tcp://HOST:PORT or --file soapy://ARGS (a file or pipe holds one tuning)".into(),
            )
        }
    };
    let decided = [
        (o.frame.is_some(), "--frame (BIN sets the frame)"),
        (
            o.fmin.is_some() || o.fmax.is_some(),
            "--fmin/--fmax (LOW:HIGH sets the band)",
        ),
        (
            o.center_freq.is_some(),
            "--center-freq (each hop has its own)",
        ),
        (o.bands.is_some(), "--bands"),
        (o.cross.is_some(), "--cross"),
        (
            o.tail.is_some(),
            "--tail (a hop's frames are whole: a partial one is left out)",
        ),
    ];
    if let Some((_, flag)) = decided.iter().find(|d| d.0) {
        return usage(format!("--sweep goes without {flag}"));
    }
    Ok(defaults)
}

/// Frames each hop is integrated over: `--average N`, the frames that fit in `--average
/// DURATION` (at least one), else one.
fn frames_per_hop(average: Option<AverageSpec>, rate: f64, n: usize, hop: usize) -> usize {
    match average {
        None => 1,
        Some(AverageSpec::Frames(frames)) => frames,
        Some(AverageSpec::PerHop { frames, .. }) => frames,
        Some(AverageSpec::Interval { nanos }) => {
            let samples = nanos as f64 * 1e-9 * rate;
            let fit = ((samples - n as f64) / hop as f64).floor() + 1.0;
            fit.max(1.0) as usize
        }
    }
}

/// Sets the options a sweep decides: its frame, ascending bins, the middle bins of each hop
/// (offsets from the hop's centre; absolute for a band of one hop, which is labelled at its one
/// centre), and one row per hop (its frames, in its `slot` of the stream).
fn decide_options(o: &mut Options, plan: &HopPlan, frames: usize, slot: u64) {
    o.frame = Some(FrameSize::Fixed(plan.n));
    o.fftshift = true;
    // a hop cut short (the run's end, a lost receiver) gives its whole frames only
    o.tail = Some(Tail::Drop);
    if frames > 1 || o.average.is_some() {
        o.average = Some(AverageSpec::PerHop {
            frames,
            slot,
            hops: plan.hops(),
        });
    }
    let (lowest, highest) = plan.written_offsets();
    let base = if plan.hops() == 1 {
        plan.centres[0]
    } else {
        0.0
    };
    // half a bin of slack each side: the selection is of bins, not of edges
    o.fmin = Some(base + lowest - plan.step / 2.0);
    o.fmax = Some(base + highest + plan.step / 2.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_integrates_the_frames_that_fit() {
        let one_second = Some(AverageSpec::Interval {
            nanos: 1_000_000_000,
        });
        assert_eq!(frames_per_hop(one_second, 2_048_000.0, 256, 256), 8000);
        assert_eq!(frames_per_hop(one_second, 1000.0, 4096, 4096), 1);
        assert_eq!(frames_per_hop(Some(AverageSpec::Frames(5)), 1.0, 8, 8), 5);
        assert_eq!(frames_per_hop(None, 1.0, 8, 8), 1);
    }
}
