//! The FFT stage's contract: one `Engine` trait that turns a whole batch of frames into finished
//! spectra (window → FFT → |X| → scale, or re/im for `--scale complex`) in one call, so an engine
//! that works on a device can take the batch in one buffer. `cpu` implements it with
//! realfft/rustfft, `opencl` on any OpenCL device, `router` picks between them per batch.
//! `carry`: an f64 run's batch may hold f32 samples and ask for f32 rows
//! (`Engine::transform_carried`), which a device widens and narrows itself.

mod band_rows;
pub mod calibrate;
pub mod carry;
pub mod compare;
pub mod cpu;
mod cpu_features;
pub(crate) mod decibels;
pub(crate) mod device_choice;
pub(crate) mod device_set;
pub mod fault;
pub(crate) mod host_memory;
pub(crate) mod lanes;
pub(crate) mod log_once;
mod naive;
pub mod opencl;
pub(crate) mod real_even;
pub(crate) mod route;
pub(crate) mod routed;
pub mod router;
pub(crate) mod scale;
pub(crate) mod scaled_sums;
pub(crate) mod spec;
pub(crate) mod warm;

pub(crate) use crate::trace::device_trace::DeviceTrace;
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;
pub use band_rows::{BandWeights, RowFinish};
pub use carry::{Carry, Samples};
pub use host_memory::HostBuf;
pub(crate) use host_memory::PinnedMemory;
pub use naive::naive_spectrum;
pub use scale::Scale;
pub(crate) use scale::ScalePlan;

/// Everything the frames of one batch share: size, kind, window and output scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformSpec {
    /// Samples per frame (any n >= 2).
    pub n: usize,
    pub kind: InputKind,
    pub window: WindowKind,
    pub scale: Scale,
    /// Sample rate in Hz (used by `Scale::Density`).
    pub rate: f64,
}

impl TransformSpec {
    /// Frequency bins per frame: n/2+1 for real input, n for complex input.
    pub fn bins(&self) -> usize {
        match self.kind {
            InputKind::Real => self.n / 2 + 1,
            InputKind::Complex => self.n,
        }
    }

    /// Output values per frame: one per bin, or two (re, im interleaved) with `Scale::Complex`.
    pub fn values_out(&self) -> usize {
        self.bins() * self.scale.values_per_bin()
    }

    /// Input values per frame (n for real, 2n for complex).
    pub fn values_per_frame(&self) -> usize {
        self.n * self.kind.width()
    }

    /// How |X| becomes the output value for this spec (normalisation, one-sided doubling, dB).
    pub(crate) fn scale_plan(&self) -> ScalePlan {
        ScalePlan::new(self)
    }
}

/// Why an engine could not transform a batch. The router answers `Unsupported` and `Device` by
/// sending the batch (and, for device faults, the rest of the run) to the CPU engine, or, in the
/// pipeline with other devices left, by `HandOff`.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// This engine does not handle this frame size / kind / precision.
    #[error("unsupported by the {engine} engine: {what}")]
    Unsupported { engine: &'static str, what: String },
    /// The device failed (build error, out of memory, lost device, ...).
    #[error("{engine} engine failed: {what}")]
    Device { engine: &'static str, what: String },
    /// The lane's device has failed and another lane takes the batch: the caller (the pipeline's
    /// dispatcher) hands it on, untouched.
    #[error("{lane} has failed: its batch goes to another device")]
    HandOff { lane: String },
}

/// A transform engine. `transform` takes `frames` frames laid out back to back in `input`
/// (`spec.values_per_frame()` values each, unwindowed) and writes the `frames * spec.values_out()`
/// finished output values (windowed, transformed, scaled by `spec.scale`) into `out`, which is
/// exactly that long.
pub trait Engine<T: Sample>: Send {
    /// A short name for logs: "cpu", "opencl:NVIDIA H200", ...
    fn name(&self) -> String;

    fn transform(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        out: &mut [T],
    ) -> Result<(), EngineError>;

    /// `transform` into a `Vec`, sized to fit (its old values are overwritten, not cleared).
    fn process(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        out: &mut Vec<T>,
    ) -> Result<(), EngineError> {
        let len = frames * spec.values_out();
        if out.len() != len {
            out.clear();
            out.resize(len, T::zero());
        }
        self.transform(spec, input, frames, out)
    }

    /// `transform` followed by band powers (`bands`): writes `frames * bands.bands()` values into
    /// `out`, each band the weighted sum of its bins' values (`spec` must be a power-domain
    /// scale). By default the engine transforms and the bands are summed here, on the host; an
    /// engine on a device sums them there, so only the bands cross back.
    fn transform_bands(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: &BandWeights,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        reduce_on_host(spec, frames, (Some(bands), None), out, |spectra| {
            self.transform(spec, input, frames, spectra)
        })
    }

    /// Transforms `frames` frames (band rows when `bands` is given) and reduces each run of
    /// `segments.lengths[i]` consecutive rows to one row by `segments.op`, so `out` holds
    /// `segments.lengths.len()` rows. By default on the host (in f64); an engine on a device
    /// reduces there, so only one row per segment crosses back (`--average` fused with the FFT).
    fn transform_segments(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: Option<&BandWeights>,
        segments: &Segments<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        reduce_on_host(spec, frames, (bands, Some(segments)), out, |spectra| {
            self.transform(spec, input, frames, spectra)
        })
    }

    /// `transform_reduced` for frames that start `step` values apart in `input` (`FrameStep`):
    /// overlapping frames (`step` below a frame's values) held once, as the input has them. By
    /// default the frames are packed back to back first; the CPU and OpenCL engines read them in
    /// place (on a device, the input crosses once and the kernels form the frames).
    fn transform_strided(
        &mut self,
        spec: &TransformSpec,
        frames: FrameStep<'_, T>,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let packed = frames.packed(spec)?;
        transform_reduced(self, spec, &packed, frames.count, reduction, out)
    }

    /// `transform_strided` for frames held as `samples` (an f64 run's f32 samples, `carry`),
    /// with the rows asked for as f32 when `rows` is `Carry::F32`. Returns how the rows came
    /// back: as f32, `out`'s first `out.len()` f32 values (`carry::f32s`) are each value `as
    /// f32`. By default the samples are widened on the host and the rows stay in the run's type;
    /// the OpenCL engine in f64 widens and narrows on its device, so half the bytes cross.
    fn transform_carried(
        &mut self,
        spec: &TransformSpec,
        samples: Samples<'_, T>,
        _rows: Carry,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<Carry, EngineError> {
        carry::on_host(self, spec, samples, (reduction, &mut Vec::new()), out)
    }

    /// Runs once as `transform_carried` before the engine's lane takes batches
    /// (`pipeline::worker::warm_up`: one frame of zeros): a device builds its kernels there
    /// (PoCL compiles each at its first launch) and its first buffers. It is no batch: no
    /// injected fault strikes it and no count, device time or trace takes it in. Engines
    /// without a device have nothing to warm.
    fn warm_up(
        &mut self,
        _spec: &TransformSpec,
        _samples: Samples<'_, T>,
        _rows: Carry,
        _reduction: Reduction<'_>,
        _out: &mut [T],
    ) -> Result<(), EngineError> {
        Ok(())
    }

    /// Page-locked host memory this engine's device copies at full speed, if it has any: the
    /// pipeline packs batches into it and takes results out of it (`host_memory`).
    fn pinned_memory(&self) -> Option<PinnedMemory<T>> {
        None
    }

    /// The device's own times for the last batch (event profiling, when it was asked for with
    /// `opencl::profile_for_stats`), taken once; None for engines without a device.
    fn take_device_times(&mut self) -> Option<DeviceTimes> {
        None
    }

    /// With `--trace` (`device_trace::trace_device_spans`): the device times of the last
    /// batch's chunks, taken once; None for engines without a device.
    fn take_device_trace(&mut self) -> Option<DeviceTrace> {
        None
    }
}

/// A batch's frames as the readers wrote them: frame i is `data[i * step..][..values_per_frame]`
/// (`step` equal to a frame's values: back to back; less: overlapping frames held once).
#[derive(Clone, Copy, Debug)]
pub struct FrameStep<'a, T> {
    pub data: &'a [T],
    pub count: usize,
    pub step: usize,
}

impl<'a, T: Sample> FrameStep<'a, T> {
    /// Frames back to back in `data`.
    pub(crate) fn packed_in(spec: &TransformSpec, data: &'a [T], count: usize) -> Self {
        FrameStep {
            data,
            count,
            step: spec.values_per_frame(),
        }
    }

    /// Values `data` must hold: up to the end of the last frame.
    pub fn needed(&self, spec: &TransformSpec) -> usize {
        match self.count {
            0 => 0,
            c => (c - 1) * self.step + spec.values_per_frame(),
        }
    }

    /// Checks that the step is a whole number of samples, no longer than a frame, and that
    /// `data` holds every frame.
    pub fn check(&self, engine: &'static str, spec: &TransformSpec) -> Result<(), EngineError> {
        let per = spec.values_per_frame();
        let width = spec.kind.width();
        let step_ok = self.step >= width && self.step <= per && self.step % width == 0;
        if !step_ok || self.data.len() < self.needed(spec) {
            return Err(EngineError::Unsupported {
                engine,
                what: format!(
                    "{} frames {} values apart in {} values (frames of {per})",
                    self.count,
                    self.step,
                    self.data.len()
                ),
            });
        }
        Ok(())
    }

    /// `check`, and the reduction and output as `check_reduced` checks them for packed frames.
    pub(crate) fn check_batch(
        &self,
        engine: &'static str,
        spec: &TransformSpec,
        reduction: Reduction<'_>,
        out_len: usize,
    ) -> Result<(), EngineError> {
        self.check(engine, spec)?;
        // the input as packed frames would hold it: its own length was checked just above
        let packed_len = self.count * spec.values_per_frame();
        check_reduced(engine, spec, (packed_len, self.count), reduction, out_len)
    }

    /// The frames copied back to back (for engines that take only packed frames).
    pub fn packed(&self, spec: &TransformSpec) -> Result<std::borrow::Cow<'a, [T]>, EngineError> {
        self.check("engine", spec)?;
        let per = spec.values_per_frame();
        if self.step == per {
            return Ok(std::borrow::Cow::Borrowed(&self.data[..self.count * per]));
        }
        let mut packed = Vec::with_capacity(self.count * per);
        for i in 0..self.count {
            packed.extend_from_slice(&self.data[i * self.step..i * self.step + per]);
        }
        Ok(std::borrow::Cow::Owned(packed))
    }
}

/// `reduction` applied on the host to the spectra `transform` writes (for engines that reduce
/// nothing themselves): `out` takes band rows, runs of rows (in f64), both or the spectra as
/// they are. The caller has checked the lengths.
pub(crate) fn reduce_on_host<T: Sample>(
    spec: &TransformSpec,
    frames: usize,
    (bands, runs): Reduction<'_>,
    out: &mut [T],
    transform: impl FnOnce(&mut [T]) -> Result<(), EngineError>,
) -> Result<(), EngineError> {
    if bands.is_none() && runs.is_none() {
        return transform(out);
    }
    let mut spectra = vec![T::zero(); frames * spec.values_out()];
    transform(&mut spectra)?;
    let rows = match bands {
        Some(b) => {
            let mut rows = vec![T::zero(); frames * b.bands()];
            b.apply_rows(&spectra, &mut rows);
            rows
        }
        None => spectra,
    };
    match runs {
        Some(r) => r.reduce(
            &rows,
            bands.map_or(spec.values_out(), BandWeights::bands),
            out,
        ),
        None => out.copy_from_slice(&rows),
    }
    Ok(())
}

/// A batch's device times in nanoseconds: copies in, kernels, copies out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceTimes {
    pub upload_ns: u64,
    pub kernel_ns: u64,
    pub download_ns: u64,
}

/// How a segment's rows become one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentOp {
    /// The run's mean: what a row of the run's type holds wherever its values do (their sum
    /// may not: 1000 rows near 1e36 add up past f32's range).
    Mean,
    Max,
    Min,
}

/// The larger of two values, NaN if either is (numpy's `maximum`).
pub(crate) fn max_or_nan(held: f64, new: f64) -> f64 {
    if new > held || new.is_nan() {
        new
    } else {
        held
    }
}

/// The smaller of two values, NaN if either is (numpy's `minimum`).
pub(crate) fn min_or_nan(held: f64, new: f64) -> f64 {
    if new < held || new.is_nan() {
        new
    } else {
        held
    }
}

/// Runs of consecutive rows, each reduced to one row (`Engine::transform_segments`).
#[derive(Clone, Copy, Debug)]
pub struct Segments<'a> {
    /// Rows in each run, in order; they add up to the batch's frames.
    pub lengths: &'a [u32],
    pub op: SegmentOp,
}

impl Segments<'_> {
    /// Reduces `rows` (rows of `width` values back to back) into `out` (one row per run), in
    /// f64 (the mean's sums scaled where they would overflow: `ScaledSums`); a NaN stays NaN
    /// under max and min as under the mean.
    pub fn reduce<T: Sample>(&self, rows: &[T], width: usize, out: &mut [T]) {
        let width = width.max(1);
        let mut sums = scaled_sums::ScaledSums::new(width);
        let mut held = vec![0.0f64; width];
        let mut at = 0usize;
        for (&len, target) in self.lengths.iter().zip(out.chunks_exact_mut(width)) {
            let run = rows
                .get(at * width..(at + len as usize) * width)
                .unwrap_or(&[]);
            at += len as usize;
            let rows = run.chunks_exact(width);
            match self.op {
                SegmentOp::Mean => {
                    sums.clear();
                    rows.for_each(|row| sums.add(row.iter().map(|v| v.into_f64()), 1.0));
                    let means = sums.means(f64::from(len.max(1)));
                    target
                        .iter_mut()
                        .zip(means)
                        .for_each(|(t, m)| *t = T::of_f64(m));
                }
                SegmentOp::Max => hold_run(rows, max_or_nan, &mut held, target),
                SegmentOp::Min => hold_run(rows, min_or_nan, &mut held, target),
            }
        }
    }
}

/// One run's rows held by `keep` (max or min) in `held` (f64, one per column), into `target`.
fn hold_run<'r, T: Sample>(
    mut rows: impl Iterator<Item = &'r [T]>,
    keep: fn(f64, f64) -> f64,
    held: &mut [f64],
    target: &mut [T],
) {
    if let Some(first) = rows.next() {
        held.iter_mut()
            .zip(first)
            .for_each(|(h, v)| *h = v.into_f64());
    }
    for row in rows {
        held.iter_mut()
            .zip(row)
            .for_each(|(h, v)| *h = keep(*h, v.into_f64()));
    }
    target
        .iter_mut()
        .zip(held.iter())
        .for_each(|(t, h)| *t = T::of_f64(*h));
}

/// What an engine reduces a batch to: band rows, segments of rows, both or neither.
pub(crate) type Reduction<'a> = (Option<&'a BandWeights>, Option<&'a Segments<'a>>);

/// One batch through `engine`: spectra, band rows, or rows reduced by segments (the one place that
/// picks among `transform`, `transform_bands` and `transform_segments`).
pub(crate) fn transform_reduced<T: Sample, E: Engine<T> + ?Sized>(
    engine: &mut E,
    spec: &TransformSpec,
    input: &[T],
    frames: usize,
    (bands, runs): Reduction<'_>,
    out: &mut [T],
) -> Result<(), EngineError> {
    match (bands, runs) {
        (b, Some(r)) => engine.transform_segments(spec, input, frames, b, r, out),
        (Some(b), None) => engine.transform_bands(spec, input, frames, b, out),
        (None, None) => engine.transform(spec, input, frames, out),
    }
}

/// Checks the buffer lengths `Engine::transform` is given.
pub(crate) fn check_batch(
    engine: &'static str,
    spec: &TransformSpec,
    input_len: usize,
    frames: usize,
    out_len: usize,
) -> Result<(), EngineError> {
    check_reduced(engine, spec, (input_len, frames), (None, None), out_len)
}

/// Checks the buffers of a batch reduced as `reduction` says: the input holds the frames, the
/// band matrix fits the spectra, the runs cover the frames (none empty), and the output holds
/// one row per frame (or run) of its width.
pub(crate) fn check_reduced(
    engine: &'static str,
    spec: &TransformSpec,
    (input_len, frames): (usize, usize),
    (bands, runs): Reduction<'_>,
    out_len: usize,
) -> Result<(), EngineError> {
    let mismatch = |what: String| Err(EngineError::Unsupported { engine, what });
    if bands.is_some_and(|b| b.bins != spec.values_out()) {
        return mismatch(format!("a band matrix over {} bins", spec.values_out()));
    }
    if let Some(r) = runs {
        let counted: usize = r.lengths.iter().map(|&l| l as usize).sum();
        if counted != frames || r.lengths.contains(&0) {
            return mismatch(format!("runs of {counted} frames for a batch of {frames}"));
        }
    }
    let width = bands.map_or(spec.values_out(), BandWeights::bands);
    let rows = runs.map_or(frames, |r| r.lengths.len());
    let need_in = frames * spec.values_per_frame();
    let need_out = rows * width;
    if input_len < need_in || out_len != need_out {
        return Err(EngineError::Unsupported {
            engine,
            what: format!(
                "batch of {frames} frames of {} values needs {need_in} input and {need_out} output values, got {} and {out_len}",
                spec.values_per_frame(),
                input_len,
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_reduce_to_their_mean_max_or_min_and_nan_stays() {
        // four rows of two values, runs of 1 and 3 rows
        let rows = [1.0f32, 8.0, 2.0, 5.0, 4.0, -1.0, 3.0, f32::NAN];
        let lengths = [1u32, 3];
        let reduce = |op| {
            let mut out = [0.0f32; 4];
            Segments {
                lengths: &lengths,
                op,
            }
            .reduce(&rows, 2, &mut out);
            out
        };
        assert_eq!(reduce(SegmentOp::Mean)[..3], [1.0, 8.0, 3.0]);
        assert_eq!(reduce(SegmentOp::Max)[..3], [1.0, 8.0, 4.0]);
        assert_eq!(reduce(SegmentOp::Min)[..3], [1.0, 8.0, 2.0]);
        assert!(reduce(SegmentOp::Max)[3].is_nan() && reduce(SegmentOp::Mean)[3].is_nan());
    }

    #[test]
    fn band_weights_sum_their_spans() {
        let weights = BandWeights {
            bins: 5,
            first: vec![0, 2],
            len: vec![2, 3],
            offset: vec![0, 2],
            weights: vec![1.0, 0.5, 1.0, 1.0, 2.0],
            id: 0,
            finish: RowFinish::AsIs,
            unit: 1.0,
        };
        let mut out = [0.0f64; 2];
        weights.apply(&[1.0, 2.0, 3.0, 4.0, 5.0], &mut out);
        assert_eq!(out, [2.0, 17.0]);
    }
}
