//! Time averaging (`--average N|DURATION`, `--average-mode`): reduces one stream's per-frame power
//! spectra to one row per group of frames. Pure logic, no I/O: the pipeline parses the flags with
//! [`AverageSpec`] and [`AverageMode`], turns the spec into a [`Grouping`] once the stream's rate
//! and hop are known, and pushes every frame's power row into that stream's [`Averager`].
//!
//! Conventions:
//! - **Power domain.** Rows pushed are |X|² values (normalised or not: the reducer only reduces);
//!   the caller applies the requested scale (magnitude, dB, ...) to the reduced row afterwards.
//!   Sums and states are kept in f64 whatever the sample type.
//! - **Groups.** `--average N` (a whole number N >= 1): every N frames in the order they are
//!   pushed. `--average DURATION` (T, units `us`, `ms`, `s`, `min`, decimals allowed, 1 ns
//!   resolution): interval k holds the frames whose start time s/rate (s: start sample) lies in
//!   [k·T, (k+1)·T), i.e. k = floor(s / (T·rate)), in exact integer arithmetic when the rate is a
//!   whole number of Hz. With a frame every `hop` samples an interval holds floor(T·rate/hop) or
//!   ceil(T·rate/hop) frames ([`Grouping::frames_per_row`]); a T shorter than one hop
//!   (T·rate < hop) is an error, since some intervals would hold no frame. An interval left
//!   empty by a gap in the input (a live-capture overrun) gives no row.
//! - **Row time.** The start of the row's interval: for `--average N`, the start time of the
//!   group's first frame (start sample / rate, the time a plain frame row carries); for
//!   `--average DURATION`, k·T: the group's first frame starts less than one hop later (or
//!   anywhere in the interval, after a gap in the input). Each row also carries its first frame's
//!   index and start sample.
//! - **Emission.** A row is emitted as soon as the last frame of its group is pushed: the N-th
//!   frame, or for an interval the frame after which the next frame (one hop later) starts in a
//!   later interval. [`Averager::finish`] emits the final group even when it is partial; its row's
//!   `frames` says how many frames it holds, and its value is what scipy would compute over those
//!   frames (the median's bias correction uses that count).
//! - **Modes.** `mean` (default): per-bin arithmetic mean. `median`: as
//!   `scipy.signal.welch(average='median')`: numpy's median per bin (the mean of the two middle
//!   values for an even count) divided by [`median_bias`] of the frame count. `max`, `min`:
//!   per-bin extremes over the group, reset every group. `peak`: peak hold, the per-bin maximum
//!   since the start of the stream (never reset), emitted once per group. `exp:ALPHA`
//!   (0 < ALPHA <= 1): exponential moving average y = ALPHA·x + (1−ALPHA)·y, started by the
//!   stream's first frame and never reset; a row holds y after its group's last frame, so
//!   `--average 1` emits it every frame and `--average N` every N frames. In a sweep both are
//!   held per hop (since that hop's first frame), each hop's bins being other frequencies.
//! - **NaN.** A NaN in a bin makes the reduced bin NaN, as numpy's reducers do (for `peak` and
//!   `exp`, from then on).
//! - **Memory.** O(bins) per stream; `median` keeps its group's rows, O(frames per row × bins).

use crate::types::Sample;
use std::marker::PhantomData;

mod parse;
mod reduce;

#[cfg(test)]
use reduce::median_bias;
use reduce::Reducer;

/// Nanoseconds, the unit an averaging interval is held in.
const NANOS_PER_SECOND: u64 = crate::types::duration::SECOND;

/// Fraction digits beyond this many cannot change a whole number of nanoseconds (< 10^-7 ns).
const MAX_FRACTION_DIGITS: usize = 18;

/// `--average N|DURATION`: a group of N frames, or an interval of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AverageSpec {
    /// One row per this many frames (>= 1).
    Frames(usize),
    /// One row per interval of this many nanoseconds (>= 1).
    Interval { nanos: u64 },
    /// `--sweep`: one row per hop, of the frames that start in each slot of `slot` samples (a
    /// hop's settle and samples), at most `frames` of them. Rows follow the hops even where a
    /// hop lost frames (dropped live, cut by an outage). `peak` and `exp` hold one state per
    /// hop of the `hops` a sweep makes (slot k is hop k mod `hops`): each hop's bins are other
    /// frequencies.
    PerHop {
        frames: usize,
        slot: u64,
        hops: usize,
    },
}

/// `--average-mode`: how the frames of a group become one row.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum AverageMode {
    /// Per-bin arithmetic mean.
    #[default]
    Mean,
    /// Per-bin median divided by scipy's bias for the group's frame count.
    Median,
    /// Per-bin maximum over the group.
    Max,
    /// Per-bin minimum over the group.
    Min,
    /// Peak hold: per-bin maximum since the stream's start, emitted once per group.
    Peak,
    /// Exponential moving average with weight `alpha` (0 < alpha <= 1) on the newest frame.
    Exp { alpha: f64 },
}

/// The fewest and most frames one row can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FramesPerRow {
    pub fewest: usize,
    pub most: usize,
}

/// How one stream's frames fall into rows: an [`AverageSpec`] with the stream's rate and hop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grouping {
    rule: RowRule,
    /// Sample rate, Hz (> 0, finite).
    rate: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum RowRule {
    Frames(usize),
    Interval(IntervalClock),
    Slots {
        slot: u64,
        frames: usize,
        hops: usize,
    },
}

/// Which interval a start sample falls in, for intervals of `nanos` ns at `rate` Hz.
#[derive(Clone, Copy, Debug, PartialEq)]
struct IntervalClock {
    nanos: u64,
    hop: u64,
    rate: f64,
    /// The rate when it is a whole number of Hz: then interval arithmetic is exact.
    whole_rate: Option<u64>,
}

/// One finished row of an [`Averager`].
#[derive(Clone, Debug, PartialEq)]
pub struct AveragedRow<T> {
    /// Index of the group's first frame in the stream.
    pub first_frame: u64,
    /// How many frames the group holds (fewer than usual only for a final partial group).
    pub frames: usize,
    /// Start sample of the group's first frame.
    pub first_start_sample: u64,
    /// The row's time in seconds: the start of its interval (see the module doc).
    pub time_s: f64,
    /// One reduced value per bin, power domain.
    pub values: Vec<T>,
}

/// Streaming reducer for one stream: push every frame's power row in stream order, take rows as
/// their groups complete, then `finish`.
pub struct Averager<T> {
    grouping: Grouping,
    bins: usize,
    /// One reducer, or (`peak` and `exp` in a sweep) one per hop (`Grouping::state_of`).
    reducers: Vec<Reducer>,
    open: Option<OpenGroup>,
    sample: PhantomData<fn() -> T>,
}

/// The group being filled.
#[derive(Clone, Copy, Debug)]
struct OpenGroup {
    /// Interval index (always 0 for groups of N frames).
    interval: u64,
    first_frame: u64,
    first_start: u64,
    frames: usize,
}

// ---------------------------------------------------------------------------------------------
// Grouping
// ---------------------------------------------------------------------------------------------

impl AverageSpec {
    /// This spec for a stream of `rate` Hz with a frame every `hop` samples. Errors (one line):
    /// a rate that is not a positive number, a hop of 0, an interval shorter than one hop.
    pub fn grouping(&self, rate: f64, hop: usize) -> Result<Grouping, String> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!(
                "--average {self}: needs a sample rate above 0 Hz (got {rate})"
            ));
        }
        if hop == 0 {
            return Err(format!(
                "--average {self}: needs a hop of at least 1 sample"
            ));
        }
        let rule = match *self {
            AverageSpec::Frames(frames) => RowRule::Frames(frames),
            AverageSpec::Interval { nanos } => {
                RowRule::Interval(self.interval_clock(nanos, rate, hop)?)
            }
            AverageSpec::PerHop { frames, slot, hops } => RowRule::Slots {
                slot: slot.max(1),
                frames,
                hops: hops.max(1),
            },
        };
        Ok(Grouping { rule, rate })
    }

    /// The fewest and most frames a row holds at `rate` Hz and `hop` (errors as [`Self::grouping`]).
    #[cfg(test)]
    pub(crate) fn frames_per_row(&self, rate: f64, hop: usize) -> Result<FramesPerRow, String> {
        self.grouping(rate, hop).map(|g| g.frames_per_row())
    }

    fn interval_clock(&self, nanos: u64, rate: f64, hop: usize) -> Result<IntervalClock, String> {
        let clock = IntervalClock::new(nanos, rate, hop as u64);
        if clock.frames_per_interval().fewest == 0 {
            return Err(format!(
                "--average {self}: {} samples at {rate} Hz, shorter than --hop {hop} ({} ms): some rows would hold no frame",
                clock.samples_per_interval(),
                hop as f64 * 1000.0 / rate
            ));
        }
        Ok(clock)
    }
}

/// Consecutive frames of one group, reduced to one row before they reach the averager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub first_frame: u64,
    pub first_start: u64,
    /// Start sample of the segment's last frame.
    pub last_start: u64,
    pub frames: usize,
}

impl AverageMode {
    /// How an engine may reduce a run of one group's frames before the averager sees them: their
    /// mean (mean), max (max, peak) or min; None when every frame must reach the averager (median,
    /// exp).
    pub(crate) fn segment_op(self) -> Option<crate::fft::SegmentOp> {
        use crate::fft::SegmentOp;
        match self {
            AverageMode::Mean => Some(SegmentOp::Mean),
            AverageMode::Max | AverageMode::Peak => Some(SegmentOp::Max),
            AverageMode::Min => Some(SegmentOp::Min),
            AverageMode::Median | AverageMode::Exp { .. } => None,
        }
    }
}

impl Grouping {
    /// Which group frame `frame_index` (starting at `start_sample`) of a stream belongs to, for a
    /// stream whose frames are numbered from 0 without gaps (files): frame / N, or its interval.
    pub(crate) fn group_of(&self, frame_index: u64, start_sample: u64) -> u64 {
        match self.rule {
            RowRule::Frames(frames) => frame_index / frames.max(1) as u64,
            RowRule::Interval(clock) => clock.index_of(start_sample),
            RowRule::Slots { slot, .. } => start_sample / slot,
        }
    }

    /// Reducer states a stream keeps: one per hop where a sweep's `peak` or `exp` carries state
    /// from row to row (each hop's bins are other frequencies), else one.
    fn states(&self, mode: AverageMode) -> usize {
        match (self.rule, mode) {
            (RowRule::Slots { hops, .. }, AverageMode::Peak | AverageMode::Exp { .. }) => hops,
            _ => 1,
        }
    }

    /// The fewest and most frames one row holds (equal for `--average N`).
    pub(crate) fn frames_per_row(&self) -> FramesPerRow {
        match self.rule {
            RowRule::Frames(frames) | RowRule::Slots { frames, .. } => FramesPerRow {
                fewest: frames,
                most: frames,
            },
            RowRule::Interval(clock) => clock.frames_per_interval(),
        }
    }

    /// Interval index of a frame starting at `start_sample` (0 for groups of N frames).
    fn interval_of(&self, start_sample: u64) -> u64 {
        match self.rule {
            RowRule::Frames(_) => 0,
            RowRule::Interval(clock) => clock.index_of(start_sample),
            RowRule::Slots { slot, .. } => start_sample / slot,
        }
    }

    /// Whether `group`, whose latest frame started at `latest_start`, has all its frames.
    fn is_complete(&self, group: &OpenGroup, latest_start: u64) -> bool {
        match self.rule {
            RowRule::Frames(frames) | RowRule::Slots { frames, .. } => group.frames >= frames,
            RowRule::Interval(clock) => {
                clock.index_of(latest_start.saturating_add(clock.hop)) != group.interval
            }
        }
    }

    /// The row time of `group` (module doc: the start of its interval).
    fn row_time_s(&self, group: &OpenGroup) -> f64 {
        match self.rule {
            RowRule::Frames(_) | RowRule::Slots { .. } => group.first_start as f64 / self.rate,
            RowRule::Interval(clock) => clock.start_time_s(group.interval),
        }
    }
}

impl IntervalClock {
    fn new(nanos: u64, rate: f64, hop: u64) -> Self {
        let whole_rate =
            (rate.fract() == 0.0 && rate <= (1u64 << 53) as f64).then_some(rate as u64);
        IntervalClock {
            nanos,
            hop,
            rate,
            whole_rate,
        }
    }

    /// T·rate as an exact fraction (samples = numerator / NANOS_PER_SECOND), whole rates only.
    fn exact_samples_numerator(&self) -> Option<u128> {
        self.whole_rate
            .map(|rate| u128::from(self.nanos) * u128::from(rate))
    }

    /// T·rate, samples per interval (for messages and non-whole rates).
    fn samples_per_interval(&self) -> f64 {
        self.nanos as f64 * self.rate / NANOS_PER_SECOND as f64
    }

    /// k = floor(s / (T·rate)).
    fn index_of(&self, start_sample: u64) -> u64 {
        match self.exact_samples_numerator() {
            Some(numerator) => {
                let scaled = u128::from(start_sample) * u128::from(NANOS_PER_SECOND);
                // k <= s because T·rate >= hop >= 1, so it fits in u64.
                (scaled / numerator) as u64
            }
            None => (start_sample as f64 / self.samples_per_interval()).floor() as u64,
        }
    }

    /// floor and ceil of T·rate/hop.
    fn frames_per_interval(&self) -> FramesPerRow {
        let (fewest, most) = match self.exact_samples_numerator() {
            Some(numerator) => {
                let denominator = u128::from(self.hop) * u128::from(NANOS_PER_SECOND);
                (numerator / denominator, numerator.div_ceil(denominator))
            }
            None => {
                let ratio = self.samples_per_interval() / self.hop as f64;
                (ratio.floor() as u128, ratio.ceil() as u128)
            }
        };
        let to_usize = |v: u128| usize::try_from(v).unwrap_or(usize::MAX);
        FramesPerRow {
            fewest: to_usize(fewest),
            most: to_usize(most),
        }
    }

    /// k·T in seconds.
    fn start_time_s(&self, interval: u64) -> f64 {
        (u128::from(interval) * u128::from(self.nanos)) as f64 / NANOS_PER_SECOND as f64
    }
}

impl<T: Sample> Averager<T> {
    /// An averager for one stream whose rows hold `bins` values.
    pub fn new(grouping: Grouping, mode: AverageMode, bins: usize) -> Self {
        Averager {
            grouping,
            bins,
            reducers: (0..grouping.states(mode))
                .map(|_| Reducer::new(mode, bins))
                .collect(),
            open: None,
            sample: PhantomData,
        }
    }

    /// Values per row.
    pub fn bins(&self) -> usize {
        self.bins
    }

    /// Adds frame `frame_index` (starting at `start_sample`) with power row `power`, and emits
    /// the rows this completes (at most two: one a gap in the input closed, and this frame's).
    /// Frames must come in stream order, starts at least one hop apart. Panics if `power` does
    /// not hold `bins` values (a bug in the caller, not a user error).
    pub fn push(
        &mut self,
        frame_index: u64,
        start_sample: u64,
        power: &[T],
        emit: &mut dyn FnMut(AveragedRow<T>),
    ) {
        let frame = Segment {
            first_frame: frame_index,
            first_start: start_sample,
            last_start: start_sample,
            frames: 1,
        };
        self.push_segment(frame, power, emit);
    }

    /// Adds a segment: `segment.frames` consecutive frames of one group already reduced to one
    /// row by the segment's op (`AverageMode::segment_op`: their mean for `mean`, max or min
    /// for the holds), as an engine reduces them. Emits the rows this completes, as `push` does.
    /// Panics if `row` does not hold `bins` values (a bug in the caller).
    pub(crate) fn push_segment(
        &mut self,
        segment: Segment,
        row: &[T],
        emit: &mut dyn FnMut(AveragedRow<T>),
    ) {
        let Segment {
            first_frame: frame_index,
            first_start: start_sample,
            last_start,
            frames,
        } = segment;
        assert_eq!(row.len(), self.bins, "power row of the wrong length");
        let interval = self.grouping.interval_of(start_sample);
        let state = self.state_of(interval);
        if self.open.is_some_and(|g| g.interval != interval) {
            self.close(emit);
        }
        let whole = OpenGroup {
            interval,
            first_frame: frame_index,
            first_start: start_sample,
            frames,
        };
        let alone = self.open.is_none() && self.grouping.is_complete(&whole, last_start);
        if alone && self.reducers[state].keeps_a_whole_group() {
            // a group in one segment: the segment's row is the group's (the same bits)
            return self.emit_row(&whole, row.to_vec(), emit);
        }
        let mut group = self.open.take().unwrap_or_else(|| {
            self.reducers[state].begin_group();
            OpenGroup {
                interval,
                first_frame: frame_index,
                first_start: start_sample,
                frames: 0,
            }
        });
        self.reducers[state].add(row, frames);
        group.frames += frames;
        self.open = Some(group);
        if self.grouping.is_complete(&group, last_start) {
            self.close(emit);
        }
    }

    /// The reducer of the group in `interval` (a sweep's slot k is hop k mod hops).
    fn state_of(&self, interval: u64) -> usize {
        (interval % self.reducers.len() as u64) as usize
    }

    /// Emits the group still open, if any, with the frames it has (a partial final group).
    pub fn finish(&mut self, emit: &mut dyn FnMut(AveragedRow<T>)) {
        self.close(emit);
    }

    fn close(&mut self, emit: &mut dyn FnMut(AveragedRow<T>)) {
        let Some(group) = self.open.take() else {
            return;
        };
        let state = self.state_of(group.interval);
        let values = self.reducers[state].end_group(group.frames, self.bins);
        let values = values.into_iter().map(T::of_f64).collect();
        self.emit_row(&group, values, emit);
    }

    fn emit_row(&self, group: &OpenGroup, values: Vec<T>, emit: &mut dyn FnMut(AveragedRow<T>)) {
        emit(AveragedRow {
            first_frame: group.first_frame,
            frames: group.frames,
            first_start_sample: group.first_start,
            time_s: self.grouping.row_time_s(group),
            values,
        });
    }
}

#[cfg(test)]
mod tests;
