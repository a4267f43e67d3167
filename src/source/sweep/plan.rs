//! The hop plan of a sweep (`--sweep LOW:HIGH:BIN`, issue 42): a pure function of the range, the
//! receiver's rate and `--crop`, as rtl_power plans its tunings.
//!
//! - The FFT size `n` is the smallest power of two whose bins (rate / n Hz apart) are no wider than
//!   BIN.
//! - The swept band is a grid of `total_bins` bins from LOW, `step` = rate / n apart, every bin's
//!   frequency below HIGH: K = ceil((HIGH − LOW) / step).
//! - Each hop writes `bins_per_hop` (W) of its n bins, the middle ones: at most n · (1 − crop), so
//!   `--crop` drops the band edges where the receiver's filter rolls off; for a whole-Hz rate, W is
//!   the largest such count whose half spans a whole number of Hz, so each hop's tuner frequency
//!   and its first and last edges (rtl_power's Hz low and high, which heatmap.py reads with int())
//!   are all whole Hz.
//! - Hops tile the grid: H = ceil(K / W) hops, hop i writing W grid bins from floor(i · (K − W) /
//!   (H − 1)): the first flush with LOW, the last with the band's last bin, the starts evenly
//!   spread, so neighbours share a few bins when K is not a multiple of W, no bin outside LOW..HIGH
//!   is written and none is missed. A band of W bins or fewer is one hop of exactly its bins.
//! - A hop's tuner frequency puts its first written bin on the grid: LOW + (first grid bin + W/2)
//!   · step, rounded up to a whole Hz (receivers tune in whole Hz; rows carry the centre actually
//!   tuned, so a hop's bins may lie up to 1 Hz above the grid).

use crate::types::tuning::hop_first_bin;
use std::str::FromStr;

/// `--sweep LOW:HIGH:BIN`: the band to survey and the widest bin wanted, Hz.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepRange {
    pub low: f64,
    pub high: f64,
    pub bin: f64,
}

/// What a `--sweep` value must look like.
const SWEEP_SYNTAX: &str =
    "expected LOW:HIGH:BIN in Hz with k, M or G suffixes, such as 88M:108M:10k";

impl FromStr for SweepRange {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.trim().split(':').collect();
        let [low, high, bin] = parts[..] else {
            return Err(SWEEP_SYNTAX.into());
        };
        let hz = |part: &str| frequency(part).ok_or_else(|| format!("'{part}': {SWEEP_SYNTAX}"));
        let range = SweepRange {
            low: hz(low)?,
            high: hz(high)?,
            bin: hz(bin)?,
        };
        if range.low >= range.high {
            return Err(format!(
                "LOW {} must be below HIGH {}",
                crate::types::shown(range.low),
                crate::types::shown(range.high)
            ));
        }
        if range.bin <= 0.0 {
            return Err("BIN must be above 0 Hz".into());
        }
        Ok(range)
    }
}

/// A frequency as rtl_power writes one: a number with an optional k, M or G suffix, 0 or more.
fn frequency(text: &str) -> Option<f64> {
    crate::types::scaled_hz(text).filter(|hz| *hz >= 0.0)
}

/// `--crop FRACTION|PERCENT%`: the share of each hop's bins left out, half at each edge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Crop(pub f64);

impl FromStr for Crop {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        parse_crop(text).map(Crop)
    }
}

/// `--settle DURATION`: how long after each retune samples are left out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settle {
    pub seconds: f64,
}

impl FromStr for Settle {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!("'{text}': expected a duration from 0 to 60 s, such as 150ms or 0.2s (0: only the one sample where a hop's framing restarts)")
        };
        use crate::types::duration::seconds;
        // a bare number is only allowed for 0
        let seconds = (seconds(text, false))
            .or_else(|| seconds(text, true).filter(|&s| s == 0.0))
            .ok_or_else(bad)?;
        (seconds.is_finite() && (0.0..=60.0).contains(&seconds))
            .then_some(Settle { seconds })
            .ok_or_else(bad)
    }
}

/// `--crop FRACTION` (0.2) or `PERCENT%` (20%): the share of each hop's bins left out, half at
/// each edge; 0 ≤ crop < 1.
pub(crate) fn parse_crop(text: &str) -> Result<f64, String> {
    let bad =
        || format!("'{text}': expected a fraction from 0 up to 1 (0.2) or a percentage (20%)");
    let t = text.trim();
    let value = match t.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
        None => t.parse::<f64>().map_err(|_| bad())?,
    };
    (0.0..1.0).contains(&value).then_some(value).ok_or_else(bad)
}

/// The most hops one sweep may have (a band of 10^6 tunings is a typing error, not a survey).
const MAX_HOPS: usize = 1_000_000;

/// How a sweep tiles its band.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HopPlan {
    /// FFT size.
    pub n: usize,
    /// Hz between bins: rate / n.
    pub step: f64,
    /// Bins of the band, from LOW.
    pub total_bins: usize,
    /// Bins each hop writes (W), the middle ones of its n.
    pub bins_per_hop: usize,
    /// Each hop's tuner frequency, whole Hz, in sweep order (ascending).
    pub centres: Vec<f64>,
}

impl HopPlan {
    /// The plan for `range` on a receiver at `rate` samples/s with `crop`. Errors say what is
    /// wrong in the flags' words (`--sweep`, `--rate`, `--crop`).
    pub(crate) fn new(
        range: &SweepRange,
        rate: f64,
        crop: f64,
        max_n: usize,
    ) -> Result<Self, String> {
        if range.bin > rate {
            return Err(format!(
                "BIN {} is above the receiver's rate ({} Hz, --rate): a bin is at most the whole band one tuning sees",
                crate::types::shown(range.bin),
                crate::types::shown(rate)
            ));
        }
        let wanted = (rate / range.bin).ceil().max(2.0);
        if wanted > max_n as f64 {
            return Err(format!(
                "BIN {} needs frames of {wanted} samples at {} Hz; at most {max_n}",
                crate::types::shown(range.bin),
                crate::types::shown(rate)
            ));
        }
        let n = (wanted as usize).next_power_of_two().min(max_n);
        let step = rate / n as f64;
        let usable = ((n as f64) * (1.0 - crop)).floor() as usize;
        if usable == 0 {
            return Err(format!("--crop {crop} leaves no bin of {n}"));
        }
        let whole = 2 * whole_hz_bins(rate, n);
        let usable = match usable >= whole {
            true => usable - usable % whole,
            false => usable,
        };
        // bins whose frequency LOW + k·step lies below HIGH (a hair of slack for rounding)
        let span = (range.high - range.low) / step;
        let total_bins = ((span - 1e-9).ceil() as usize).max(1);
        let bins_per_hop = usable.min(total_bins);
        let hops = total_bins.div_ceil(bins_per_hop);
        if hops > MAX_HOPS {
            return Err(format!(
                "{hops} hops of {bins_per_hop} bins; at most {MAX_HOPS} (a wider BIN or a narrower band)"
            ));
        }
        let centres = (0..hops)
            .map(|i| {
                let first = hop_first_bin(i, hops, total_bins, bins_per_hop);
                let centre = range.low + (first + bins_per_hop / 2) as f64 * step;
                centre.ceil()
            })
            .collect();
        Ok(HopPlan {
            n,
            step,
            total_bins,
            bins_per_hop,
            centres,
        })
    }

    /// Hops per sweep (at least one).
    pub(crate) fn hops(&self) -> usize {
        self.centres.len()
    }

    /// The offsets from a hop's centre, Hz, of its first and last written bin (its fftshifted
    /// bins n/2 − W/2 … n/2 − W/2 + W − 1).
    pub(crate) fn written_offsets(&self) -> (f64, f64) {
        let below = (self.bins_per_hop / 2) as f64;
        let above = (self.bins_per_hop - 1) as f64 - below;
        (-below * self.step, above * self.step)
    }
}

/// The fewest bins (a power of two) that span a whole number of Hz at `rate` with frames of `n`
/// (a power of two): 1 when the rate is not a whole number of Hz.
fn whole_hz_bins(rate: f64, n: usize) -> usize {
    if rate.fract() != 0.0 || rate < 1.0 || rate > 2f64.powi(53) {
        return 1;
    }
    let twos = (rate as u64).trailing_zeros().min(n.trailing_zeros());
    n >> twos
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_N: usize = 1 << 26;

    fn range(text: &str) -> SweepRange {
        text.parse().expect(text)
    }

    /// Every grid bin a plan writes, with the hops that write it.
    fn written(plan: &HopPlan, low: f64) -> Vec<f64> {
        let (first, _) = plan.written_offsets();
        let mut bins = Vec::new();
        for centre in &plan.centres {
            for k in 0..plan.bins_per_hop {
                bins.push(centre + first + k as f64 * plan.step - low);
            }
        }
        bins
    }

    #[test]
    fn ranges_parse_with_suffixes_and_bad_ones_say_why() {
        assert_eq!(
            range("88M:108M:10k"),
            SweepRange {
                low: 88e6,
                high: 108e6,
                bin: 10e3
            }
        );
        assert_eq!(range("1.5G:1.6G:100").high, 1.6e9);
        for (bad, why) in [
            ("108M:88M:10k", "below HIGH"),
            ("88M:88M:10k", "below HIGH"),
            ("88M:108M:0", "above 0"),
            ("88M:108M", "LOW:HIGH:BIN"),
            ("88X:108M:1k", "'88X'"),
            ("-1:5:1", "'-1'"),
        ] {
            let e = bad.parse::<SweepRange>().expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn crop_takes_fractions_and_percentages() {
        assert_eq!(parse_crop("0.2"), Ok(0.2));
        assert_eq!(parse_crop("25%"), Ok(0.25));
        assert_eq!(parse_crop("0"), Ok(0.0));
        for bad in ["1", "100%", "-0.1", "x"] {
            assert!(parse_crop(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settle_takes_durations() {
        assert_eq!("150ms".parse::<Settle>().map(|s| s.seconds), Ok(0.15));
        assert_eq!("0".parse::<Settle>().map(|s| s.seconds), Ok(0.0));
        assert_eq!("0.5s".parse::<Settle>().map(|s| s.seconds), Ok(0.5));
        for bad in ["5", "-1s", "1h", "x"] {
            assert!(bad.parse::<Settle>().is_err(), "{bad}");
        }
    }

    #[test]
    fn fm_band_as_rtl_power_plans_it() {
        // rtl_power -f 88M:108M:10k -c 20% at 2.048 MS/s: 256-point FFTs of 8 kHz bins
        let plan = HopPlan::new(&range("88M:108M:10k"), 2_048_000.0, 0.2, MAX_N).expect("plan");
        assert_eq!((plan.n, plan.step), (256, 8000.0));
        assert_eq!((plan.total_bins, plan.bins_per_hop), (2500, 204));
        assert_eq!(plan.hops(), 13);
        assert_eq!(plan.centres[0], 88e6 + 102.0 * 8000.0);
    }

    #[test]
    fn hops_tile_the_band_without_gaps_or_bins_outside() {
        for (text, rate, crop) in [
            ("88M:108M:10k", 2_048_000.0, 0.2),
            ("100M:100.5M:1k", 2_400_000.0, 0.0),
            ("24M:1.7G:1M", 3_200_000.0, 0.5),
            ("433.05M:434.79M:3.3k", 1_024_000.0, 0.3),
            ("1000:1001:1", 48_000.0, 0.1),
        ] {
            let r = range(text);
            let plan = HopPlan::new(&r, rate, crop, MAX_N).expect(text);
            assert!(plan.step <= r.bin, "{text}");
            assert!(
                plan.bins_per_hop as f64 <= plan.n as f64 * (1.0 - crop),
                "{text}"
            );
            let mut bins = written(&plan, r.low);
            bins.sort_by(f64::total_cmp);
            bins.dedup_by(|a, b| (*a - *b).abs() < 0.5);
            // every grid bin once (within the whole-Hz tuning), nothing below LOW or from HIGH on
            assert_eq!(bins.len(), plan.total_bins, "{text}");
            for (k, f) in bins.iter().enumerate() {
                let off = f - k as f64 * plan.step;
                assert!(
                    (0.0..1.0).contains(&off),
                    "{text}: bin {k} off the grid by {off} Hz"
                );
            }
            assert!(bins[bins.len() - 1] + r.low < r.high + 1.0, "{text}");
        }
    }

    #[test]
    fn hop_edges_are_whole_hz_when_the_rate_is() {
        // 250 kS/s in 512-point frames: bins of 488.28125 Hz, 64 of them span 31250 Hz
        let r = range("7M:7.6M:500");
        let plan = HopPlan::new(&r, 250_000.0, 0.2, MAX_N).expect("plan");
        assert_eq!((plan.n, plan.bins_per_hop, plan.hops()), (512, 384, 4));
        let (first, last) = plan.written_offsets();
        for centre in &plan.centres {
            assert_eq!(centre.fract(), 0.0);
            assert_eq!((centre + first).fract(), 0.0, "Hz low");
            assert_eq!((centre + last + plan.step).fract(), 0.0, "Hz high");
        }
        assert_eq!(plan.centres[0] + first, 7e6);
    }

    #[test]
    fn bad_plans_name_the_flag() {
        let r = range("88M:108M:3M");
        let e = HopPlan::new(&r, 2_048_000.0, 0.0, MAX_N).expect_err("bin above rate");
        assert!(e.contains("above the receiver's rate"), "{e}");
        let e = HopPlan::new(&range("88M:108M:0.001"), 2e6, 0.0, MAX_N).expect_err("tiny bin");
        assert!(e.contains("at most"), "{e}");
        let e = HopPlan::new(&range("1k:2k:1k"), 2e3, 0.99, MAX_N).expect_err("crop");
        assert!(e.contains("--crop"), "{e}");
        let e = HopPlan::new(&range("1:1e15:1M"), 2_048_000.0, 0.0, MAX_N).expect_err("huge");
        assert!(e.contains("at most 1000000"), "{e}");
    }
}
