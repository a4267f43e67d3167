//! What every stage knows about a stream: its id, input, rate, kind and labels.

use super::InputKind;

/// What a sink needs to know about a stream.
#[derive(Clone, Debug)]
pub(crate) struct StreamMeta {
    pub id: usize,
    /// Input path or device name.
    pub input: String,
    /// Channel carried, when one channel was picked out of several.
    pub channel: Option<usize>,
    pub rate: f64,
    pub kind: InputKind,
    pub fftshift: bool,
    /// Frequency in Hz of each column when products choose the columns (bands, a range).
    pub columns: Option<std::sync::Arc<Vec<f64>>>,
    /// Where the input was tuned (`--center-freq`, SigMF captures): bins are labelled in
    /// absolute frequency when one centre covers it (`types::tuning` says how outputs show it).
    pub tuning: Option<std::sync::Arc<crate::types::Tuning>>,
}

impl StreamMeta {
    /// Frequency bins per frame for frames of `n` samples (values per frame but with
    /// `--scale complex`, which writes two per bin).
    pub(crate) fn bins(&self, n: usize) -> usize {
        match self.kind {
            InputKind::Real => n / 2 + 1,
            InputKind::Complex => n,
        }
    }

    /// Frequency in Hz of each column of a row: the products' columns, else every bin's.
    pub(crate) fn column_frequencies(&self, n: usize) -> Vec<f64> {
        match &self.columns {
            Some(columns) => columns.to_vec(),
            None => self.frequencies(n),
        }
    }

    /// The lowest and highest frequency of a row's columns, Hz (`column_frequencies`).
    pub(crate) fn column_span(&self, n: usize) -> (f64, f64) {
        let hz = self.column_frequencies(n);
        let low = hz.iter().copied().fold(f64::INFINITY, f64::min);
        let high = hz.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (low, high)
    }

    /// The centre added to every label: the input's one centre frequency, else 0 (baseband).
    pub(crate) fn label_center(&self) -> f64 {
        self.tuning.as_ref().and_then(|t| t.single()).unwrap_or(0.0)
    }

    /// The centre of the capture a row starting at `time_s` belongs to (None: not known).
    pub(crate) fn row_center(&self, time_s: f64) -> Option<f64> {
        self.tuning.as_ref()?.center_at_time(time_s, self.rate)
    }

    /// Whether the input's captures lie at different centres: labels are then offsets from the
    /// centre, and every row says its own.
    pub(crate) fn retuned(&self) -> bool {
        self.tuning.as_ref().is_some_and(|t| t.varies())
    }

    /// Frequency in Hz of each output bin, in output order (numpy's rfftfreq / fftfreq, shifted
    /// with `--fftshift`), plus `label_center`.
    pub(crate) fn frequencies(&self, n: usize) -> Vec<f64> {
        let center = self.label_center();
        let mut f = self.baseband_frequencies(n);
        if center != 0.0 {
            f.iter_mut().for_each(|v| *v += center);
        }
        f
    }

    /// `frequencies` without the centre.
    fn baseband_frequencies(&self, n: usize) -> Vec<f64> {
        let step = self.rate / n as f64;
        match self.kind {
            InputKind::Real => (0..=n / 2).map(|k| k as f64 * step).collect(),
            InputKind::Complex => {
                let signed = |k: usize| {
                    if k < n.div_ceil(2) {
                        k as f64
                    } else {
                        k as f64 - n as f64
                    }
                };
                let mut f: Vec<f64> = (0..n).map(|k| signed(k) * step).collect();
                if self.fftshift {
                    f.rotate_left(n.div_ceil(2));
                }
                f
            }
        }
    }
}
