//! Column sums in f64 that stay finite wherever their terms are: the means of `--average`
//! (runs reduced on the host, `Segments::reduce`, and the averager's groups). An f64 run of
//! samples near 1e153 has powers near 1e308, and 1000 of them added past f64's range, so the
//! mean was written +inf where it fits (and where the device, which scales its sums, wrote it).
//!
//! The sums are held times `scale`, a power of two: 1 until an addition of finite terms would
//! leave the range, then `SCALED_DOWN` (exact, but for values already near f64's smallest),
//! below which no sum of 2^64 finite terms times weights up to 2^32 (a segment's frames) can
//! pass it. Sums of f32 values never come near: for them the scale stays 1 and every bit is as
//! a plain sum's.

/// The scale once sums would overflow: 2^-128.
const SCALED_DOWN: f64 = 1.0 / (1u128 << 127) as f64 / 2.0;

#[derive(Clone, Debug)]
pub(crate) struct ScaledSums {
    sums: Vec<f64>,
    scale: f64,
}

impl ScaledSums {
    /// `columns` sums of 0.
    pub(crate) fn new(columns: usize) -> Self {
        ScaledSums {
            sums: vec![0.0; columns],
            scale: 1.0,
        }
    }

    /// Every sum back to 0.
    pub(crate) fn clear(&mut self) {
        self.sums.fill(0.0);
        self.scale = 1.0;
    }

    /// Adds `values[i] · weight` to sum i.
    pub(crate) fn add(&mut self, values: impl Iterator<Item = f64>, weight: f64) {
        for (i, v) in values.enumerate().take(self.sums.len()) {
            let next = self.sums[i] + v * (weight * self.scale);
            self.sums[i] = match next.is_infinite() && v.is_finite() && self.scale == 1.0 {
                false => next,
                true => {
                    self.scale_down();
                    self.sums[i] + v * (weight * self.scale)
                }
            };
        }
    }

    /// Each sum over `count` (the mean of `count` terms), as the sums are not scaled.
    pub(crate) fn means(&self, count: f64) -> impl Iterator<Item = f64> + '_ {
        self.sums.iter().map(move |s| s / count / self.scale)
    }

    fn scale_down(&mut self) {
        self.sums.iter_mut().for_each(|s| *s *= SCALED_DOWN);
        self.scale = SCALED_DOWN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_of_finite_terms_stay_finite_and_small_ones_keep_their_bits() {
        assert_eq!(SCALED_DOWN, 2f64.powi(-128));
        let mut sums = ScaledSums::new(3);
        let rows = [
            [1e308, 0.5, f64::NAN],
            [1.7e308, 0.25, 1.0],
            [1e308, 1.0, 2.0],
        ];
        for row in rows {
            sums.add(row.into_iter(), 1000.0);
        }
        let means: Vec<f64> = sums.means(3000.0).collect();
        assert!(
            (means[0] - 3.7e307 / 3.0 * 10.0).abs() <= 1e-15 * means[0],
            "{means:?}"
        );
        assert!((means[1] - 1.75 / 3.0).abs() <= 1e-15, "{means:?}");
        assert!(means[2].is_nan());
        // f32 values: exactly a plain f64 sum's mean
        let mut plain = ScaledSums::new(2);
        let values = [[3.5f32, 1e38], [0.1, 3e38], [7.0, f32::MAX]];
        for row in values {
            plain.add(row.iter().map(|&v| f64::from(v)), 16.0);
        }
        let want: Vec<f64> = (0..2)
            .map(|c| values.iter().map(|r| f64::from(r[c]) * 16.0).sum::<f64>() / 48.0)
            .collect();
        assert_eq!(plain.means(48.0).collect::<Vec<_>>(), want);
        // an infinite term is an infinite sum, not a scaled one
        let mut inf = ScaledSums::new(1);
        inf.add([f64::INFINITY].into_iter(), 1.0);
        inf.add([1.0].into_iter(), 1.0);
        assert_eq!(inf.means(2.0).next(), Some(f64::INFINITY));
        inf.clear();
        inf.add([2.0].into_iter(), 1.0);
        assert_eq!(inf.means(1.0).next(), Some(2.0));
    }
}
