//! The spectrogram behind `--format png`: takes one stream's rows as levels in dB (one value per
//! column, in the stream's output order) and reduces them, as they come, to a grid no larger than
//! the plot: a row's columns to at most the plot's pixel rows (fewer columns than pixel rows are
//! kept as they are, and spread over the rows at the end), and frames to at most twice the plot's
//! pixel columns. `finish` maps the grid onto the plot's pixels.
//!
//! Every reduction takes the max, so a one-bin tone or a one-frame burst stays visible however
//! long the input or however many bins a row has. (dB is monotone in level, so the max of the dB
//! values is the dB of the largest level: reducing dB or levels gives the same picture.) Memory
//! is bounded by the plot size: at most 2 × width × height values, whatever the input length
//! (a stdin stream that runs until Ctrl-C included).
//!
//! Frequency runs bottom to top in ascending Hz whatever the row order (complex input in FFT
//! order is shown with negative frequencies below zero, as with `--fftshift`). Evenly spaced
//! columns (FFT bins, a `--fmin`/`--fmax` range) get a linear Hz axis; unevenly spaced ones
//! (mel, octave bands) one equal step each, labelled with their frequencies.

use std::ops::Range;

/// Size of the plot area in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlotSize {
    pub width: usize,
    pub height: usize,
}

/// How the frequency axis runs, bottom to top.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FrequencyScale {
    /// Evenly spaced columns: linear in Hz from the lowest column's frequency (bottom edge) to
    /// the highest's (top edge).
    Linear { bottom: f64, top: f64 },
    /// Unevenly spaced columns (bands), or a single one: each takes an equal share of the
    /// height; `hz` holds their frequencies, bottom first. On this axis column k lies at k, and
    /// the axis runs from -0.5 to len - 0.5.
    Columns { hz: Vec<f64> },
}

impl FrequencyScale {
    /// The axis' extent in its own units (Hz, or column steps), bottom to top.
    pub(crate) fn extent(&self) -> (f64, f64) {
        match self {
            FrequencyScale::Linear { bottom, top } => (*bottom, *top),
            FrequencyScale::Columns { hz } => (-0.5, hz.len() as f64 - 0.5),
        }
    }
}

/// How a row's columns become the grid's cells, and the cells the plot's pixel rows.
#[derive(Clone, Debug)]
pub(crate) struct FrequencyAxis {
    pub scale: FrequencyScale,
    /// Columns a row has.
    columns: usize,
    /// The row's column indices sorted by frequency.
    order: Vec<usize>,
    /// Whether `order` is the identity (rows already ascending: no indirection needed).
    ascending: bool,
    /// The grid's cells, bottom first: each the max of a run of `order` (one column each when
    /// there are no more columns than pixel rows, else one cell per pixel row).
    cells: Vec<Range<usize>>,
    /// Per pixel row, bottom first: the cells it shows (empty: nothing).
    rows: Vec<Range<usize>>,
}

/// Largest relative difference between steps for columns to count as evenly spaced.
const EVEN_SPACING: f64 = 1e-6;

impl FrequencyAxis {
    /// The axis for rows whose columns have frequencies `hz` (in row order), drawn over
    /// `pixel_rows` pixel rows.
    pub(crate) fn new(hz: &[f64], pixel_rows: usize) -> Self {
        let mut order: Vec<usize> = (0..hz.len()).collect();
        order.sort_by(|&a, &b| hz[a].total_cmp(&hz[b]));
        let ascending = order.iter().enumerate().all(|(i, &k)| i == k);
        let sorted: Vec<f64> = order.iter().map(|&k| hz[k]).collect();
        let (scale, edges) = match even_step(&sorted) {
            Some(step) => {
                let mut edges: Vec<f64> = sorted.iter().map(|f| f - step / 2.0).collect();
                edges.extend(sorted.last().map(|f| f + step / 2.0));
                let (bottom, top) = (sorted[0], sorted[sorted.len() - 1]);
                (FrequencyScale::Linear { bottom, top }, edges)
            }
            None => {
                let edges = (0..=sorted.len()).map(|k| k as f64 - 0.5).collect();
                (FrequencyScale::Columns { hz: sorted }, edges)
            }
        };
        let (lo, hi) = scale.extent();
        let sources = pixel_sources(&edges, lo, hi, pixel_rows);
        let (cells, rows) = if hz.len() <= pixel_rows {
            ((0..hz.len()).map(|k| k..k + 1).collect(), sources)
        } else {
            (sources, (0..pixel_rows).map(|r| r..r + 1).collect())
        };
        FrequencyAxis {
            scale,
            columns: hz.len(),
            order,
            ascending,
            cells,
            rows,
        }
    }

    /// Columns a row must have.
    pub(crate) fn columns(&self) -> usize {
        self.columns
    }

    /// Cells of a grid column.
    pub(crate) fn cells(&self) -> usize {
        self.cells.len()
    }

    /// Folds one row into `column` (one value per cell) by max.
    fn fold(&self, row: &[f32], column: &mut [f32]) {
        for (out, cell) in column.iter_mut().zip(&self.cells) {
            let row_max = if self.ascending {
                row[cell.clone()].iter().fold(f32::NAN, |m, &v| m.max(v))
            } else {
                self.order[cell.clone()]
                    .iter()
                    .fold(f32::NAN, |m, &k| m.max(row[k]))
            };
            *out = out.max(row_max);
        }
    }

    /// Writes a grid column's cells into one pixel column of `values` (row-major, `width`
    /// pixels a row, top row first), at `x`.
    fn spread(&self, column: &[f32], values: &mut [f32], width: usize, x: usize) {
        let height = self.rows.len();
        for (r, cells) in self.rows.iter().enumerate() {
            let v = column[cells.clone()]
                .iter()
                .fold(f32::NAN, |m, &v| m.max(v));
            values[(height - 1 - r) * width + x] = v;
        }
    }
}

/// The common step of ascending `hz` when there are at least two and they are evenly spaced.
fn even_step(hz: &[f64]) -> Option<f64> {
    let (first, last) = (*hz.first()?, *hz.last()?);
    if hz.len() < 2 {
        return None;
    }
    let step = (last - first) / (hz.len() - 1) as f64;
    let even = step > 0.0
        && hz
            .windows(2)
            .all(|w| ((w[1] - w[0]) - step).abs() <= EVEN_SPACING * step);
    even.then_some(step)
}

/// For each of `pixels` equal pixels over [lo, hi] (lowest first): the cells it shows. Cells are
/// given by their `edges` (ascending, one more than there are cells). A pixel shows every cell
/// whose centre lies in it (so each cell inside [lo, hi] is shown somewhere), or when none does,
/// the cell under the pixel's own centre (a cell wider than a pixel spans several); an empty
/// range where no cell is.
pub(crate) fn pixel_sources(edges: &[f64], lo: f64, hi: f64, pixels: usize) -> Vec<Range<usize>> {
    let cells = edges.len().saturating_sub(1);
    let centres: Vec<f64> = edges.windows(2).map(|e| (e[0] + e[1]) / 2.0).collect();
    let width = (hi - lo) / pixels.max(1) as f64;
    (0..pixels)
        .map(|p| {
            let start = lo + p as f64 * width;
            let end = lo + (p + 1) as f64 * width;
            let first = centres.partition_point(|&c| c < start);
            let last = if p + 1 == pixels {
                centres.partition_point(|&c| c <= hi)
            } else {
                centres.partition_point(|&c| c < end)
            };
            if first < last {
                return first..last;
            }
            let middle = (start + end) / 2.0;
            match edges.partition_point(|&e| e <= middle) {
                k if k >= 1 && k <= cells && middle < edges[k] => k - 1..k,
                _ => 0..0,
            }
        })
        .collect()
}

/// One stream's reduced spectrogram, filled row by row.
pub(crate) struct Spectrogram {
    plot: PlotSize,
    axis: FrequencyAxis,
    /// Closed columns, `axis.cells()` values each (bottom first; NaN: no data), oldest first.
    columns: Vec<f32>,
    /// Time of each closed column's first row.
    starts: Vec<f64>,
    /// Rows each column takes (a power of two; doubles each time the columns are halved).
    rows_per_column: u64,
    /// The column being filled, its first row's time and how many rows it holds.
    open: Vec<f32>,
    open_start: f64,
    open_rows: u64,
    rows: u64,
    /// Time of the last row, and how far it lies after the one before (None: one row so far).
    last_time: f64,
    last_step: Option<f64>,
    /// How long a row lasts when there is only one (its frame's duration).
    single_row_span: f64,
}

impl Spectrogram {
    /// An empty spectrogram for rows whose columns the axis describes; `single_row_span` is
    /// the time a lone row covers.
    pub(crate) fn new(plot: PlotSize, axis: FrequencyAxis, single_row_span: f64) -> Self {
        Spectrogram {
            open: vec![f32::NAN; axis.cells()],
            plot,
            axis,
            columns: Vec::new(),
            starts: Vec::new(),
            rows_per_column: 1,
            open_start: 0.0,
            open_rows: 0,
            rows: 0,
            last_time: 0.0,
            last_step: None,
            single_row_span,
        }
    }

    pub(crate) fn axis(&self) -> &FrequencyAxis {
        &self.axis
    }

    /// Adds one row (dB per column, in the stream's column order) that starts at `time_s`.
    pub(crate) fn push_row(&mut self, time_s: f64, row: &[f32]) {
        if self.rows > 0 {
            self.last_step = Some(time_s - self.last_time);
        }
        self.last_time = time_s;
        self.rows += 1;
        if self.open_rows == 0 {
            self.open_start = time_s;
        }
        self.axis.fold(row, &mut self.open);
        self.open_rows += 1;
        if self.open_rows == self.rows_per_column {
            self.close_column();
        }
    }

    fn close_column(&mut self) {
        self.columns.extend_from_slice(&self.open);
        self.starts.push(self.open_start);
        self.open.fill(f32::NAN);
        self.open_rows = 0;
        if self.starts.len() >= 2 * self.plot.width {
            self.halve_columns();
        }
    }

    /// Merges neighbouring columns pairwise by max: half as many, each twice the rows.
    fn halve_columns(&mut self) {
        let height = self.axis.cells();
        let pairs = self.starts.len() / 2;
        for i in 0..pairs {
            for r in 0..height {
                let (a, b) = (
                    self.columns[2 * i * height + r],
                    self.columns[(2 * i + 1) * height + r],
                );
                self.columns[i * height + r] = a.max(b);
            }
            self.starts[i] = self.starts[2 * i];
        }
        // always an even count: columns are halved when they reach 2 × width
        self.starts.truncate(pairs);
        self.columns.truncate(pairs * height);
        self.rows_per_column *= 2;
    }

    /// The grid mapped onto the plot's pixels.
    pub(crate) fn finish(mut self) -> SpectrogramImage {
        if self.open_rows > 0 {
            self.columns.extend_from_slice(&self.open);
            self.starts.push(self.open_start);
        }
        let (width, height) = (self.plot.width, self.plot.height);
        let span = self
            .last_step
            .filter(|s| *s > 0.0)
            .unwrap_or(self.single_row_span);
        let start = self.starts.first().copied().unwrap_or(0.0);
        let mut end = self.last_time + span;
        if end.partial_cmp(&start) != Some(std::cmp::Ordering::Greater) {
            end = start + 1.0;
        }
        let mut edges = self.starts.clone();
        edges.push(end);
        let cells = self.axis.cells();
        let mut values = vec![f32::NAN; width * height];
        let mut pixel_column = vec![f32::NAN; cells];
        for (x, source) in pixel_sources(&edges, start, end, width).iter().enumerate() {
            pixel_column.fill(f32::NAN);
            for c in source.clone() {
                let column = &self.columns[c * cells..(c + 1) * cells];
                for (p, &v) in pixel_column.iter_mut().zip(column) {
                    *p = p.max(v);
                }
            }
            self.axis.spread(&pixel_column, &mut values, width, x);
        }
        SpectrogramImage {
            plot: self.plot,
            values,
            time: (start, end),
            frequency: self.axis.scale,
            rows: self.rows,
            rows_per_column: self.rows_per_column,
        }
    }
}

/// A spectrogram mapped onto a plot: one dB value per pixel.
#[derive(Clone, Debug)]
pub(crate) struct SpectrogramImage {
    pub plot: PlotSize,
    /// Row-major, top row first (as an image is stored); NaN where there is no data.
    pub values: Vec<f32>,
    /// Time at the left and right edges, in s: pixel column x covers
    /// [left + x·(right−left)/width, left + (x+1)·(right−left)/width).
    pub time: (f64, f64),
    pub frequency: FrequencyScale,
    /// Rows (frames) drawn, and how many rows each column of the grid took before the mapping.
    pub rows: u64,
    pub rows_per_column: u64,
}

impl SpectrogramImage {
    /// The picture of no rows at all.
    pub(crate) fn empty(plot: PlotSize) -> Self {
        SpectrogramImage {
            plot,
            values: vec![f32::NAN; plot.width * plot.height],
            time: (0.0, 1.0),
            frequency: FrequencyScale::Linear {
                bottom: 0.0,
                top: 1.0,
            },
            rows: 0,
            rows_per_column: 1,
        }
    }

    /// The largest finite value, if any.
    pub(crate) fn max_db(&self) -> Option<f32> {
        self.values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .reduce(f32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot(width: usize, height: usize) -> PlotSize {
        PlotSize { width, height }
    }

    /// Index of the largest value in pixel column `x`, counted from the bottom.
    fn peak_row_from_bottom(image: &SpectrogramImage, x: usize) -> usize {
        let h = image.plot.height;
        let column: Vec<f32> = (0..h)
            .map(|y| image.values[y * image.plot.width + x])
            .collect();
        let top = (0..h)
            .max_by(|&a, &b| column[a].total_cmp(&column[b]))
            .unwrap();
        h - 1 - top
    }

    #[test]
    fn every_cell_is_shown_and_wide_cells_span_pixels() {
        // 10 cells over 4 pixels: each cell's centre in exactly one pixel
        let edges: Vec<f64> = (0..=10).map(|k| k as f64).collect();
        let s = pixel_sources(&edges, 0.0, 10.0, 4);
        assert_eq!(s, vec![0..2, 2..5, 5..7, 7..10]);
        // 2 cells over 5 pixels: the cell under each pixel's centre
        let s = pixel_sources(&[0.0, 1.0, 2.0], 0.0, 2.0, 5);
        assert_eq!(s, vec![0..1, 0..1, 1..2, 1..2, 1..2]);
        // nothing there: empty
        let s = pixel_sources(&[0.0, 1.0], 0.0, 4.0, 4);
        assert_eq!(s, vec![0..1, 0..0, 0..0, 0..0]);
    }

    #[test]
    fn a_tone_lands_on_its_pixel_row_and_negative_frequencies_go_below() {
        // complex input in FFT order: 0, 1, 2, 3, -4, -3, -2, -1 (× 100 Hz)
        let hz: Vec<f64> = [0., 1., 2., 3., -4., -3., -2., -1.]
            .iter()
            .map(|k| k * 100.0)
            .collect();
        let axis = FrequencyAxis::new(&hz, 8);
        assert_eq!(
            axis.scale,
            FrequencyScale::Linear {
                bottom: -400.0,
                top: 300.0
            }
        );
        let mut s = Spectrogram::new(plot(4, 8), axis, 1.0);
        let mut row = vec![-100.0f32; 8];
        row[5] = 0.0; // -300 Hz: second column from the bottom
        s.push_row(0.0, &row);
        let image = s.finish();
        assert_eq!(peak_row_from_bottom(&image, 0), 1);
    }

    #[test]
    fn uneven_columns_get_a_step_each() {
        let axis = FrequencyAxis::new(&[100.0, 200.0, 400.0, 800.0], 8);
        assert!(matches!(axis.scale, FrequencyScale::Columns { .. }));
        assert_eq!(axis.cells(), 4);
        assert_eq!(
            axis.rows,
            vec![0..1, 0..1, 1..2, 1..2, 2..3, 2..3, 3..4, 3..4]
        );
    }

    #[test]
    fn a_one_frame_burst_survives_any_length() {
        let axis = FrequencyAxis::new(&[0.0, 1.0, 2.0, 3.0], 4);
        let mut s = Spectrogram::new(plot(10, 4), axis, 1.0);
        let rows = 10_000u64;
        for k in 0..rows {
            let v = if k == 6_543 { 0.0 } else { -120.0 };
            s.push_row(k as f64, &[v, v, v, v]);
        }
        assert!(s.starts.len() < 2 * 10 && s.rows_per_column > 1);
        let image = s.finish();
        assert_eq!(image.rows, rows);
        let hot: Vec<usize> = (0..10)
            .filter(|&x| image.values[x] > -1.0) // top pixel row
            .collect();
        // the burst at 65.43 % of the time: pixel column 6
        assert_eq!(hot, vec![6]);
        assert_eq!(image.time, (0.0, rows as f64));
    }

    #[test]
    fn a_short_input_spans_the_width() {
        let axis = FrequencyAxis::new(&[0.0, 1.0], 2);
        let mut s = Spectrogram::new(plot(8, 2), axis, 0.5);
        s.push_row(0.0, &[0.0, -50.0]);
        s.push_row(1.0, &[-50.0, 0.0]);
        let image = s.finish();
        assert_eq!(image.time, (0.0, 2.0));
        // left half: the first row (low bin loud, bottom); right half: the second
        assert_eq!(peak_row_from_bottom(&image, 0), 0);
        assert_eq!(peak_row_from_bottom(&image, 3), 0);
        assert_eq!(peak_row_from_bottom(&image, 4), 1);
        assert_eq!(peak_row_from_bottom(&image, 7), 1);
    }
}
