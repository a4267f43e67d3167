//! How the frames of a group become one row's values (`--average-mode`), in f64: a sum for
//! `mean`, the rows kept for `median`, a held extreme for `max`, `min` and `peak`, a smoothed
//! row for `exp` (the module doc of `products::average` says what each computes).

use super::AverageMode;
use crate::fft::scaled_sums::ScaledSums;
use crate::fft::{max_or_nan, min_or_nan};
use crate::types::Sample;

/// Per-mode state, all in f64.
pub(super) enum Reducer {
    Mean {
        sums: ScaledSums,
    },
    Median {
        /// The group's rows, one after another.
        rows: Vec<f64>,
        /// One bin's values across the group (scratch).
        column: Vec<f64>,
    },
    /// max, min (reset every group) and peak (never reset).
    Hold {
        held: Vec<f64>,
        keep: fn(f64, f64) -> f64,
        resets_each_group: bool,
        empty: bool,
    },
    Exp {
        alpha: f64,
        smoothed: Vec<f64>,
        empty: bool,
    },
}

/// scipy's `_median_bias(n)`: the median of n periodograms over their mean,
/// 1 + Σ_{i=1}^{(n−1)/2} (1/(2i+1) − 1/(2i)). 1 for n = 1 and 2.
pub(crate) fn median_bias(count: usize) -> f64 {
    let terms = count.saturating_sub(1) / 2;
    1.0 + (1..=terms)
        .map(|i| {
            let even = 2.0 * i as f64;
            1.0 / (even + 1.0) - 1.0 / even
        })
        .sum::<f64>()
}

/// numpy's median of `values` (mean of the two middle values for an even count; NaN if any is
/// NaN). Reorders `values`. `values` must not be empty.
fn median_of(values: &mut [f64]) -> f64 {
    if values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let middle = values.len() / 2;
    let odd_count = values.len() % 2 == 1;
    let (below, upper_middle, _) = values.select_nth_unstable_by(middle, f64::total_cmp);
    let upper_middle = *upper_middle;
    if odd_count {
        return upper_middle;
    }
    let lower_middle = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lower_middle + upper_middle) / 2.0
}

impl Reducer {
    pub(super) fn new(mode: AverageMode, bins: usize) -> Self {
        let hold = |keep: fn(f64, f64) -> f64, resets_each_group| Reducer::Hold {
            held: vec![0.0; bins],
            keep,
            resets_each_group,
            empty: true,
        };
        match mode {
            AverageMode::Mean => Reducer::Mean {
                sums: ScaledSums::new(bins),
            },
            AverageMode::Median => Reducer::Median {
                rows: Vec::new(),
                column: Vec::new(),
            },
            AverageMode::Max => hold(max_or_nan, true),
            AverageMode::Min => hold(min_or_nan, true),
            AverageMode::Peak => hold(max_or_nan, false),
            AverageMode::Exp { alpha } => Reducer::Exp {
                alpha,
                smoothed: vec![0.0; bins],
                empty: true,
            },
        }
    }

    /// Readies the state for a new group's first frame.
    pub(super) fn begin_group(&mut self) {
        match self {
            Reducer::Mean { sums } => sums.clear(),
            Reducer::Median { rows, .. } => rows.clear(),
            Reducer::Hold {
                resets_each_group,
                empty,
                ..
            } => *empty |= *resets_each_group,
            Reducer::Exp { .. } => {}
        }
    }

    /// Whether a group whose frames come as one segment (a row by `AverageMode::segment_op`)
    /// ends as that row: `mean` (the segment's mean) and the holds that start again each group
    /// (`max`, `min`; not `peak`, which holds across groups).
    pub(super) fn keeps_a_whole_group(&self) -> bool {
        match self {
            Reducer::Mean { .. } => true,
            Reducer::Hold {
                resets_each_group, ..
            } => *resets_each_group,
            Reducer::Median { .. } | Reducer::Exp { .. } => false,
        }
    }

    /// Adds `row`, which stands for `frames` frames: the mean of a segment's for `mean`, their
    /// max or min for the holds, one frame's for `median` and `exp` (no segments).
    pub(super) fn add<T: Sample>(&mut self, row: &[T], frames: usize) {
        debug_assert!(
            frames == 1 || !matches!(self, Reducer::Median { .. } | Reducer::Exp { .. }),
            "median and exp take one frame at a time, got a row of {frames}"
        );
        let values = row.iter().map(|v| v.into_f64());
        match self {
            Reducer::Mean { sums } => sums.add(values, frames as f64),
            Reducer::Median { rows, .. } => rows.extend(values),
            Reducer::Hold {
                held, keep, empty, ..
            } => {
                combine(held, values, |h, v| if *empty { v } else { keep(h, v) });
                *empty = false;
            }
            Reducer::Exp {
                alpha,
                smoothed,
                empty,
            } => {
                let a = *alpha;
                combine(smoothed, values, |y, x| {
                    if *empty {
                        x
                    } else {
                        a * x + (1.0 - a) * y
                    }
                });
                *empty = false;
            }
        }
    }

    /// The reduced row of the group just filled with `frames` frames (>= 1) of `bins` bins.
    pub(super) fn end_group(&mut self, frames: usize, bins: usize) -> Vec<f64> {
        match self {
            Reducer::Mean { sums } => sums.means(frames as f64).collect(),
            Reducer::Median { rows, column } => median_row(rows, column, frames, bins),
            Reducer::Hold { held, .. } => held.clone(),
            Reducer::Exp { smoothed, .. } => smoothed.clone(),
        }
    }
}

/// `state[i] = f(state[i], values[i])` for every bin.
fn combine(state: &mut [f64], values: impl Iterator<Item = f64>, f: impl Fn(f64, f64) -> f64) {
    state
        .iter_mut()
        .zip(values)
        .for_each(|(s, v)| *s = f(*s, v));
}

/// Per-bin median of `frames` rows of `bins` values, over scipy's bias for `frames`.
fn median_row(rows: &[f64], column: &mut Vec<f64>, frames: usize, bins: usize) -> Vec<f64> {
    let bias = median_bias(frames);
    (0..bins)
        .map(|bin| {
            column.clear();
            column.extend(rows.iter().skip(bin).step_by(bins.max(1)).copied());
            median_of(column) / bias
        })
        .collect()
}
