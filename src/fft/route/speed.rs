//! How long a lane is expected to take for a batch (`LaneSpeed`): from a device's calibration,
//! from the end-to-end rates `auto`'s record keeps, or the same for every lane when nothing is
//! measured. `super::rank` orders the lanes by it for every batch.

use crate::fft::calibrate::Calibration;
use std::sync::Arc;

/// How long a lane is expected to take for a batch, to spread batches in proportion to speed.
#[derive(Clone, Debug)]
pub(crate) enum LaneSpeed {
    /// Nothing measured: the same time per unit of work (n log2 n per frame) on every lane,
    /// so equal shares (the dispatcher's backlog still favours whichever lane finishes first).
    Even,
    /// From a calibration of this device (`calibrate`).
    Measured(Arc<Calibration>, SpeedSide),
    /// An end-to-end rate this way of running the job delivered alone (`record`), in
    /// input samples per second: lanes share batches in proportion to their rates.
    Rate(f64),
}

/// Which side of a calibration a lane runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpeedSide {
    /// An OpenCL lane, host to host.
    OpenCl,
    /// The CPU engines, `workers` of them in parallel.
    Cpu { workers: usize },
}

impl LaneSpeed {
    /// A lane of `workers` CPU engines, timed by `cal`'s CPU side.
    pub(crate) fn cpu(cal: Arc<Calibration>, workers: usize) -> Self {
        LaneSpeed::Measured(cal, SpeedSide::Cpu { workers })
    }

    /// Predicted seconds for the lane to get through a batch of `frames` frames of size `n`.
    pub(crate) fn seconds(&self, n: usize, frames: usize) -> f64 {
        match self {
            LaneSpeed::Even => {
                let n = n.max(2) as f64;
                frames as f64 * n * n.log2() * 1e-9
            }
            LaneSpeed::Measured(cal, side) => {
                let (cpu, gpu) = cal.predict(n, frames);
                match side {
                    SpeedSide::OpenCl => gpu,
                    SpeedSide::Cpu { workers } => cpu / (*workers).max(1) as f64,
                }
            }
            // frames of n samples as samples of input (the rates count input samples)
            LaneSpeed::Rate(rate) => (frames * n.max(1)) as f64 / rate.max(f64::MIN_POSITIVE),
        }
    }

    /// Whether `self` and `other` can be compared (both measured the same way).
    pub(crate) fn comparable(&self, other: &LaneSpeed) -> bool {
        matches!(
            (self, other),
            (LaneSpeed::Measured(..), LaneSpeed::Measured(..))
                | (LaneSpeed::Rate(_), LaneSpeed::Rate(_))
        )
    }
}
