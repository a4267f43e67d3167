//! Band matrices for `--bands`: they turn the power spectrum of a real frame (n_fft/2+1 bins, bin k
//! at k·sr/n_fft Hz) into band powers, one sparse row of bin weights per band; band power =
//! Σ weight·bin power. Output columns are the bands, named by their centre frequencies.
//!
//! `--bands` values ([`BandSpec`]):
//! - `mel:N[,htk][,norm=slaney|none][,fmin=HZ][,fmax=HZ]`: librosa's filter bank,
//!   `librosa.filters.mel(sr, n_fft, n_mels=N, fmin, fmax, htk, norm)`, computed the same way in f64,
//!   so band powers are `librosa.feature.melspectrogram(S=power, ...)` (power=2.0). Defaults as in
//!   librosa: the Slaney mel scale (linear below 1000 Hz at 200/3 Hz per mel, logarithmic above with
//!   step ln(6.4)/27), Slaney norm (each triangle scaled by 2/(its upper − lower edge in Hz)),
//!   fmin 0, fmax Nyquist. `htk` uses mel = 2595·log10(1 + f/700); `norm=none` leaves triangles with
//!   a peak of 1. The N+2 mel points are spaced evenly in mel from fmin to fmax; band i rises from
//!   point i to point i+1 (its centre) and falls to point i+2 (its edges). More bands than bins,
//!   fmin >= fmax and fmax above Nyquist are errors. As in librosa, a band narrower than the bin
//!   spacing may hold no bin at all ([`BandMatrix::empty_bands`] lists them).
//! - `octave`, `third-octave`, optionally `:fmin=HZ,fmax=HZ`: IEC 61260-1 base-10 bands. With
//!   G = 10^(3/10) and b = 1 or 3 bands per octave, the exact mid-band frequencies are
//!   f_m = 1000·G^(x/b) Hz for integer x and the band edges f_m·G^(∓1/(2b)) (computed as
//!   1000·G^((2x∓1)/(2b)), so neighbouring bands share their edge bit for bit).
//!   **Which bands:** every band whose lower edge is at or above the top of the DC bin (Δf/2, with
//!   Δf = sr/n_fft) and whose upper edge is at or below Nyquist (sr/2); with fmin/fmax, only those
//!   whose nominal mid-band frequency (IEC 61260-1 Annex E: 20, 25, 31.5 … 20000 Hz, the names
//!   users type; `iec`) or exact one (the column labels) also lies in [fmin, fmax], either within
//!   0.1 %, so `fmin=20,fmax=20000` keeps the bands of 19.95 and 19953 Hz, and so do
//!   `fmin=19.9526,fmax=19952.6`. No band fitting is an error.
//!   **Edge bins:** bin k stands for the frequency interval [(k−½)Δf, (k+½)Δf] clipped to [0, sr/2]
//!   (the DC bin covers [0, Δf/2], the Nyquist bin of an even frame [sr/2 − Δf/2, sr/2]), its power
//!   spread evenly over it. Its weight in a band is the fraction of that interval inside the band's
//!   edges: 1 for bins wholly inside, a fraction for the bins the edges cut. A bin cut by the edge
//!   between two bands is split between them in proportion, the two weights summing to 1: no power
//!   is counted twice, and the band powers add up to the power between the lowest band's lower edge
//!   and the highest band's upper edge (bins spread evenly over their intervals).
//!
//! Errors are one line naming the `--bands` value: `--bands mel:0: ...`.

use crate::types::{shown, Sample};

mod iec;
mod parse;
use iec::IecBand;
use parse::{check_fmin_below_fmax, one_line};

/// What `--bands` asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum BandSpec {
    /// `mel:N[,...]`: a librosa mel filter bank.
    Mel(MelBands),
    /// `octave` or `third-octave`: IEC 61260-1 base-10 fractional-octave bands.
    Octave(OctaveBands),
}

/// The parameters of `librosa.filters.mel`.
#[derive(Clone, Debug, PartialEq)]
pub struct MelBands {
    /// Number of mel bands (librosa's `n_mels`).
    pub count: usize,
    /// librosa's `htk` (false: Slaney).
    pub scale: MelScale,
    /// librosa's `norm` ('slaney' or None).
    pub norm: MelNorm,
    /// Lowest frequency of the filter bank, Hz (librosa's `fmin`).
    pub fmin_hz: f64,
    /// Highest frequency of the filter bank, Hz (librosa's `fmax`); None: Nyquist.
    pub fmax_hz: Option<f64>,
}

/// Which Hz ↔ mel formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MelScale {
    /// Slaney's Auditory Toolbox (librosa's default): linear below 1 kHz, logarithmic above.
    Slaney,
    /// HTK: mel = 2595·log10(1 + f/700).
    Htk,
}

/// How each mel triangle is scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MelNorm {
    /// Area normalisation (librosa's default): weights × 2/(upper edge − lower edge).
    Slaney,
    /// None: triangles peak at 1.
    None,
}

/// Fractional-octave bands and an optional range of mid-band frequencies.
#[derive(Clone, Debug, PartialEq)]
pub struct OctaveBands {
    /// Octave or third-octave.
    pub fraction: OctaveFraction,
    /// Only bands whose nominal mid-band frequency is at least this, Hz.
    pub fmin_hz: Option<f64>,
    /// Only bands whose nominal mid-band frequency is at most this, Hz.
    pub fmax_hz: Option<f64>,
}

/// Bands per octave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OctaveFraction {
    /// One band per octave (b = 1).
    Octave,
    /// Three bands per octave (b = 3).
    ThirdOctave,
}

impl OctaveFraction {
    /// IEC 61260-1's b: 1 or 3.
    pub(crate) fn bands_per_octave(self) -> u32 {
        match self {
            OctaveFraction::Octave => 1,
            OctaveFraction::ThirdOctave => 3,
        }
    }

    /// The `--bands` keyword.
    pub fn name(self) -> &'static str {
        match self {
            OctaveFraction::Octave => "octave",
            OctaveFraction::ThirdOctave => "third-octave",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Band matrices
// ---------------------------------------------------------------------------------------------

/// A `BandWeights::id` not given before in this process (device caches tell matrices apart by it).
pub(crate) fn next_matrix_id() -> u64 {
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// One band's weights: bins `first_bin .. first_bin + weights.len()`; every other bin weighs 0.
#[derive(Clone, Debug, PartialEq)]
pub struct BandRow {
    /// The first bin with a nonzero weight (meaningless when `weights` is empty).
    pub first_bin: usize,
    /// The weights of bins `first_bin..`, all > 0; empty for a band no bin reaches.
    pub weights: Vec<f64>,
}

/// The bands × bins matrix that turns one power spectrum into band powers, stored as sparse rows.
#[derive(Clone, Debug, PartialEq)]
pub struct BandMatrix {
    centres_hz: Vec<f64>,
    edges_hz: Vec<(f64, f64)>,
    rows: Vec<BandRow>,
    bins: usize,
}

impl BandMatrix {
    /// The matrix of `spec` for real frames of `n_fft` samples at `sample_rate` Hz (power spectra
    /// of n_fft/2+1 bins). The error is one line naming the `--bands` value.
    pub fn new(spec: &BandSpec, n_fft: usize, sample_rate: f64) -> Result<Self, String> {
        let fail = |why: String| one_line(&format!("--bands {spec}: {why}"));
        let grid = BinGrid::new(n_fft, sample_rate).map_err(fail)?;
        match spec {
            BandSpec::Mel(mel) => mel_matrix(mel, &grid),
            BandSpec::Octave(bands) => octave_matrix(bands, &grid),
        }
        .map_err(fail)
    }

    /// Number of bands (output columns).
    pub fn bands(&self) -> usize {
        self.rows.len()
    }

    /// Number of spectrum bins the matrix takes (n_fft/2+1).
    pub fn bins(&self) -> usize {
        self.bins
    }

    /// Each band's centre frequency, Hz: the middle mel point, or the exact IEC mid-band frequency.
    pub fn centres_hz(&self) -> &[f64] {
        &self.centres_hz
    }

    /// Each band's (lower, upper) edge, Hz: where its weights reach 0 (mel) or its IEC band edges.
    pub fn edges_hz(&self) -> &[(f64, f64)] {
        &self.edges_hz
    }

    /// The sparse rows, one per band.
    pub fn rows(&self) -> &[BandRow] {
        &self.rows
    }

    /// Each band's (first bin, number of bins) with a nonzero weight.
    pub fn spans(&self) -> Vec<(usize, usize)> {
        self.rows
            .iter()
            .map(|row| (row.first_bin, row.weights.len()))
            .collect()
    }

    /// The bands that no bin reaches (their power is always 0); librosa warns about these.
    pub(crate) fn empty_bands(&self) -> Vec<usize> {
        self.rows
            .iter()
            .enumerate()
            .filter(|(_, row)| row.weights.is_empty())
            .map(|(band, _)| band)
            .collect()
    }

    /// Band powers of one power spectrum: `bands[i] = Σ_k weight[i][k]·power[k]`, accumulated in
    /// f64.
    ///
    /// # Panics
    /// When `power` does not hold [`Self::bins`] values or `bands` [`Self::bands`] values.
    pub fn apply<T: Sample>(&self, power: &[T], bands: &mut [T]) {
        assert_eq!(power.len(), self.bins, "power spectrum length");
        assert_eq!(bands.len(), self.rows.len(), "band output length");
        self.weights().apply(power, bands);
    }

    /// The matrix as engines take it (`fft::BandWeights`: spans and weights back to back), with
    /// an id of its own.
    pub fn weights(&self) -> crate::fft::BandWeights {
        let mut weights = crate::fft::BandWeights {
            bins: self.bins,
            first: Vec::with_capacity(self.rows.len()),
            len: Vec::with_capacity(self.rows.len()),
            offset: Vec::with_capacity(self.rows.len()),
            weights: Vec::new(),
            id: next_matrix_id(),
            finish: crate::fft::RowFinish::AsIs,
            unit: 1.0,
        };
        for row in &self.rows {
            weights.first.push(row.first_bin as u32);
            weights.len.push(row.weights.len() as u32);
            weights.offset.push(weights.weights.len() as u32);
            weights.weights.extend_from_slice(&row.weights);
        }
        weights
    }

    /// The dense matrix in f64, row-major, bands × bins.
    pub fn dense_f64(&self) -> Vec<f64> {
        let mut dense = vec![0.0; self.rows.len() * self.bins];
        for (row, dense_row) in self.rows.iter().zip(dense.chunks_mut(self.bins.max(1))) {
            dense_row[row.first_bin..row.first_bin + row.weights.len()]
                .copy_from_slice(&row.weights);
        }
        dense
    }

    /// The dense matrix in f32, row-major, bands × bins (for a device kernel).
    #[cfg(test)]
    pub(crate) fn dense_f32(&self) -> Vec<f32> {
        self.dense_f64().into_iter().map(|w| w as f32).collect()
    }
}

/// The bins of a real frame: n_fft/2+1 of them, bin k at k·sr/n_fft Hz.
struct BinGrid {
    n_fft: usize,
    sample_rate: f64,
}

impl BinGrid {
    fn new(n_fft: usize, sample_rate: f64) -> Result<Self, String> {
        if n_fft < 2 {
            return Err(format!(
                "a frame of {n_fft} sample(s) has no bands: frames need at least 2 samples"
            ));
        }
        if !(sample_rate.is_finite() && sample_rate > 0.0) {
            return Err(format!(
                "sample rate {sample_rate} Hz: bands need a positive sample rate"
            ));
        }
        Ok(BinGrid { n_fft, sample_rate })
    }

    fn bins(&self) -> usize {
        self.n_fft / 2 + 1
    }

    fn nyquist_hz(&self) -> f64 {
        self.sample_rate / 2.0
    }

    /// Δf, the distance between bins.
    fn spacing_hz(&self) -> f64 {
        self.sample_rate / self.n_fft as f64
    }

    /// Bin frequencies computed as `np.fft.rfftfreq(n_fft, 1/sr)` computes them.
    fn rfftfreq_hz(&self) -> Vec<f64> {
        let step = 1.0 / (self.n_fft as f64 * (1.0 / self.sample_rate));
        (0..self.bins()).map(|k| k as f64 * step).collect()
    }

    /// The frequency interval bin `k` stands for: [(k−½)Δf, (k+½)Δf] clipped to [0, Nyquist].
    fn interval_hz(&self, k: usize) -> (f64, f64) {
        let spacing = self.spacing_hz();
        let lower = ((k as f64 - 0.5) * spacing).max(0.0);
        let upper = ((k as f64 + 0.5) * spacing).min(self.nyquist_hz());
        (lower, upper)
    }

    /// The bin whose interval holds `hz` (the upper one on a boundary; the last bin above it).
    fn bin_holding(&self, hz: f64) -> usize {
        let k = (hz / self.spacing_hz() + 0.5).floor();
        // `as` saturates (NaN → 0); the min keeps it a bin
        (k as usize).min(self.bins() - 1)
    }

    /// The fraction of bin `k`'s interval inside [lower_hz, upper_hz].
    fn fraction_inside(&self, k: usize, lower_hz: f64, upper_hz: f64) -> f64 {
        let (bin_lower, bin_upper) = self.interval_hz(k);
        let width = bin_upper - bin_lower;
        let overlap = upper_hz.min(bin_upper) - lower_hz.max(bin_lower);
        if width > 0.0 && overlap > 0.0 {
            overlap / width
        } else {
            0.0
        }
    }
}

/// A row of weights starting at `first_bin`, without its leading and trailing zeros.
fn trimmed_row(first_bin: usize, weights: Vec<f64>) -> BandRow {
    let Some(start) = weights.iter().position(|&w| w != 0.0) else {
        return BandRow {
            first_bin,
            weights: Vec::new(),
        };
    };
    let end = weights.iter().rposition(|&w| w != 0.0).map_or(start, |e| e) + 1;
    BandRow {
        first_bin: first_bin + start,
        weights: weights[start..end].to_vec(),
    }
}

// ---------------------------------------------------------------------------------------------
// Mel (librosa.filters.mel)
// ---------------------------------------------------------------------------------------------

/// Slaney scale: Hz per mel below 1 kHz (librosa's `f_sp`).
const SLANEY_HZ_PER_MEL: f64 = 200.0 / 3.0;
/// Slaney scale: where the logarithmic part starts (librosa's `min_log_hz`).
const SLANEY_LOG_START_HZ: f64 = 1000.0;
/// The same point in mels (librosa's `min_log_mel`, computed as librosa does).
const SLANEY_LOG_START_MEL: f64 = (SLANEY_LOG_START_HZ - 0.0) / SLANEY_HZ_PER_MEL;

/// Slaney scale: natural-log step per mel above 1 kHz (librosa's `logstep`).
fn slaney_log_step() -> f64 {
    6.4f64.ln() / 27.0
}

/// librosa.hz_to_mel.
fn hz_to_mel(hz: f64, scale: MelScale) -> f64 {
    match scale {
        MelScale::Htk => 2595.0 * (1.0 + hz / 700.0).log10(),
        MelScale::Slaney if hz >= SLANEY_LOG_START_HZ => {
            SLANEY_LOG_START_MEL + (hz / SLANEY_LOG_START_HZ).ln() / slaney_log_step()
        }
        MelScale::Slaney => (hz - 0.0) / SLANEY_HZ_PER_MEL,
    }
}

/// librosa.mel_to_hz.
fn mel_to_hz(mel: f64, scale: MelScale) -> f64 {
    match scale {
        MelScale::Htk => 700.0 * (10f64.powf(mel / 2595.0) - 1.0),
        MelScale::Slaney if mel >= SLANEY_LOG_START_MEL => {
            SLANEY_LOG_START_HZ * (slaney_log_step() * (mel - SLANEY_LOG_START_MEL)).exp()
        }
        MelScale::Slaney => 0.0 + SLANEY_HZ_PER_MEL * mel,
    }
}

/// librosa.mel_frequencies(count, fmin, fmax, htk): `count` (>= 2) frequencies evenly spaced in
/// mel, spaced as `np.linspace` spaces them.
fn mel_points_hz(count: usize, fmin_hz: f64, fmax_hz: f64, scale: MelScale) -> Vec<f64> {
    let (low, high) = (hz_to_mel(fmin_hz, scale), hz_to_mel(fmax_hz, scale));
    let step = (high - low) / (count - 1) as f64;
    (0..count)
        .map(|i| {
            if i + 1 == count {
                high
            } else {
                i as f64 * step + low
            }
        })
        .map(|mel| mel_to_hz(mel, scale))
        .collect()
}

fn mel_matrix(mel: &MelBands, grid: &BinGrid) -> Result<BandMatrix, String> {
    let (fmin_hz, fmax_hz) = checked_mel_limits(mel, grid)?;
    let points = mel_points_hz(mel.count + 2, fmin_hz, fmax_hz, mel.scale);
    if points
        .windows(2)
        .any(|pair| !pair[1].is_finite() || pair[1] <= pair[0])
    {
        return Err(format!(
            "fmin={} and fmax={} Hz are too close for {} mel bands",
            shown(fmin_hz),
            shown(fmax_hz),
            mel.count
        ));
    }
    let bin_hz = grid.rfftfreq_hz();
    let rows = points
        .windows(3)
        .map(|p| mel_row([p[0], p[1], p[2]], &bin_hz, mel.norm))
        .collect();
    Ok(BandMatrix {
        centres_hz: points[1..=mel.count].to_vec(),
        edges_hz: points.windows(3).map(|p| (p[0], p[2])).collect(),
        rows,
        bins: grid.bins(),
    })
}

/// fmin and fmax (Nyquist when not given), checked against the frame.
fn checked_mel_limits(mel: &MelBands, grid: &BinGrid) -> Result<(f64, f64), String> {
    let (bins, nyquist) = (grid.bins(), grid.nyquist_hz());
    if mel.count == 0 {
        return Err("the number of mel bands must be at least 1".into());
    }
    if mel.count > bins {
        return Err(format!(
            "more bands ({}) than the {bins} frequency bins of frame {}",
            mel.count, grid.n_fft
        ));
    }
    let fmax = mel.fmax_hz.unwrap_or(nyquist);
    check_limits_in_frame(Some(mel.fmin_hz), Some(fmax), grid)?;
    Ok((mel.fmin_hz, fmax))
}

/// fmin/fmax must be finite, >= 0 and at most Nyquist.
fn check_limits_in_frame(
    fmin_hz: Option<f64>,
    fmax_hz: Option<f64>,
    grid: &BinGrid,
) -> Result<(), String> {
    for (name, hz) in [("fmin", fmin_hz), ("fmax", fmax_hz)] {
        let Some(hz) = hz else { continue };
        if !(hz.is_finite() && hz >= 0.0) {
            return Err(format!(
                "{name}={}: expected a frequency in Hz >= 0",
                shown(hz)
            ));
        }
        if hz > grid.nyquist_hz() {
            return Err(format!(
                "{name}={} Hz is above Nyquist ({} Hz at {} Hz sample rate)",
                shown(hz),
                shown(grid.nyquist_hz()),
                shown(grid.sample_rate)
            ));
        }
    }
    check_fmin_below_fmax(fmin_hz, fmax_hz)
}

/// One mel triangle over the bins, as librosa computes it: rising from `lower` to `centre`,
/// falling to `upper` (Hz), then scaled by the norm. Only bins strictly between `lower` and
/// `upper` can weigh more than 0, so only they are computed.
fn mel_row([lower, centre, upper]: [f64; 3], bin_hz: &[f64], norm: MelNorm) -> BandRow {
    let (rise, fall) = (centre - lower, upper - centre);
    let scale = match norm {
        MelNorm::Slaney => 2.0 / (upper - lower),
        MelNorm::None => 1.0,
    };
    let start = bin_hz.partition_point(|&f| f <= lower);
    let end = bin_hz.partition_point(|&f| f < upper).max(start);
    let weights = bin_hz[start..end]
        .iter()
        .map(|&f| {
            // librosa: lower = -ramps[i] / fdiff[i], upper = ramps[i + 2] / fdiff[i + 1]
            let rising = -(lower - f) / rise;
            let falling = (upper - f) / fall;
            rising.min(falling).max(0.0) * scale
        })
        .collect();
    trimmed_row(start, weights)
}

fn octave_matrix(spec: &OctaveBands, grid: &BinGrid) -> Result<BandMatrix, String> {
    check_limits_in_frame(spec.fmin_hz, spec.fmax_hz, grid)?;
    let per_octave = spec.fraction.bands_per_octave();
    let lowest_hz = grid.spacing_hz() / 2.0;
    let nyquist = grid.nyquist_hz();
    let wanted = |band: &IecBand| {
        band.lower_hz >= lowest_hz
            && band.upper_hz <= nyquist
            && band.named_within(spec.fmin_hz, spec.fmax_hz)
    };
    let bands: Vec<IecBand> = iec::indices_around(lowest_hz, nyquist, per_octave)
        .map(|x| IecBand::new(x, per_octave))
        .filter(wanted)
        .collect();
    if bands.is_empty() {
        return Err(format!(
            "no {} band fits between {lowest_hz} Hz (the top of the DC bin) and Nyquist \
             ({nyquist} Hz){}: use a longer frame or a wider range",
            spec.fraction.name(),
            if spec.fmin_hz.is_some() || spec.fmax_hz.is_some() {
                " with nominal mid-band frequency within fmin..fmax"
            } else {
                ""
            }
        ));
    }
    Ok(BandMatrix {
        centres_hz: bands.iter().map(|b| b.centre_hz).collect(),
        edges_hz: bands.iter().map(|b| (b.lower_hz, b.upper_hz)).collect(),
        rows: bands
            .iter()
            .map(|b| edge_split_row(b.lower_hz, b.upper_hz, grid))
            .collect(),
        bins: grid.bins(),
    })
}

/// The weights of the band [lower_hz, upper_hz]: each bin's fraction of its interval inside it.
fn edge_split_row(lower_hz: f64, upper_hz: f64, grid: &BinGrid) -> BandRow {
    let first = grid.bin_holding(lower_hz);
    let last = grid.bin_holding(upper_hz).max(first);
    let weights = (first..=last)
        .map(|k| grid.fraction_inside(k, lower_hz, upper_hz))
        .collect();
    trimmed_row(first, weights)
}

#[cfg(test)]
mod tests;
