//! CPU vs OpenCL on the same frames (the library side of `fftd check`): runs a batch through the
//! CPU engine and through an OpenCL engine and counts the output values that differ by more than
//! a tolerance relative to each frame's largest bin.
//!
//! For `--scale db` values are compared as magnitudes (10^(dB/20)), so the tolerance means the
//! same thing for every scale: a relative error e of the frame's peak magnitude near the peak is
//! about 8.7·e dB there, and bins far below the peak may differ by more dB (they carry no weight).
//! For `--scale complex` each re and im is compared against the frame's largest |X|.

use super::cpu::CpuEngine;
use super::device_set;
use super::opencl::{OpenClEngine, OpenClOptions};
use super::router::DeviceChoice;
use super::{Engine, EngineError, Scale, TransformSpec};
use crate::error::FftdError;
use crate::types::Sample;

/// The tolerance fftd promises: 1e-4 (f32) or 1e-10 (f64) of each frame's largest bin.
pub fn default_tolerance<T: Sample>() -> f64 {
    if T::NAME == "f64" {
        1e-10
    } else {
        1e-4
    }
}

/// Result of one comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareReport {
    /// The OpenCL engine compared with the CPU engine, e.g. "opencl:NVIDIA H200".
    pub engine: String,
    pub frames: usize,
    /// Output values compared.
    pub values: usize,
    /// Values whose error exceeds `tolerance` × the frame's largest bin.
    pub mismatches: usize,
    /// Largest absolute difference (in magnitude units for the dB scale).
    pub max_abs: f64,
    /// Largest difference divided by its frame's largest bin.
    pub max_rel: f64,
    pub tolerance: f64,
}

impl CompareReport {
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// Errors of `got` against the reference `want` (frames of `spec.values_out()` values):
/// (mismatches, max_abs, max_rel), relative to each frame's largest bin (`row_peak`); dB rows
/// compared as magnitudes.
pub(crate) fn compare_rows(
    got: &[f64],
    want: &[f64],
    spec: &TransformSpec,
    tol: f64,
) -> (usize, f64, f64) {
    let db = spec.scale == Scale::Db;
    let lin = |v: f64| if db { 10f64.powf(v / 20.0) } else { v };
    let width = spec.values_out().max(1);
    let (mut bad, mut max_abs, mut max_rel) = (0usize, 0.0f64, 0.0f64);
    for (g, w) in got.chunks(width).zip(want.chunks(width)) {
        let peak = row_peak(w, spec.scale);
        for (a, b) in g.iter().zip(w) {
            let d = (lin(*a) - lin(*b)).abs();
            let rel = if peak > 0.0 { d / peak } else { d };
            if rel.is_nan() || rel > tol {
                bad += 1; // NaN counts as a mismatch
            }
            max_abs = max_abs.max(if d.is_nan() { f64::INFINITY } else { d });
            max_rel = max_rel.max(if rel.is_nan() { f64::INFINITY } else { rel });
        }
    }
    (bad, max_abs, max_rel)
}

/// The largest bin magnitude of one output row: |X| of each (re, im) pair for `complex`, else
/// the largest |value| (dB values as magnitudes).
pub(crate) fn row_peak(row: &[f64], scale: Scale) -> f64 {
    match scale {
        Scale::Complex => row
            .chunks_exact(2)
            .map(|pair| pair[0].hypot(pair[1]))
            .fold(0.0, f64::max),
        Scale::Db => row.iter().map(|v| 10f64.powf(v / 20.0)).fold(0.0, f64::max),
        _ => row.iter().map(|v| v.abs()).fold(0.0, f64::max),
    }
}

/// The OpenCL engine `choice` selects: `gpu`/`auto` the best device, `opencl:P:D` that one, the
/// first OpenCL device of `gpu:all` or a list; `cpu` is a usage error (nothing to compare).
pub(crate) fn open_opencl_engine<T: Sample>(
    choice: &DeviceChoice,
) -> Result<OpenClEngine<T>, FftdError> {
    open_opencl_engines(choice)?
        .into_iter()
        .next()
        .ok_or_else(no_opencl_choice)
}

/// One OpenCL engine per OpenCL device instance `choice` names (`gpu`/`auto`: the best device);
/// a choice without one is a usage error.
pub(crate) fn open_opencl_engines<T: Sample>(
    choice: &DeviceChoice,
) -> Result<Vec<OpenClEngine<T>>, FftdError> {
    let (_, engines) = device_set::open_opencl::<T>(choice, &OpenClOptions::from_env())?;
    match engines.is_empty() {
        true => Err(no_opencl_choice()),
        false => Ok(engines),
    }
}

fn no_opencl_choice() -> FftdError {
    FftdError::Usage(
        "check compares the CPU with an OpenCL device: use --device gpu, gpu:all, auto, opencl:P:D or a list naming one"
            .into(),
    )
}

/// Runs `frames` frames of `input` on the CPU engine and on the OpenCL engine `choice` selects
/// (`gpu`/`auto`: the best device; `opencl:P:D`: that one; `cpu` is a usage error) and compares.
pub fn compare_engines<T: Sample>(
    choice: &DeviceChoice,
    spec: &TransformSpec,
    input: &[T],
    frames: usize,
    rel_tol: f64,
) -> Result<CompareReport, FftdError> {
    let mut gpu = open_opencl_engine::<T>(choice)?;
    compare_batch(
        &mut gpu,
        &mut CpuEngine::<T>::new(),
        spec,
        input,
        frames,
        rel_tol,
    )
}

/// Runs one batch on `gpu` and on `cpu` (the reference) and compares their outputs.
pub(crate) fn compare_batch<T: Sample>(
    gpu: &mut dyn Engine<T>,
    cpu: &mut dyn Engine<T>,
    spec: &TransformSpec,
    input: &[T],
    frames: usize,
    rel_tol: f64,
) -> Result<CompareReport, FftdError> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    gpu.process(spec, input, frames, &mut a)
        .map_err(|e| match e {
            EngineError::Unsupported { what, .. } => FftdError::Runtime(format!(
                "nothing to compare: {what}; such frames always run on the CPU engine"
            )),
            other => FftdError::Runtime(other.to_string()),
        })?;
    cpu.process(spec, input, frames, &mut b)
        .map_err(|e| FftdError::Runtime(e.to_string()))?;
    let a: Vec<f64> = a.into_iter().map(Sample::into_f64).collect();
    let b: Vec<f64> = b.into_iter().map(Sample::into_f64).collect();
    // (an input that overflows the precision gives both engines infinities: nothing to compare)
    let overflowed = b.iter().filter(|v| !v.is_finite()).count();
    if overflowed > 0 {
        return Err(FftdError::Runtime(format!(
            "nothing to compare: {overflowed} of the CPU reference's {} values are not finite (the input overflows {}: try --precision f64)",
            b.len(),
            T::NAME
        )));
    }
    let (mismatches, max_abs, max_rel) = compare_rows(&a, &b, spec, rel_tol);
    Ok(CompareReport {
        engine: gpu.name(),
        frames,
        values: a.len(),
        mismatches,
        max_abs,
        max_rel,
        tolerance: rel_tol,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::InputKind;
    use crate::window::WindowKind;

    fn spec(scale: Scale) -> TransformSpec {
        TransformSpec {
            n: 2,
            kind: InputKind::Complex,
            window: WindowKind::Rect,
            scale,
            rate: 1.0,
        }
    }

    #[test]
    fn complex_rows_compare_re_and_im_against_the_largest_magnitude() {
        // two bins, (3, 4) and (0, 1): the peak is |3 + 4i| = 5
        let want = [3.0, 4.0, 0.0, 1.0];
        assert_eq!(row_peak(&want, Scale::Complex), 5.0);
        let got = [3.0, 4.0, 0.0, 1.01];
        let (bad, max_abs, max_rel) = compare_rows(&got, &want, &spec(Scale::Complex), 1e-3);
        assert_eq!(bad, 1);
        assert!((max_abs - 0.01).abs() < 1e-12);
        assert!((max_rel - 0.002).abs() < 1e-12);
        let (bad, ..) = compare_rows(&got, &want, &spec(Scale::Complex), 1e-2);
        assert_eq!(bad, 0);
        // a phase error counts even where the magnitude agrees
        let conjugate = [3.0, -4.0, 0.0, 1.0];
        let (bad, ..) = compare_rows(&conjugate, &want, &spec(Scale::Complex), 1e-2);
        assert_eq!(bad, 1);
    }

    /// An OpenCL engine that takes no frames (what `OpenClEngine` answers for f64 on a device without it).
    struct Refuses;

    impl Engine<f32> for Refuses {
        fn name(&self) -> String {
            "refuses".into()
        }

        fn transform(
            &mut self,
            _: &TransformSpec,
            _: &[f32],
            _: usize,
            _: &mut [f32],
        ) -> Result<(), EngineError> {
            Err(EngineError::Unsupported {
                engine: "opencl",
                what: "f64 on some device (no cl_khr_fp64)".into(),
            })
        }
    }

    #[test]
    fn a_size_the_device_refuses_is_nothing_to_compare() {
        let s = spec(Scale::Magnitude);
        let err = compare_batch(&mut Refuses, &mut CpuEngine::new(), &s, &[0.0; 4], 1, 1e-4);
        let Err(FftdError::Runtime(text)) = err else {
            panic!("{err:?}");
        };
        assert!(
            text.contains("nothing to compare: f64 on some device"),
            "{text}"
        );
    }
}
