//! One frame of zeros through an engine before it takes work (`Engine::warm_up`): a device
//! builds its programs and first buffers there, not on the run's first batch. The pipeline's
//! device lanes warm so (`pipeline::worker::warm_up`), and so does the process that builds a
//! job's programs after a run that ended first (`opencl::job_programs`).
//!
//! Takes: the engine, the transform, how samples and rows cross (as f32 or in the run's type),
//! the reductions fused on the engine and the values of one row. Gives: whether it went.

use super::carry::f32s;
use super::{Carry, Engine, EngineError, FrameStep, Reduction, Samples, TransformSpec};
use crate::types::Sample;

/// Runs `engine`'s warm-up on one frame of zeros with `spec`, its samples crossing as f32
/// where `samples_f32`, its rows where `rows_f32`, reduced by `reduction` into `row_len`
/// values. What it computes is dropped.
pub(crate) fn warm_once<T: Sample>(
    engine: &mut dyn Engine<T>,
    spec: &TransformSpec,
    (samples_f32, rows_f32): (bool, bool),
    reduction: Reduction<'_>,
    row_len: usize,
) -> Result<(), EngineError> {
    let zeros = vec![T::zero(); spec.values_per_frame()];
    let mut out = vec![T::zero(); row_len];
    let frames = match samples_f32 {
        true => Samples::F32(FrameStep::packed_in(spec, &f32s(&zeros)[..zeros.len()], 1)),
        false => Samples::Run(FrameStep::packed_in(spec, &zeros, 1)),
    };
    engine.warm_up(spec, frames, Carry::f32_if(rows_f32), reduction, &mut out)
}
