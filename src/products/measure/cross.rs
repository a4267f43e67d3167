//! `--cross A,B`: two channels of one input, as `scipy.signal.csd`, `coherence` and `welch` with
//! the same window, segment (`--frame`), overlap (`--frame` − `--hop`), `detrend=False`,
//! `scaling='density'`, `average='mean'`. Per frame k the engine gives X_k and Y_k (channel A's
//! and B's spectra, unnormalised); over a row's frames (an `--average` group; without it the
//! whole input is one row, as scipy over the whole signal):
//! - `csd`: Pxy = mean(conj(X)·Y) / (fs·Σw²), doubled for every bin but DC and (even frames)
//!   Nyquist, written as [re, im] per bin;
//! - `coherence`: |Pxy|² / (Pxx·Pyy), Pxx and Pyy the same means of |X|² and |Y|²;
//! - the H1 transfer function B/A, Pxy / Pxx: `h1_db` = 20·log10|H1| (floored at −240 dB),
//!   `h1_deg` its phase in degrees (−180, 180].
//!
//! Rows carry channel A's stream number; channel B's stream writes none. A row's values:
//! csd (2·bins: re, im per bin), coherence, h1_db, h1_deg (bins each).

use super::super::average::Grouping;
use std::collections::VecDeque;

/// `--cross A,B`: the channels, 0-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrossSpec {
    pub a: usize,
    pub b: usize,
}

impl std::str::FromStr for CrossSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--cross {s}: give two different 0-based channels, such as 0,1");
        let (a, b) = s.split_once(',').ok_or_else(bad)?;
        let (a, b) = (
            a.trim().parse::<usize>().map_err(|_| bad())?,
            b.trim().parse::<usize>().map_err(|_| bad())?,
        );
        if a == b {
            return Err(bad());
        }
        Ok(CrossSpec { a, b })
    }
}

impl std::fmt::Display for CrossSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.a, self.b)
    }
}

/// Which streams a run's pairs are: channel A's and B's of each input.
#[derive(Clone, Debug)]
pub(crate) struct CrossPlan {
    /// Per stream: (pair, side 0 for A or 1 for B), None for other channels.
    pub sides: Vec<Option<(usize, usize)>>,
    /// Per pair: channel A's stream (whose number its rows carry) and its rate.
    pub pairs: Vec<(usize, f64)>,
    n: usize,
    sum_sq: f64,
    groupings: Vec<Option<Grouping>>,
}

impl CrossPlan {
    /// The pairs of `streams` (frames of `n`, `hop` apart, windowed by `window`, rows per
    /// `average`); an error names an input without both channels.
    pub(crate) fn new(
        spec: CrossSpec,
        streams: &[crate::types::StreamMeta],
        (n, hop): (usize, usize),
        window: crate::window::WindowKind,
        average: Option<crate::products::average::AverageSpec>,
    ) -> Result<Self, String> {
        let mut sides = vec![None; streams.len()];
        let (mut pairs, mut groupings) = (Vec::new(), Vec::new());
        for a in streams.iter().filter(|s| s.channel == Some(spec.a)) {
            let b = streams
                .iter()
                .find(|s| s.input == a.input && s.channel == Some(spec.b))
                .ok_or_else(|| {
                    format!(
                        "--cross {spec}: {} has no channel {} (channels are 0-based)",
                        a.input, spec.b
                    )
                })?;
            sides[a.id] = Some((pairs.len(), 0));
            sides[b.id] = Some((pairs.len(), 1));
            pairs.push((a.id, a.rate));
            groupings.push(average.map(|s| s.grouping(a.rate, hop)).transpose()?);
        }
        if let Some(first) = streams.first().filter(|_| pairs.is_empty()) {
            return Err(format!(
                "--cross {spec}: {} has no channels {} and {} to pair (channels are 0-based)",
                first.input, spec.a, spec.b
            ));
        }
        let w = window.coefficients(n);
        Ok(CrossPlan {
            sides,
            pairs,
            n,
            sum_sq: w.iter().map(|v| v * v).sum(),
            groupings,
        })
    }

    /// A fresh accumulator per pair.
    pub(crate) fn accumulators(&self) -> Vec<CrossPair> {
        self.pairs
            .iter()
            .zip(&self.groupings)
            .map(|(&(_, rate), &g)| CrossPair::new(self.n / 2 + 1, self.n, rate, self.sum_sq, g))
            .collect()
    }
}

/// Values a row holds for `bins` bins.
pub(crate) fn row_values(bins: usize) -> usize {
    5 * bins
}

/// One finished row: its first frame's start sample and its values.
pub(crate) struct CrossRow {
    pub first_start: u64,
    pub values: Vec<f64>,
}

/// One pair of streams' accumulator.
pub(crate) struct CrossPair {
    pending: [VecDeque<(u64, u64, Vec<f64>)>; 2],
    grouping: Option<Grouping>,
    /// Σ|X|², Σ|Y|², Σ re, Σ im of conj(X)·Y per bin.
    sums: [Vec<f64>; 4],
    frames: usize,
    group: Option<u64>,
    first: (u64, u64),
    /// Density scaling per bin: 1/(fs·Σw²), doubled but at DC and Nyquist.
    density: Vec<f64>,
}

impl CrossPair {
    /// For spectra of `bins` bins of frames of `n` samples at `rate`, windowed with Σw² =
    /// `sum_sq`; `grouping`: the `--average` rows (None: one row at the end).
    pub(crate) fn new(
        bins: usize,
        n: usize,
        rate: f64,
        sum_sq: f64,
        grouping: Option<Grouping>,
    ) -> Self {
        let density = (0..bins)
            .map(|k| {
                let edge = k == 0 || (n % 2 == 0 && k == n / 2);
                (if edge { 1.0 } else { 2.0 }) / (rate * sum_sq)
            })
            .collect();
        CrossPair {
            pending: [VecDeque::new(), VecDeque::new()],
            grouping,
            sums: std::array::from_fn(|_| vec![0.0; bins]),
            frames: 0,
            group: None,
            first: (0, 0),
            density,
        }
    }

    /// Takes channel `side`'s (0: A, 1: B) frame `seq` (start sample `start`; `spectrum`: re, im
    /// per bin); rows whose groups completed go to `emit`.
    pub(crate) fn push(
        &mut self,
        side: usize,
        (seq, start): (u64, u64),
        spectrum: Vec<f64>,
        emit: &mut impl FnMut(CrossRow),
    ) {
        self.pending[side].push_back((seq, start, spectrum));
        loop {
            let (Some(a), Some(b)) = (self.pending[0].front(), self.pending[1].front()) else {
                return;
            };
            if a.0 != b.0 {
                // a frame one side lacks (cut input): drop the older
                let older = usize::from(b.0 < a.0);
                self.pending[older].pop_front();
                continue;
            }
            let (Some((seq, start, x)), Some((_, _, y))) =
                (self.pending[0].pop_front(), self.pending[1].pop_front())
            else {
                return;
            };
            let group = self.grouping.map_or(0, |g| g.group_of(seq, start));
            if self.group.is_some_and(|open| open != group) {
                if let Some(row) = self.take() {
                    emit(row);
                }
            }
            if self.frames == 0 {
                self.first = (seq, start);
            }
            self.group = Some(group);
            self.add(&x, &y);
        }
    }

    fn add(&mut self, x: &[f64], y: &[f64]) {
        for (k, (x, y)) in x.chunks_exact(2).zip(y.chunks_exact(2)).enumerate() {
            let (xr, xi, yr, yi) = (x[0], x[1], y[0], y[1]);
            self.sums[0][k] += xr * xr + xi * xi;
            self.sums[1][k] += yr * yr + yi * yi;
            // conj(X)·Y
            self.sums[2][k] += xr * yr + xi * yi;
            self.sums[3][k] += xr * yi - xi * yr;
        }
        self.frames += 1;
    }

    /// The open row (None without frames); starts the next.
    pub(crate) fn take(&mut self) -> Option<CrossRow> {
        if self.frames == 0 {
            return None;
        }
        let (bins, count) = (self.density.len(), self.frames as f64);
        let mut values = vec![0.0; row_values(bins)];
        for k in 0..bins {
            let d = self.density[k] / count;
            let (pxx, pyy) = (self.sums[0][k] * d, self.sums[1][k] * d);
            let (re, im) = (self.sums[2][k] * d, self.sums[3][k] * d);
            values[2 * k] = re;
            values[2 * k + 1] = im;
            values[2 * bins + k] = (re * re + im * im) / (pxx * pyy);
            let (hr, hi) = (re / pxx, im / pxx);
            values[3 * bins + k] =
                20.0 * crate::fft::scale::floored((hr * hr + hi * hi).sqrt(), 1e-12).log10();
            values[4 * bins + k] = hi.atan2(hr).to_degrees();
        }
        for s in self.sums.iter_mut() {
            s.iter_mut().for_each(|v| *v = 0.0);
        }
        self.frames = 0;
        self.group = None;
        Some(CrossRow {
            first_start: self.first.1,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_takes_two_different_channels() {
        assert_eq!("0,1".parse::<CrossSpec>(), Ok(CrossSpec { a: 0, b: 1 }));
        assert!("1,1".parse::<CrossSpec>().is_err());
        assert!("a,1"
            .parse::<CrossSpec>()
            .unwrap_err()
            .contains("--cross a,1"));
    }

    #[test]
    fn identical_channels_have_coherence_one_and_unit_h1() {
        let mut pair = CrossPair::new(2, 2, 1.0, 1.0, None);
        let mut rows = Vec::new();
        for seq in 0..3u64 {
            let x = vec![1.0 + seq as f64, 0.5, -0.25, 2.0];
            pair.push(0, (seq, seq * 2), x.clone(), &mut |r| rows.push(r));
            pair.push(1, (seq, seq * 2), x, &mut |r| rows.push(r));
        }
        let row = pair.take().expect("a row");
        assert!(rows.is_empty());
        assert!((row.values[4] - 1.0).abs() < 1e-12 && (row.values[5] - 1.0).abs() < 1e-12);
        assert!(row.values[6].abs() < 1e-9 && row.values[8].abs() < 1e-9);
    }
}
