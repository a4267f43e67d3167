//! `--peaks N`: a row's N strongest local maxima, strongest first, each with its frequency and
//! level interpolated by a parabola through the dB levels of the peak bin and its two
//! neighbours (δ = ½(α − γ)/(α − 2β + γ) bins, level β − ¼(α − γ)·δ). With the default Hann
//! window an off-bin tone's frequency comes out within a few hundredths of a bin. Levels are dB
//! in the run's unit; a peak needs a lower or equal neighbour on each side (the row's first and
//! last columns are never peaks). Fewer maxima than N: the rest are NaN.

/// The `count` strongest peaks of a row of `power` at `frequencies` (evenly spaced), as
/// (Hz, dB), strongest first.
pub(crate) fn strongest(frequencies: &[f64], power: &[f64], count: usize) -> Vec<(f64, f64)> {
    let db: Vec<f64> = power.iter().map(|&p| super::db(p)).collect();
    let mut maxima: Vec<usize> = (1..db.len().saturating_sub(1))
        .filter(|&k| db[k] > db[k - 1] && db[k] >= db[k + 1])
        .collect();
    maxima.sort_by(|&a, &b| db[b].total_cmp(&db[a]));
    maxima
        .into_iter()
        .take(count)
        .map(|k| {
            let (a, b, c) = (db[k - 1], db[k], db[k + 1]);
            let curve = a - 2.0 * b + c;
            let delta = if curve < 0.0 {
                0.5 * (a - c) / curve
            } else {
                0.0
            };
            let step = frequencies[k + 1] - frequencies[k];
            (frequencies[k] + delta * step, b - 0.25 * (a - c) * delta)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_peaks_come_strongest_first_and_missing_ones_are_nan_free() {
        let f: Vec<f64> = (0..8).map(|k| k as f64 * 10.0).collect();
        let p = [0.0, 1.0, 4.0, 1.0, 0.0, 2.0, 8.0, 2.0];
        let found = strongest(&f, &p, 3);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, 60.0);
        assert_eq!(found[1].0, 20.0);
        assert!((found[0].1 - 10.0 * 8f64.log10()).abs() < 1e-9);
    }
}
