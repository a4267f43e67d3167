//! `--levels`: a sound-level meter over each row's frames. Each frame brings its weighted,
//! calibrated total power p (mean square re the calibration). Over a row's frames:
//! - `leq`: 10·log10 of the mean of p (equivalent continuous level);
//! - Fast (τ = 125 ms) and Slow (τ = 1 s) exponential time weighting, stepped once per frame:
//!   y ← a·y + (1 − a)·p with a = exp(−Δt/τ), Δt = hop / rate, started at the stream's first
//!   frame's p (not from silence) and never reset; `lfmax`/`lfmin` and `lsmax`/`lsmin` are the
//!   highest and lowest y over the row's frames. The time weighting follows IEC 61672-1 where
//!   frames are much shorter than τ (a hop of 2048 at 48 kHz is 43 ms).
//!
//! Levels are dB in the run's unit (floored at −240 dB); a NaN power makes them NaN.

use crate::fft::{max_or_nan, min_or_nan};

/// The Fast time constant, seconds.
pub(crate) const FAST_S: f64 = 0.125;
/// The Slow time constant, seconds.
pub(crate) const SLOW_S: f64 = 1.0;

/// One stream's meter.
#[derive(Clone, Debug)]
pub(crate) struct LevelMeter {
    /// Decay per frame of Fast and Slow.
    decay: [f64; 2],
    /// Fast and Slow's state (None before the first frame).
    weighted: Option<[f64; 2]>,
    /// Σp and frames of the open row.
    sum: f64,
    frames: usize,
    /// Highest and lowest Fast and Slow in the open row: [fmax, fmin, smax, smin].
    extremes: [f64; 4],
}

impl LevelMeter {
    /// A meter stepped every `frame_step_s` seconds.
    pub(crate) fn new(frame_step_s: f64) -> Self {
        LevelMeter {
            decay: [
                (-frame_step_s / FAST_S).exp(),
                (-frame_step_s / SLOW_S).exp(),
            ],
            weighted: None,
            sum: 0.0,
            frames: 0,
            extremes: Self::open_extremes(),
        }
    }

    fn open_extremes() -> [f64; 4] {
        [
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
        ]
    }

    /// Adds a frame's total power.
    pub(crate) fn push(&mut self, power: f64) {
        let y = match self.weighted {
            None => [power, power],
            Some(y) => [0, 1].map(|i| self.decay[i] * y[i] + (1.0 - self.decay[i]) * power),
        };
        self.weighted = Some(y);
        self.sum += power;
        self.frames += 1;
        let e = &mut self.extremes;
        e[0] = max_or_nan(e[0], y[0]);
        e[1] = min_or_nan(e[1], y[0]);
        e[2] = max_or_nan(e[2], y[1]);
        e[3] = min_or_nan(e[3], y[1]);
    }

    /// The open row's levels in dB, [leq, lfmax, lfmin, lsmax, lsmin]; starts the next row.
    pub(crate) fn take(&mut self) -> [f64; 5] {
        let leq = match self.frames {
            0 => f64::NAN,
            n => self.sum / n as f64,
        };
        let [fmax, fmin, smax, smin] = self.extremes;
        self.sum = 0.0;
        self.frames = 0;
        self.extremes = Self::open_extremes();
        [leq, fmax, fmin, smax, smin].map(|p| {
            if p.is_finite() || p.is_nan() {
                super::db(p)
            } else {
                f64::NAN
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_level_reads_the_same_everywhere_and_a_step_moves_fast_before_slow() {
        let mut meter = LevelMeter::new(0.01);
        for _ in 0..100 {
            meter.push(1e-2);
        }
        let r = meter.take();
        for v in r {
            assert!((v + 20.0).abs() < 1e-9, "{r:?}");
        }
        // 2 s at -40 dB after -20 dB: Leq of the row is -40; Fast (16 τ) reaches it, Slow (2 τ)
        // lags at 10·log10(1e-4 + (1e-2 − 1e-4)·e^−2) ≈ −28.4 dB
        for _ in 0..200 {
            meter.push(1e-4);
        }
        let [leq, fmax, fmin, smax, smin] = meter.take();
        assert!((leq + 40.0).abs() < 1e-9);
        assert!(fmin < smin && fmin < -39.0 && smin > -30.0, "{fmin} {smin}");
        assert!(fmax < -20.0 && smax < -20.0 && smax > fmax, "{fmax} {smax}");
    }
}
