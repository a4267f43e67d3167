//! The CPU engine: real frames of even length by `real_even` (rustfft inside), of odd length by
//! realfft, complex frames by rustfft, in f32 or f64. Plans and
//! windows are cached per frame size; every frame is windowed into a scratch buffer, transformed,
//! and reduced to |X|² and then to the requested scale in one pass over the output row (or, with
//! `--scale complex`, copied out as re, im pairs). A batch's f32 samples (`carry`) are widened
//! into a scratch buffer first.

use super::cpu_features::with_cpu_features;
use super::real_even::RealEven;
use super::{
    BandWeights, Carry, Engine, EngineError, FrameStep, Reduction, Samples, ScalePlan,
    TransformSpec,
};

use crate::types::{InputKind, Sample};
use crate::window::WindowKind;
use num_complex::Complex;
use realfft::{RealFftPlanner, RealToComplex};
use rustfft::{Fft, FftPlanner};
use std::collections::HashMap;
use std::sync::Arc;

/// The planned transform of one size.
enum Transform<T: Sample> {
    /// Real frames of even length (`real_even`).
    RealEven(RealEven<T>),
    /// Real frames of odd length (realfft: a complex FFT of n).
    RealOdd(Arc<dyn RealToComplex<T>>),
    Complex(Arc<dyn Fft<T>>),
}

/// Cached state for one (size, kind, window).
struct Plan<T: Sample> {
    window: Vec<T>,
    /// Σw and Σw² in f64, for the spectrum/density normalisation.
    window_sums: (f64, f64),
    transform: Transform<T>,
    scratch: Vec<Complex<T>>,
    real_in: Vec<T>,
    spectrum: Vec<Complex<T>>,
}

/// realfft/rustfft behind the `Engine` trait. One instance per worker thread.
pub struct CpuEngine<T: Sample> {
    real_planner: RealFftPlanner<T>,
    complex_planner: FftPlanner<T>,
    plans: HashMap<(usize, InputKind, WindowKind), Plan<T>>,
    /// f32 samples widened to the run's type (`transform_carried`), kept from batch to batch.
    widened: Vec<T>,
    /// A block's spectra on their way to band rows (`run_frames_into_bands`).
    block_spectra: Vec<T>,
}

/// Frames whose spectra are summed into bands together: their spectra stay in the core's cache
/// (16 rows of 2049 f32 is 128 KiB) instead of a whole batch's going out to memory and back.
const FRAMES_PER_BAND_BLOCK: usize = 16;

impl<T: Sample> Default for CpuEngine<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Sample> CpuEngine<T> {
    pub fn new() -> Self {
        CpuEngine {
            real_planner: RealFftPlanner::new(),
            complex_planner: FftPlanner::new(),
            plans: HashMap::new(),
            widened: Vec::new(),
            block_spectra: Vec::new(),
        }
    }

    fn plan(&mut self, spec: &TransformSpec) -> &mut Plan<T> {
        let key = (spec.n, spec.kind, spec.window);
        let (real_planner, complex_planner) = (&mut self.real_planner, &mut self.complex_planner);
        self.plans.entry(key).or_insert_with(|| {
            let coefficients = spec.window.coefficients(spec.n);
            let window_sums = (
                coefficients.iter().sum(),
                coefficients.iter().map(|v| v * v).sum(),
            );
            let window: Vec<T> = coefficients.into_iter().map(T::of_f64).collect();
            match spec.kind {
                InputKind::Real if spec.n % 2 == 0 => {
                    let transform = RealEven::new(spec.n, complex_planner);
                    Plan {
                        window,
                        window_sums,
                        scratch: vec![Complex::default(); transform.scratch_len()],
                        real_in: vec![T::zero(); spec.n],
                        spectrum: vec![Complex::default(); spec.n / 2 + 1],
                        transform: Transform::RealEven(transform),
                    }
                }
                InputKind::Real => {
                    let fft = real_planner.plan_fft_forward(spec.n);
                    Plan {
                        window,
                        window_sums,
                        scratch: fft.make_scratch_vec(),
                        real_in: fft.make_input_vec(),
                        spectrum: fft.make_output_vec(),
                        transform: Transform::RealOdd(fft),
                    }
                }
                InputKind::Complex => {
                    let fft = complex_planner.plan_fft_forward(spec.n);
                    Plan {
                        window,
                        window_sums,
                        scratch: vec![Complex::default(); fft.get_inplace_scratch_len()],
                        real_in: Vec::new(),
                        spectrum: vec![Complex::default(); spec.n],
                        transform: Transform::Complex(fft),
                    }
                }
            }
        })
    }
}

impl<T: Sample> Engine<T> for CpuEngine<T> {
    fn name(&self) -> String {
        "cpu".to_string()
    }

    fn transform(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        super::check_batch("cpu", spec, input.len(), frames, out.len())?;
        self.run_frames(spec, FrameStep::packed_in(spec, input, frames), out)
    }

    fn transform_strided(
        &mut self,
        spec: &TransformSpec,
        frames: FrameStep<'_, T>,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        frames.check_batch("cpu", spec, reduction, out.len())?;
        if let (Some(bands), None) = reduction {
            return self.run_frames_into_bands(spec, frames, bands, out);
        }
        super::reduce_on_host(spec, frames.count, reduction, out, |rows| {
            self.run_frames(spec, frames, rows)
        })
    }

    fn transform_carried(
        &mut self,
        spec: &TransformSpec,
        samples: Samples<'_, T>,
        _rows: Carry,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<Carry, EngineError> {
        let mut widened = std::mem::take(&mut self.widened);
        let done = super::carry::on_host(self, spec, samples, (reduction, &mut widened), out);
        self.widened = widened;
        done
    }
}

impl<T: Sample> CpuEngine<T> {
    /// The spectra of `frames` (read in place, `frames.step` values apart) into `out`, one row
    /// each; the caller has checked the lengths.
    fn run_frames(
        &mut self,
        spec: &TransformSpec,
        frames: FrameStep<'_, T>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let per_frame = spec.values_per_frame();
        let per_row = spec.values_out();
        let plan = self.plan(spec);
        let scale =
            super::ScalePlan::with_window_sums(spec, plan.window_sums.0, plan.window_sums.1);
        let starts = (0..frames.count).map(|i| i * frames.step);
        for (at, row) in starts.zip(out.chunks_exact_mut(per_row)) {
            let frame = &frames.data[at..at + per_frame];
            match &plan.transform {
                Transform::RealEven(fft) => {
                    windowed(&mut plan.real_in, frame, &plan.window);
                    fft.process(&mut plan.real_in, &mut plan.spectrum, &mut plan.scratch);
                }
                Transform::RealOdd(fft) => {
                    windowed(&mut plan.real_in, frame, &plan.window);
                    fft.process_with_scratch(
                        &mut plan.real_in,
                        &mut plan.spectrum,
                        &mut plan.scratch,
                    )
                    .map_err(|e| EngineError::Device {
                        engine: "cpu",
                        what: e.to_string(),
                    })?;
                }
                Transform::Complex(fft) => {
                    for ((dst, x), w) in plan
                        .spectrum
                        .iter_mut()
                        .zip(frame.chunks_exact(2))
                        .zip(&plan.window)
                    {
                        *dst = Complex::new(x[0] * *w, x[1] * *w);
                    }
                    fft.process_with_scratch(&mut plan.spectrum, &mut plan.scratch);
                }
            }
            finish_spectrum(&scale, &plan.spectrum, row);
        }
        Ok(())
    }
}

impl<T: Sample> CpuEngine<T> {
    /// The band rows of `frames` into `out`, a block of frames at a time: the block's spectra,
    /// then their bands. The caller has checked the lengths.
    fn run_frames_into_bands(
        &mut self,
        spec: &TransformSpec,
        frames: FrameStep<'_, T>,
        bands: &BandWeights,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let (per_row, width) = (spec.values_out(), bands.bands().max(1));
        let mut spectra = std::mem::take(&mut self.block_spectra);
        spectra.resize(FRAMES_PER_BAND_BLOCK * per_row, T::zero());
        let mut blocks = out.chunks_mut(FRAMES_PER_BAND_BLOCK * width).enumerate();
        let done = blocks.try_for_each(|(block, rows)| {
            let count = rows.len() / width;
            let first = block * FRAMES_PER_BAND_BLOCK * frames.step;
            let block_frames = FrameStep {
                data: frames.data.get(first..).unwrap_or(&[]),
                count,
                step: frames.step,
            };
            let spectra = &mut spectra[..count * per_row];
            self.run_frames(spec, block_frames, spectra)?;
            bands.apply_rows(spectra, rows);
            Ok(())
        });
        self.block_spectra = spectra;
        done
    }
}

/// `dst[i] = frame[i] · window[i]`, with 256-bit vectors where the CPU has AVX2 (the same
/// products either way).
#[inline]
fn windowed<T: Sample>(dst: &mut [T], frame: &[T], window: &[T]) {
    with_cpu_features!("avx2" ["avx2"] windowed_each<T: Sample>(dst: &mut [T], frame: &[T], window: &[T]))
}

#[inline(always)]
fn windowed_each<T: Sample>(dst: &mut [T], frame: &[T], window: &[T]) {
    for ((d, x), w) in dst.iter_mut().zip(frame).zip(window) {
        *d = *x * *w;
    }
}

/// |X|² and the output scale (or re, im) for one row, with 256-bit vectors where the CPU has AVX2
/// and FMA (the build targets baseline x86-64, whose SSE2 square roots are 4 wide).
#[inline]
fn finish_spectrum<T: Sample>(scale: &ScalePlan, spectrum: &[Complex<T>], row: &mut [T]) {
    with_cpu_features!("avx2,fma" ["avx2", "fma"]
        finish_spectrum_each<T: Sample>(scale: &ScalePlan, spectrum: &[Complex<T>], row: &mut [T]))
}

#[inline(always)]
fn finish_spectrum_each<T: Sample>(scale: &ScalePlan, spectrum: &[Complex<T>], row: &mut [T]) {
    scale.finish_spectrum(spectrum, row);
}
