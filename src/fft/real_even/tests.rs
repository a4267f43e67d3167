use super::*;
use realfft::RealFftPlanner;

/// The spectra of `frames` frames of `n` values by `RealEven` and by realfft, as bits.
fn both<T: Sample>(n: usize, frames: usize) -> (Vec<Complex<T>>, Vec<Complex<T>>) {
    let ours = RealEven::<T>::new(n, &mut FftPlanner::new());
    let theirs = RealFftPlanner::<T>::new().plan_fft_forward(n);
    let mut scratch = vec![Complex::default(); ours.scratch_len()];
    let mut their_scratch = theirs.make_scratch_vec();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for f in 0..frames {
        let frame: Vec<T> = (0..n)
            .map(|i| T::of_f64(((i * 7919 + f * 104_729) % 1000) as f64 / 500.0 - 1.0))
            .collect();
        let (mut a, mut b) = (frame.clone(), frame);
        let mut bins = vec![Complex::default(); n / 2 + 1];
        ours.process(&mut a, &mut bins, &mut scratch);
        got.extend(bins);
        let mut bins = theirs.make_output_vec();
        theirs
            .process_with_scratch(&mut b, &mut bins, &mut their_scratch)
            .expect("realfft");
        want.extend(bins);
    }
    (got, want)
}

fn same_bits<T: Sample>(n: usize, frames: usize) {
    let (got, want) = both::<T>(n, frames);
    let bits = |v: &[Complex<T>]| -> Vec<(f64, f64)> {
        v.iter()
            .map(|z| (z.re.into_f64(), z.im.into_f64()))
            .collect()
    };
    let (got, want) = (bits(&got), bits(&want));
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits();
        assert!(
            same(g.0, w.0) && same(g.1, w.1),
            "n {n} {}: bin {k}: {g:?} against {w:?}",
            T::NAME
        );
    }
    assert_eq!(got.len(), want.len());
}

#[test]
fn every_even_size_to_600_gives_realffts_bits_in_f32_and_f64() {
    for n in (2..=600).step_by(2) {
        same_bits::<f32>(n, 2);
        same_bits::<f64>(n, 2);
    }
}

#[test]
fn powers_of_two_and_audio_sizes_give_realffts_bits() {
    let sizes = (2..=16)
        .map(|p| 1usize << p)
        .chain([960, 1000, 1920, 2400, 44100, 48000]);
    for n in sizes {
        same_bits::<f32>(n, 3);
        same_bits::<f64>(n, 1);
    }
}

#[test]
fn the_portable_untangling_gives_the_vector_codes_bits() {
    for n in [8usize, 64, 66, 130, 2048, 4098, 65536] {
        let plan = RealEven::<f32>::new(n, &mut FftPlanner::new());
        let fft_values: Vec<Complex<f32>> = (0..=n / 2)
            .map(|k| Complex::new((k % 17) as f32 * 0.37 - 3.0, (k % 11) as f32 * -0.53 + 2.0))
            .collect();
        let (mut vector, mut portable) = (fft_values.clone(), fft_values);
        untangle(&mut vector, &plan.twiddle_re, &plan.twiddle_im);
        untangle_pairs(&mut portable, &plan.twiddle_re, &plan.twiddle_im, 0);
        let bits = |v: &[Complex<f32>]| -> Vec<(u32, u32)> {
            v.iter().map(|z| (z.re.to_bits(), z.im.to_bits())).collect()
        };
        assert_eq!(bits(&vector), bits(&portable), "n {n}");
    }
}
