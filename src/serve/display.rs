//! Display rows of the live view. Every frame's row is folded into a per-stream max-hold and sum
//! (`Fold`), so a 1 ms burst between two display rows still shows; at the display rate a fold
//! becomes a `DisplayRow` in dB, columns in ascending frequency (`Layout`); each client gets it
//! reduced to its width (`View`: max of the columns that share a display column) as one binary
//! WebSocket message (layout in docs/serve.md).

use crate::fft::Scale;

use crate::types::Sample;
use std::sync::Arc;

/// How the values of a row relate to level, so they can be folded and shown in dB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// |X|: 20·log10.
    Amplitude,
    /// |X|² and its normalised forms: 10·log10.
    Power,
    /// Already dB.
    Decibel,
    /// re, im pairs: folded as re² + im², then 10·log10.
    Complex,
}

impl Level {
    pub(crate) fn of(scale: Scale) -> Self {
        match scale {
            Scale::Magnitude => Level::Amplitude,
            Scale::Db => Level::Decibel,
            Scale::Power | Scale::Spectrum | Scale::Density | Scale::ScaledPower => Level::Power,
            Scale::Complex => Level::Complex,
        }
    }

    /// Columns of a row of `values` values.
    pub(crate) fn columns(self, values: usize) -> usize {
        match self {
            Level::Complex => values / 2,
            _ => values,
        }
    }

    /// A folded value (the row's own unit, power for complex rows) in dB.
    fn db(self, v: f32) -> f32 {
        match self {
            Level::Amplitude => 20.0 * v.log10(),
            Level::Power | Level::Complex => 10.0 * v.log10(),
            Level::Decibel => v,
        }
    }
}

/// Frames of one stream folded since the last display row: per column the max and the sum of
/// the values (so the mean is that of the row's own unit: power average for power rows, log
/// average for dB rows, as spectrum analysers offer them).
#[derive(Clone, Debug)]
pub(crate) struct Fold {
    pub n: usize,
    pub frames: u32,
    /// Time of the earliest frame folded, in s.
    pub first_time: f64,
    /// Highest frame number folded.
    pub last_frame: u64,
    /// f32 throughout: f32 folds vectorise twice as wide, and a display row of a fast file job
    /// (tens of thousands of frames) sums with a relative error of about frames × 6e-8, a few
    /// thousandths of a dB at worst.
    max: Vec<f32>,
    sum: Vec<f32>,
    /// A swept band's fold (`new_band`): rows cover some of its columns, so each column counts
    /// its own rows (0: none yet).
    counts: Option<Vec<u32>>,
}

impl Fold {
    pub(crate) fn new(n: usize, columns: usize) -> Self {
        Fold {
            n,
            frames: 0,
            first_time: f64::INFINITY,
            last_frame: 0,
            max: vec![f32::NEG_INFINITY; columns],
            sum: vec![0.0; columns],
            counts: None,
        }
    }

    /// The fold of a swept band of `columns` bins, whose rows (hops) each cover some of them
    /// (`add_at`).
    pub(crate) fn new_band(n: usize, columns: usize) -> Self {
        Fold {
            counts: Some(vec![0; columns]),
            ..Self::new(n, columns)
        }
    }

    /// Folds one hop's row of `values` into a band's columns from `first` on.
    pub(crate) fn add_at<T: Sample>(
        &mut self,
        level: Level,
        (frame, time_s): (u64, f64),
        values: &[T],
        first: usize,
    ) {
        let mut row = Fold::new(self.n, level.columns(values.len()));
        row.add(level, frame, time_s, values);
        let end = (first + row.columns()).min(self.columns());
        for (k, column) in (first..end).enumerate() {
            self.max[column] = self.max[column].max(row.max[k]);
            self.sum[column] += row.sum[k];
            if let Some(counts) = self.counts.as_mut() {
                counts[column] += 1;
            }
        }
        self.count(1, frame, time_s);
    }

    /// A band's hold: each column the latest fold's where that fold has rows (the live view of a
    /// sweep shows the whole band, each part as last swept).
    pub(crate) fn hold(&mut self, newer: &Fold) {
        let (Some(counts), Some(newer_counts)) = (self.counts.as_mut(), newer.counts.as_ref())
        else {
            return;
        };
        for (column, &count) in newer_counts.iter().enumerate().filter(|c| *c.1 > 0) {
            self.max[column] = newer.max[column];
            self.sum[column] = newer.sum[column];
            counts[column] = count;
        }
        self.frames = newer.frames;
        self.first_time = newer.first_time;
        self.last_frame = self.last_frame.max(newer.last_frame);
    }

    /// Each column's max and mean over the rows it holds, in dB (a band's columns no hop has
    /// reached yet: -inf).
    fn levels_db(&self, level: Level) -> (Vec<f32>, Vec<f32>) {
        let frames = self.frames.max(1);
        let count = |column: usize| self.counts.as_ref().map_or(frames, |c| c[column]);
        (0..self.columns())
            .map(|column| match count(column) {
                0 => (f32::NEG_INFINITY, f32::NEG_INFINITY),
                n => (
                    level.db(self.max[column]),
                    level.db(self.sum[column] / n as f32),
                ),
            })
            .unzip()
    }

    pub(crate) fn columns(&self) -> usize {
        self.max.len()
    }

    /// Folds one row of `values` (in `level`'s unit).
    pub(crate) fn add<T: Sample>(&mut self, level: Level, frame: u64, time_s: f64, values: &[T]) {
        if level == Level::Complex {
            let columns = self.max.len().min(values.len() / 2);
            for (i, pair) in values[..2 * columns].chunks_exact(2).enumerate() {
                let (re, im) = (pair[0].into_f32(), pair[1].into_f32());
                self.fold_one(i, re * re + im * im);
            }
        } else {
            // equal-length slices, a plain compare: the loop vectorises
            let columns = self.max.len().min(values.len());
            let (max, sum) = (&mut self.max[..columns], &mut self.sum[..columns]);
            for ((m, s), v) in max.iter_mut().zip(sum.iter_mut()).zip(&values[..columns]) {
                let v = v.into_f32();
                *m = if v > *m { v } else { *m };
                *s += v;
            }
        }
        self.count(1, frame, time_s);
    }

    fn fold_one(&mut self, column: usize, v: f32) {
        let m = &mut self.max[column];
        *m = if v > *m { v } else { *m };
        self.sum[column] += v;
    }

    /// Adds another fold of the same stream and width.
    pub(crate) fn merge(&mut self, other: &Fold) {
        for (m, o) in self.max.iter_mut().zip(&other.max) {
            *m = m.max(*o);
        }
        for (s, o) in self.sum.iter_mut().zip(&other.sum) {
            *s += o;
        }
        if let (Some(counts), Some(others)) = (self.counts.as_mut(), other.counts.as_ref()) {
            counts.iter_mut().zip(others).for_each(|(c, o)| *c += o);
        }
        self.count(other.frames, other.last_frame, other.first_time);
    }

    fn count(&mut self, frames: u32, last_frame: u64, first_time: f64) {
        self.frames = self.frames.saturating_add(frames);
        self.last_frame = self.last_frame.max(last_frame);
        self.first_time = self.first_time.min(first_time);
    }
}

/// The columns of one stream's rows as the page shows them: Hz of each display column in
/// ascending order, and where each comes from in a row (rows of complex input without
/// `--fftshift` start at 0 Hz and wrap to the negative half).
#[derive(Debug, PartialEq)]
pub(crate) struct Layout {
    pub n: usize,
    pub columns_hz: Vec<f64>,
    /// Row column of each display column, when they are not the same.
    order: Option<Vec<usize>>,
}

impl Layout {
    /// `row_hz`: the Hz of each column in row order (`StreamMeta::column_frequencies`).
    pub(crate) fn new(n: usize, row_hz: Vec<f64>) -> Self {
        if row_hz.windows(2).all(|w| w[0] <= w[1]) {
            return Layout {
                n,
                columns_hz: row_hz,
                order: None,
            };
        }
        let mut order: Vec<usize> = (0..row_hz.len()).collect();
        order.sort_by(|&a, &b| row_hz[a].total_cmp(&row_hz[b]));
        Layout {
            n,
            columns_hz: order.iter().map(|&i| row_hz[i]).collect(),
            order: Some(order),
        }
    }

    pub(crate) fn columns(&self) -> usize {
        self.columns_hz.len()
    }

    fn reorder(&self, values: Vec<f32>) -> Vec<f32> {
        match &self.order {
            Some(order) => order.iter().map(|&i| values[i]).collect(),
            None => values,
        }
    }
}

/// One display row of one stream: the max and mean, in dB, of the frames folded into it.
#[derive(Debug)]
pub(crate) struct DisplayRow {
    pub stream: usize,
    /// Rows of this stream made before it (a row may hold frames older than the previous row's:
    /// the encode threads fold batches in the order they finish them).
    pub number: u64,
    pub frames: u32,
    pub time_s: f64,
    pub last_frame: u64,
    pub layout: Arc<Layout>,
    pub max_db: Vec<f32>,
    pub mean_db: Vec<f32>,
}

impl DisplayRow {
    pub(crate) fn new(
        stream: usize,
        number: u64,
        fold: &Fold,
        level: Level,
        layout: Arc<Layout>,
    ) -> Self {
        let (max_db, mean_db) = fold.levels_db(level);
        DisplayRow {
            stream,
            number,
            frames: fold.frames,
            time_s: fold.first_time,
            last_frame: fold.last_frame,
            max_db: layout.reorder(max_db),
            mean_db: layout.reorder(mean_db),
            layout,
        }
    }
}

/// Bytes before the values of a binary row message.
pub(crate) const ROW_HEADER_BYTES: usize = 32;

/// A layout as one client sees it: at most `width` columns, each the max (and mean) of a run of
/// neighbouring display columns.
#[derive(Debug)]
pub(crate) struct View {
    pub layout: Arc<Layout>,
    /// First display column of each view column, and the end of the last.
    edges: Vec<usize>,
    pub columns_hz: Vec<f64>,
}

impl View {
    /// `width` 0: every column.
    pub(crate) fn new(layout: Arc<Layout>, width: usize) -> Self {
        let columns = layout.columns();
        let width = if width == 0 {
            columns
        } else {
            width.min(columns)
        };
        let edges: Vec<usize> = (0..=width).map(|i| i * columns / width.max(1)).collect();
        let columns_hz = edges
            .windows(2)
            .map(|e| (layout.columns_hz[e[0]] + layout.columns_hz[e[1] - 1]) / 2.0)
            .collect();
        View {
            layout,
            edges,
            columns_hz,
        }
    }

    pub(crate) fn columns(&self) -> usize {
        self.columns_hz.len()
    }

    /// The binary message of `row`: little-endian u32 stream, u32 frames, f64 time_s, u64 last
    /// frame, u32 columns, u32 row number (wrapping), then the columns' max in dB, then their
    /// mean in dB (f32).
    pub(crate) fn encode(&self, row: &DisplayRow) -> Vec<u8> {
        let columns = self.columns();
        let mut out = Vec::with_capacity(ROW_HEADER_BYTES + 8 * columns);
        out.extend_from_slice(&(row.stream as u32).to_le_bytes());
        out.extend_from_slice(&row.frames.to_le_bytes());
        out.extend_from_slice(&row.time_s.to_le_bytes());
        out.extend_from_slice(&row.last_frame.to_le_bytes());
        out.extend_from_slice(&(columns as u32).to_le_bytes());
        out.extend_from_slice(&(row.number as u32).to_le_bytes());
        self.push_reduced(&row.max_db, &mut out, |run| {
            run.iter().copied().fold(f32::NEG_INFINITY, f32::max)
        });
        // the mean of joined columns in power, as the mean over frames: a one-bin tone keeps its
        // share of the column's power instead of vanishing in an average of dB
        self.push_reduced(&row.mean_db, &mut out, |run| {
            if let [one] = run {
                return *one;
            }
            let power: f32 = run.iter().map(|db| 10f32.powf(db / 10.0)).sum();
            10.0 * (power / run.len() as f32).log10()
        });
        out
    }

    fn push_reduced(&self, values: &[f32], out: &mut Vec<u8>, reduce: impl Fn(&[f32]) -> f32) {
        for e in self.edges.windows(2) {
            out.extend_from_slice(&reduce(&values[e[0]..e[1]]).to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_at(bytes: &[u8], at: usize) -> f32 {
        f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn a_single_frame_burst_survives_the_fold() {
        let mut fold = Fold::new(8, 3);
        for frame in 0..1000u64 {
            let burst = if frame == 517 { 1000.0 } else { 1.0 };
            fold.add::<f32>(Level::Power, frame, frame as f64 * 0.01, &[1.0, burst, 1.0]);
        }
        let layout = Arc::new(Layout::new(8, vec![0.0, 1.0, 2.0]));
        let row = DisplayRow::new(0, 0, &fold, Level::Power, layout);
        assert_eq!(row.frames, 1000);
        assert_eq!(row.last_frame, 999);
        assert_eq!(row.time_s, 0.0);
        assert!((row.max_db[1] - 30.0).abs() < 1e-5, "{:?}", row.max_db);
        let mean = (999.0 + 1000.0) / 1000.0f64;
        assert!((row.mean_db[1] as f64 - 10.0 * mean.log10()).abs() < 1e-5);
        assert_eq!(row.max_db[0], 0.0);
    }

    #[test]
    fn merged_folds_equal_one_fold() {
        let rows: Vec<[f64; 2]> = (0..10).map(|i| [i as f64, (10 - i) as f64]).collect();
        let mut whole = Fold::new(4, 2);
        let (mut a, mut b) = (Fold::new(4, 2), Fold::new(4, 2));
        for (i, r) in rows.iter().enumerate() {
            whole.add(Level::Amplitude, i as u64, i as f64, r);
            let part = if i % 3 == 0 { &mut a } else { &mut b };
            part.add(Level::Amplitude, i as u64, i as f64, r);
        }
        b.merge(&a);
        assert_eq!(format!("{whole:?}"), format!("{b:?}"));
    }

    #[test]
    fn complex_rows_fold_as_power_and_show_in_ascending_frequency() {
        // rows of n = 4 complex input without fftshift: 0, 1, -2, -1 (× rate / n)
        let layout = Arc::new(Layout::new(4, vec![0.0, 1.0, -2.0, -1.0]));
        assert_eq!(layout.columns_hz, vec![-2.0, -1.0, 0.0, 1.0]);
        let mut fold = Fold::new(4, 4);
        fold.add::<f64>(
            Level::Complex,
            0,
            0.0,
            &[3.0, 4.0, 0.0, 1.0, 1.0, 0.0, 0.0, 10.0],
        );
        let row = DisplayRow::new(0, 0, &fold, Level::Complex, layout);
        let expected = [0.0f32, 20.0, 10.0 * 25f32.log10(), 0.0];
        for (got, want) in row.max_db.iter().zip(expected) {
            assert!((got - want).abs() < 1e-5, "{:?}", row.max_db);
        }
    }

    #[test]
    fn a_view_takes_the_max_of_the_columns_it_joins() {
        let layout = Arc::new(Layout::new(16, (0..9).map(f64::from).collect()));
        let view = View::new(layout.clone(), 4);
        assert_eq!(view.columns(), 4);
        assert_eq!(view.columns_hz, vec![0.5, 2.5, 4.5, 7.0]);
        let mut fold = Fold::new(16, 9);
        let values: Vec<f32> = vec![1.0, 2.0, 3.0, 40.0, 5.0, 6.0, 7.0, 8.0, 90.0];
        fold.add(Level::Decibel, 7, 0.5, &values);
        let row = DisplayRow::new(3, 5, &fold, Level::Decibel, layout);
        let bytes = view.encode(&row);
        assert_eq!(bytes.len(), ROW_HEADER_BYTES + 8 * 4);
        assert_eq!(u32::from_le_bytes(bytes[0..4].try_into().unwrap()), 3);
        assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), 7);
        let max: Vec<f32> = (0..4).map(|i| f32_at(&bytes, 32 + 4 * i)).collect();
        assert_eq!(max, vec![2.0, 40.0, 6.0, 90.0]);
        assert_eq!(u32::from_le_bytes(bytes[28..32].try_into().unwrap()), 5);
        // joined means average power: (10^0.7 + 10^0.8 + 10^9) / 3 in dB
        let mean_last = f32_at(&bytes, 32 + 16 + 12);
        let want = 10.0 * ((10f64.powf(0.7) + 10f64.powf(0.8) + 1e9) / 3.0).log10();
        assert!(
            (mean_last as f64 - want).abs() < 1e-3,
            "{mean_last} vs {want}"
        );
        // a column of silence (-inf dB) beside a tone keeps the tone's share
        let layout = Arc::new(Layout::new(16, vec![0.0, 1.0]));
        let mut fold = Fold::new(16, 2);
        fold.add(Level::Decibel, 0, 0.0, &[f32::NEG_INFINITY, 60.0]);
        let row = DisplayRow::new(0, 0, &fold, Level::Decibel, layout.clone());
        let joined = View::new(layout, 1).encode(&row);
        let mean = f32_at(&joined, 32 + 4);
        assert!((mean - (60.0 - 10.0 * 2f32.log10())).abs() < 1e-3, "{mean}");
    }
}
