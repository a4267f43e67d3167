//! `fftd check`: cuts the input into frames exactly as a run would, transforms every batch on the
//! CPU engine and on an OpenCL device, and reports how many output values differ by more than the
//! tolerance (relative to each frame's largest bin), with the largest absolute and relative error.
//! Exit 1 on any mismatch — the student projects' CPU-vs-GPU check, for every size and option.

use crate::pipeline::spec::RunSpec;

use crate::error::{FftdError, Result};
use crate::fft::compare::{compare_batch, default_tolerance, open_opencl_engines};
use crate::fft::cpu::CpuEngine;
use crate::fft::{Engine, TransformSpec};
use crate::frame::Frame;
use crate::types::{InputKind, Sample};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub fn run_check(run_spec: &RunSpec, tolerance: Option<f64>) -> Result<()> {
    if matches!(run_spec.source.input, crate::source::spec::Input::Mic(_)) {
        return Err(FftdError::Usage(
            "fftd check works on files: use --file PATH".into(),
        ));
    }
    run_spec.analysis.precision.dispatch(Check {
        run_spec,
        tolerance,
    })
}

/// A check in the sample type of its precision.
struct Check<'a> {
    run_spec: &'a RunSpec,
    tolerance: Option<f64>,
}

impl crate::types::WithSample for Check<'_> {
    type Output = Result<()>;
    fn run<T: Sample>(self) -> Result<()> {
        check_typed::<T>(self.run_spec, self.tolerance)
    }
}

/// Totals over every batch.
#[derive(Default)]
struct Tally {
    frames: usize,
    values: usize,
    mismatches: usize,
    max_abs: f64,
    max_rel: f64,
    sizes: Vec<(usize, InputKind)>,
}

fn check_typed<T: Sample>(run_spec: &RunSpec, tolerance: Option<f64>) -> Result<()> {
    let tol = tolerance.unwrap_or_else(default_tolerance::<T>);
    if !(tol.is_finite() && tol > 0.0) {
        return Err(FftdError::Usage(format!(
            "--tolerance {tol}: must be a positive number"
        )));
    }
    // every OpenCL device the choice names (`gpu:all`, lists), each against the CPU
    let mut gpus = open_opencl_engines::<T>(&run_spec.engine.device)?;
    let mut cpu = CpuEngine::<T>::new();
    let mut tally = Tally::default();
    let mut pending: Vec<Frame<T>> = Vec::new();
    let mut compare = |frames: &mut Vec<Frame<T>>, tally: &mut Tally| -> Result<()> {
        let Some(first) = frames.first() else {
            return Ok(());
        };
        let spec = TransformSpec {
            n: first.n,
            kind: first.kind,
            window: run_spec.analysis.window,
            scale: run_spec.analysis.scale,
            rate: first.rate,
        };
        let input: Vec<T> = frames.iter().flat_map(|f| f.data.iter().copied()).collect();
        tally.frames += frames.len();
        for gpu in gpus.iter_mut() {
            let report = compare_batch(gpu, &mut cpu, &spec, &input, frames.len(), tol)
                .map_err(|e| FftdError::Runtime(format!("check: {e}")))?;
            tally.values += report.values;
            tally.mismatches += report.mismatches;
            tally.max_abs = tally.max_abs.max(report.max_abs);
            tally.max_rel = tally.max_rel.max(report.max_rel);
        }
        if !tally.sizes.contains(&(spec.n, spec.kind)) {
            tally.sizes.push((spec.n, spec.kind));
        }
        frames.clear();
        Ok(())
    };
    let stop = Arc::new(AtomicBool::new(false));
    crate::pipeline::for_each_frame::<T>(run_spec, stop, &mut |frame| {
        let same = pending
            .first()
            .is_none_or(|f| (f.n, f.kind, f.rate) == (frame.n, frame.kind, frame.rate));
        if !same || pending.len() >= run_spec.engine.batch_frames(frame.n) {
            compare(&mut pending, &mut tally)?;
        }
        pending.push(frame);
        Ok(())
    })?;
    compare(&mut pending, &mut tally)?;

    report(&tally, &gpus, run_spec, tol)?;
    if tally.mismatches > 0 {
        return Err(FftdError::Runtime(format!(
            "check failed: {} of {} values differ by more than {tol:e}",
            tally.mismatches, tally.values
        )));
    }
    Ok(())
}

/// The check's summary on stdout: frames, sizes, values, engines and the largest errors.
fn report<T: Sample>(
    tally: &Tally,
    gpus: &[crate::fft::opencl::OpenClEngine<T>],
    run_spec: &RunSpec,
    tol: f64,
) -> Result<()> {
    let sizes: Vec<String> = tally
        .sizes
        .iter()
        .map(|(n, kind)| match kind {
            InputKind::Real => format!("{n} real"),
            InputKind::Complex => format!("{n} complex"),
        })
        .collect();
    crate::console::print_report(&format!(
        "fftd check: {} frames ({}), {} values, {} vs cpu, {}, window {}, scale {}\n\
         mismatches: {} of {} values differ by more than {tol:e} of their frame's largest bin\n\
         max abs error {:.3e}, max rel error {:.3e}\n",
        tally.frames,
        sizes.join(", "),
        tally.values,
        engine_names(gpus),
        T::NAME,
        run_spec.analysis.window,
        run_spec.analysis.scale,
        tally.mismatches,
        tally.values,
        tally.max_abs,
        tally.max_rel
    ))
}

/// "opencl:NAME" of each engine, joined with " and " (each compares every frame).
fn engine_names<T: Sample>(gpus: &[crate::fft::opencl::OpenClEngine<T>]) -> String {
    let names: Vec<String> = gpus.iter().map(|g| g.name()).collect();
    names.join(" and ")
}
