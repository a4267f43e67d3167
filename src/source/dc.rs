//! `--dc-remove`: takes out the DC spike of I/Q receivers (the LO leakage and ADC offset that
//! sit in the centre bin) the way SoapyPower's `-D constant` and `scipy.signal.welch(...,
//! detrend='constant')` do: each frame's mean, over its N samples (I and Q apart for complex
//! input; a zero-padded last frame's padding counts as samples), is subtracted from the frame
//! before the window. Frames stay independent (no state across frames), so any reader or
//! worker can apply it, in any order.

use crate::types::Sample;

/// Subtracts each frame's mean from the frames back to back in `data` (`width` values per
/// sample: 1 real, 2 complex re,im; `frame_values` values per frame).
pub(crate) fn remove_frame_means<T: Sample>(data: &mut [T], frame_values: usize, width: usize) {
    if frame_values == 0 || width == 0 {
        return;
    }
    for frame in data.chunks_exact_mut(frame_values) {
        let samples = (frame_values / width) as f64;
        for part in 0..width {
            let sum: f64 = frame
                .iter()
                .skip(part)
                .step_by(width)
                .map(|v| v.into_f64())
                .sum();
            let mean = sum / samples;
            for v in frame.iter_mut().skip(part).step_by(width) {
                *v = T::of_f64(v.into_f64() - mean);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_frame_and_part_loses_its_own_mean() {
        let mut data = vec![1.0f64, 10.0, 3.0, 20.0, 5.0, 5.0, 7.0, 5.0];
        remove_frame_means(&mut data, 4, 2);
        assert_eq!(data, [-1.0, -5.0, 1.0, 5.0, -1.0, 0.0, 1.0, 0.0]);
    }
}
