//! f32 across the bus in an f64 run (issue 41). Samples that are f32 values (f32 input, 8-24-bit
//! PCM) lose nothing as f32, so a batch for a device may hold them as f32, in the first half of
//! the bytes of its f64 buffer: half the bytes cross, and the engine widens them (exactly) to
//! the run's type; the rows an f32 output writes may come back narrowed to f32 the same way.
//! `Carry` says which a buffer holds, `Samples` is a batch's frames either way, `f32s` and
//! `f32s_mut` view a buffer's memory as f32 values. The one decision of what a run's batches
//! carry is `pipeline::dispatch::carriage`; an engine that cannot widen on its device widens on
//! the host (`on_host`, what `Engine::transform_carried` does by default).

use super::{Engine, EngineError, FrameStep, Reduction, TransformSpec};
use crate::types::Sample;

/// What a batch's buffer holds: values of the run's type, or f32 values in the first half of
/// its bytes (as many as the buffer's length).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Carry {
    #[default]
    Run,
    F32,
}

impl Carry {
    /// `F32` when `f32`, else `Run`.
    pub(crate) fn f32_if(f32: bool) -> Carry {
        match f32 {
            true => Carry::F32,
            false => Carry::Run,
        }
    }
}

/// A batch's frames as the host holds them: in the run's type, or as f32 values (each exactly
/// a value of the run's type) that the engine widens.
#[derive(Clone, Copy, Debug)]
pub enum Samples<'a, T> {
    Run(FrameStep<'a, T>),
    F32(FrameStep<'a, f32>),
}

impl<'a, T: Sample> Samples<'a, T> {
    /// Frames in the batch.
    pub fn count(&self) -> usize {
        match self {
            Samples::Run(f) => f.count,
            Samples::F32(f) => f.count,
        }
    }

    /// `FrameStep::check_batch` of the frames as they are held.
    pub(crate) fn check_batch(
        &self,
        engine: &'static str,
        spec: &TransformSpec,
        reduction: Reduction<'_>,
        out_len: usize,
    ) -> Result<(), EngineError> {
        match self {
            Samples::Run(f) => f.check_batch(engine, spec, reduction, out_len),
            Samples::F32(f) => f.check_batch(engine, spec, reduction, out_len),
        }
    }

    /// The frames in the run's type: as they are, or widened into `scratch` (the values the
    /// frames cover, so the step stays).
    pub fn in_run_type<'s>(
        self,
        spec: &TransformSpec,
        scratch: &'s mut Vec<T>,
    ) -> Result<FrameStep<'s, T>, EngineError>
    where
        'a: 's,
    {
        match self {
            Samples::Run(frames) => Ok(frames),
            Samples::F32(frames) => {
                frames.check("engine", spec)?;
                scratch.clear();
                let covered = &frames.data[..frames.needed(spec)];
                scratch.extend(covered.iter().map(|&v| T::of_f64(f64::from(v))));
                Ok(FrameStep {
                    data: scratch,
                    count: frames.count,
                    step: frames.step,
                })
            }
        }
    }
}

/// `Engine::transform_carried` on the host: the samples widened into `scratch`, the rows left
/// in the run's type.
pub(crate) fn on_host<T: Sample, E: Engine<T> + ?Sized>(
    engine: &mut E,
    spec: &TransformSpec,
    samples: Samples<'_, T>,
    (reduction, scratch): (Reduction<'_>, &mut Vec<T>),
    out: &mut [T],
) -> Result<Carry, EngineError> {
    let frames = samples.in_run_type(spec, scratch)?;
    engine.transform_strided(spec, frames, reduction, out)?;
    Ok(Carry::Run)
}

/// The memory of `values` as f32 values (twice as many for f64).
pub fn f32s<T: Sample>(values: &[T]) -> &[f32] {
    let len = std::mem::size_of_val(values) / 4;
    // SAFETY: T is f32 or f64 (`Sample` is sealed): its size is a multiple of 4 and its
    // alignment at least f32's, every bit pattern is a valid f32, and the slice covers exactly
    // the memory of `values` for the same borrow.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<f32>(), len) }
}

/// `f32s`, to write.
pub fn f32s_mut<T: Sample>(values: &mut [T]) -> &mut [f32] {
    let len = std::mem::size_of_val(values) / 4;
    // SAFETY: as in `f32s`; every f32 bit pattern written is valid memory of a T (f32 or f64
    // values), and the exclusive borrow of `values` covers the new slice's life.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<f32>(), len) }
}

/// Writes each of `values` into `into` as f32 (`as f32`); whether every one was exactly an
/// f32 value (a NaN is not): else `into` is to be written again in the run's type.
pub(crate) fn narrow_exact<T: Sample>(values: &[T], into: &mut [f32]) -> bool {
    let mut exact = true;
    for (d, v) in into.iter_mut().zip(values) {
        let wide = v.into_f64();
        *d = wide as f32;
        exact &= f64::from(*d) == wide;
    }
    exact
}

/// Turns the first `count` f32 values of `values`' memory (`f32s`) back into `count` values of
/// the run's type in place, exactly (a batch that began as f32 and met a sample that is not).
pub(crate) fn widen_front<T: Sample>(values: &mut [T], count: usize) {
    if std::mem::size_of::<T>() == 4 {
        return; // f32 already: the same memory
    }
    let count = count.min(values.len());
    // back to front: value i covers f32s 2i and 2i + 1, which lie at or after f32 i for every
    // i, and f32s above i were read before (i = 0 reads its own f32 before writing over it)
    for i in (0..count).rev() {
        let v = f32s(values)[i];
        values[i] = T::of_f64(f64::from(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_samples_of_an_f64_buffer_narrow_and_widen_back_exactly() {
        let samples: Vec<f64> = (0..9).map(|i| f64::from(i as f32 * 0.37 - 1.5)).collect();
        let mut buf = vec![f64::NAN; samples.len()];
        assert!(narrow_exact(
            &samples,
            &mut f32s_mut(&mut buf)[..samples.len()]
        ));
        assert_eq!(
            f32s(&buf)[..9],
            samples.iter().map(|&v| v as f32).collect::<Vec<_>>()[..]
        );
        widen_front(&mut buf, samples.len());
        assert_eq!(buf, samples);
    }

    #[test]
    fn a_value_that_is_not_an_f32_is_said() {
        let mut into = [0f32; 3];
        assert!(!narrow_exact(&[0.5f64, 0.1, 2.0], &mut into));
        assert!(!narrow_exact(&[f64::NAN], &mut into));
        assert!(
            narrow_exact(&[0.1f32, 3.0], &mut into),
            "f32 values always are"
        );
    }

    #[test]
    fn f32_frames_widen_on_the_host_with_their_step() {
        let spec = TransformSpec {
            n: 4,
            kind: crate::types::InputKind::Real,
            window: crate::window::WindowKind::Hann,
            scale: super::super::Scale::Magnitude,
            rate: 1.0,
        };
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        let frames = FrameStep {
            data: &data,
            count: 2,
            step: 2,
        };
        let mut scratch = Vec::new();
        let wide = Samples::<f64>::F32(frames)
            .in_run_type(&spec, &mut scratch)
            .expect("frames fit");
        assert_eq!((wide.count, wide.step), (2, 2));
        assert_eq!(wide.data, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
}
