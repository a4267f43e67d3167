//! Where a recording was tuned: the centre frequency of each capture (SigMF `captures`: from
//! `core:sample_start` on, the radio was at `core:frequency`), or the one `--center-freq`.
//!
//! How outputs show it (docs/radio.md):
//! - one centre for the whole input: bins are labelled in absolute frequency (centre + offset)
//!   in csv headers, `--meta`, the PNG axis and the live view; ndjson rows carry `center_hz`.
//! - captures at different centres (a retuned recording): one set of labels cannot be right for
//!   every row, so labels stay offsets from the centre (baseband Hz) and every row carries its
//!   capture's centre: ndjson `center_hz`, a csv `center_hz` column after `time_s`, rtl-power's
//!   Hz low/high; `--meta` lists the captures. A row's capture is the one holding its first
//!   sample (an averaged row: its interval's first sample).
//! - a sweep (`--sweep`, `source::sweep`): the captures of one sweep, repeating every `period`
//!   samples; labelled as a retuned recording.

use std::sync::Arc;

/// One capture: from sample `sample_start` on, the radio was at `frequency` Hz (None: unknown).
#[derive(Clone, Debug, PartialEq)]
pub struct Capture {
    pub sample_start: u64,
    pub frequency: Option<f64>,
    /// SigMF `core:datetime` (ISO 8601 UTC) of the capture's first sample, when given.
    pub datetime: Option<String>,
}

/// The captures of one input, in sample order (the first starts at sample 0 or later).
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    pub captures: Vec<Capture>,
    /// A sweep's: the captures repeat every this many samples (sample s is at s mod period).
    pub period: Option<u64>,
    /// A sweep's: the grid of bins its hops' rows lie on (the live view draws the whole band).
    pub band: Option<BandGrid>,
}

/// The bins of a swept band: `bins` bins `step` Hz apart from `low` Hz, written by `hops` hops
/// of `per_hop` bins each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandGrid {
    pub low: f64,
    pub step: f64,
    pub bins: usize,
    pub hops: usize,
    pub per_hop: usize,
}

/// The first of the `width` bins hop `hop` of `hops` writes of a band of `bins`: the first
/// flush with the band's start, the last with its end, the starts evenly spread between.
pub(crate) fn hop_first_bin(hop: usize, hops: usize, bins: usize, width: usize) -> usize {
    match hops {
        0 | 1 => 0,
        _ => hop * (bins - width) / (hops - 1),
    }
}

impl BandGrid {
    /// Each bin's frequency, Hz.
    pub(crate) fn frequencies(&self) -> Vec<f64> {
        (0..self.bins)
            .map(|k| self.low + k as f64 * self.step)
            .collect()
    }

    /// The first bin hop `hop` writes.
    pub(crate) fn first_bin_of(&self, hop: usize) -> usize {
        hop_first_bin(hop % self.hops.max(1), self.hops, self.bins, self.per_hop)
    }
}

impl Tuning {
    /// One centre for the whole input (`--center-freq`).
    pub fn fixed(frequency: f64) -> Arc<Tuning> {
        Arc::new(Tuning {
            captures: vec![Capture {
                sample_start: 0,
                frequency: Some(frequency),
                datetime: None,
            }],
            period: None,
            band: None,
        })
    }

    /// These captures, their starts and datetimes, all at `frequency`: `--center-freq` over what
    /// a recording says (its `core:datetime`s still time its rows).
    pub(crate) fn at_centre(&self, frequency: f64) -> Arc<Tuning> {
        let captures = (self.captures.iter())
            .map(|c| Capture {
                frequency: Some(frequency),
                ..c.clone()
            })
            .collect();
        Arc::new(Tuning {
            captures,
            period: self.period,
            band: self.band,
        })
    }

    /// The one centre every capture shares; None when captures differ (or none is known).
    pub fn single(&self) -> Option<f64> {
        let first = self.captures.first()?.frequency;
        self.captures
            .iter()
            .all(|c| c.frequency == first)
            .then_some(first)
            .flatten()
    }

    /// Whether any capture gives a centre (captures may give only their datetimes).
    pub(crate) fn has_centre(&self) -> bool {
        self.captures.iter().any(|c| c.frequency.is_some())
    }

    /// Whether captures lie at different centres (rows then carry theirs).
    pub(crate) fn varies(&self) -> bool {
        let first = self.captures.first().map(|c| c.frequency);
        self.captures.iter().any(|c| Some(c.frequency) != first)
    }

    /// The capture holding sample `sample` (the first one for samples before it).
    pub(crate) fn capture_at(&self, sample: u64) -> Option<&Capture> {
        self.captures.get(self.capture_index_at(sample))
    }

    /// Which capture holds sample `sample` (a sweep's: which hop); 0 before the first.
    pub(crate) fn capture_index_at(&self, sample: u64) -> usize {
        let sample = self
            .period
            .filter(|&p| p > 0)
            .map_or(sample, |p| sample % p);
        let i = self.captures.partition_point(|c| c.sample_start <= sample);
        i.saturating_sub(1)
    }

    /// The sample a row starting at `time_s` in a stream of `rate` Hz starts at.
    pub(crate) fn sample_at_time(time_s: f64, rate: f64) -> u64 {
        (time_s * rate).round().max(0.0) as u64
    }

    /// The centre at sample `sample`.
    pub(crate) fn center_at(&self, sample: u64) -> Option<f64> {
        self.capture_at(sample).and_then(|c| c.frequency)
    }

    /// The centre of a row starting at `time_s` in a stream of `rate` Hz.
    pub(crate) fn center_at_time(&self, time_s: f64, rate: f64) -> Option<f64> {
        self.center_at(Self::sample_at_time(time_s, rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuning(parts: &[(u64, f64)]) -> Tuning {
        Tuning {
            captures: parts
                .iter()
                .map(|&(s, f)| Capture {
                    sample_start: s,
                    frequency: Some(f),
                    datetime: None,
                })
                .collect(),
            period: None,
            band: None,
        }
    }

    #[test]
    fn rows_take_the_capture_of_their_first_sample() {
        let t = tuning(&[(0, 100e6), (1000, 101e6)]);
        assert!(t.varies());
        assert_eq!(t.single(), None);
        assert_eq!(t.center_at(999), Some(100e6));
        assert_eq!(t.center_at(1000), Some(101e6));
        assert_eq!(t.center_at_time(0.5, 2000.0), Some(101e6));
        let one = tuning(&[(0, 5.0), (10, 5.0)]);
        assert!(!one.varies());
        assert_eq!(one.single(), Some(5.0));
    }

    #[test]
    fn a_sweep_repeats_its_captures() {
        let t = Tuning {
            period: Some(300),
            ..tuning(&[(50, 1e6), (200, 2e6)])
        };
        assert_eq!(t.center_at(60), Some(1e6));
        assert_eq!(t.center_at(250), Some(2e6));
        assert_eq!(t.center_at(300 + 60), Some(1e6));
        assert_eq!(t.center_at(3000 + 299), Some(2e6));
    }
}
