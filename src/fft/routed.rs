//! `RoutedEngine`: one worker's OpenCL engine with a CPU engine beside it. Every batch goes to
//! OpenCL (which lane takes a batch is the dispatcher's decision, `pipeline::dispatch`, from the
//! lanes' speeds); sizes the device does not take go to the CPU with one info line. When the
//! device fails (build error, out of memory, fault mid-stream), its lane is
//! marked failed with one warning (`lanes::LaneSet::fail`), and this batch and every later one of
//! the lane's workers either go back to the caller as `EngineError::HandOff` — when another lane
//! of the run can take them (the pipeline hands them on) — or run on the CPU engine here. The
//! failed batch is recomputed whole, so no frame is lost, duplicated or reordered. A batch
//! holding f32 samples (`carry`) is widened on the device, or on the host when the CPU engine
//! takes it.

use super::cpu::CpuEngine;
use super::lanes::{Lane, LaneSet};
use super::log_once::info_once;
use super::opencl::OpenClEngine;
use super::{
    BandWeights, Carry, Engine, EngineError, FrameStep, PinnedMemory, Reduction, Samples, Segments,
    TransformSpec,
};
use crate::types::Sample;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An OpenCL engine with the CPU engine as fallback, for one worker of one lane.
pub(crate) struct RoutedEngine<T: Sample> {
    cpu: CpuEngine<T>,
    gpu: Option<OpenClEngine<T>>,
    /// The lane this worker belongs to (shared by its workers: a failure is the lane's).
    lane: Arc<Lane>,
    lane_set: Arc<LaneSet>,
}

impl<T: Sample> RoutedEngine<T> {
    pub(crate) fn new(gpu: OpenClEngine<T>, lane: Arc<Lane>, lane_set: Arc<LaneSet>) -> Self {
        RoutedEngine {
            cpu: CpuEngine::new(),
            gpu: Some(gpu),
            lane,
            lane_set,
        }
    }

    /// Whether the device takes frames of `spec` (else one info line, and the CPU engine).
    fn use_gpu(&self, spec: &TransformSpec) -> bool {
        let Some(gpu) = &self.gpu else {
            return false;
        };
        if let Err(e) = gpu.supports(spec) {
            info_once(
                format!("unsupported {} {} {:?}", spec.n, T::NAME, spec.kind),
                &format!("{e}; these frames go to the CPU engine"),
            );
            return false;
        }
        true
    }

    /// After the lane's device failed: hand the batch on when another lane takes it.
    fn hand_off(&mut self) -> Result<(), EngineError> {
        self.gpu = None;
        if self.lane_set.takes_over(&self.lane) {
            return Err(EngineError::HandOff {
                lane: self.lane.label.clone(),
            });
        }
        Ok(())
    }

    /// Runs `call` on the OpenCL engine, or on the CPU engine when the device cannot take the
    /// batch; a device fault fails the lane (see the module comment). Whether the device ran it.
    fn route(
        &mut self,
        spec: &TransformSpec,
        frames: usize,
        call: &mut dyn FnMut(&mut dyn Engine<T>) -> Result<(), EngineError>,
    ) -> Result<bool, EngineError> {
        if self.lane.failed() {
            self.hand_off()?;
        }
        if self.use_gpu(spec) {
            if let Some(gpu) = self.gpu.as_mut() {
                match call(gpu) {
                    Ok(()) => return Ok(true),
                    Err(EngineError::Unsupported { what, .. }) => info_once(
                        format!("unsupported {what}"),
                        &format!(
                            "OpenCL engine: unsupported {what}; these frames go to the CPU engine"
                        ),
                    ),
                    Err(e) => {
                        self.lane_set.fail(&self.lane, &e);
                        self.hand_off()?;
                    }
                }
            }
        }
        let counters = &self.lane.counters;
        counters
            .cpu_frames
            .fetch_add(frames as u64, Ordering::Relaxed);
        call(&mut self.cpu).map(|()| false)
    }
}

impl<T: Sample> Engine<T> for RoutedEngine<T> {
    fn name(&self) -> String {
        match &self.gpu {
            Some(g) => format!("{}+cpu", g.name()),
            None => "cpu".into(),
        }
    }

    fn transform(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.route(spec, frames, &mut |e| e.transform(spec, input, frames, out))
            .map(drop)
    }

    fn transform_bands(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: &BandWeights,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.route(spec, frames, &mut |e| {
            e.transform_bands(spec, input, frames, bands, out)
        })
        .map(drop)
    }

    fn transform_segments(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: Option<&BandWeights>,
        segments: &Segments<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.route(spec, frames, &mut |e| {
            e.transform_segments(spec, input, frames, bands, segments, out)
        })
        .map(drop)
    }

    fn transform_strided(
        &mut self,
        spec: &TransformSpec,
        frames: FrameStep<'_, T>,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        self.route(spec, frames.count, &mut |e| {
            e.transform_strided(spec, frames, reduction, out)
        })
        .map(drop)
    }

    /// On the device, f32 samples widen (and rows narrow) there; on the CPU engine, the
    /// samples widen on the host and the rows stay in the run's type.
    fn transform_carried(
        &mut self,
        spec: &TransformSpec,
        samples: Samples<'_, T>,
        rows: Carry,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<Carry, EngineError> {
        let mut came = Carry::Run;
        let on_device = self.route(spec, samples.count(), &mut |e| {
            came = e.transform_carried(spec, samples, rows, reduction, out)?;
            Ok(())
        })?;
        let counters = &self.lane.counters;
        if on_device && matches!(samples, Samples::F32(_)) {
            counters.f32_up.fetch_add(1, Ordering::Relaxed);
        }
        if came == Carry::F32 {
            counters.f32_down.fetch_add(1, Ordering::Relaxed);
        }
        Ok(came)
    }

    /// The device's warm-up alone: a failure there is left to the first batch, which fails
    /// over as any batch does.
    fn warm_up(
        &mut self,
        spec: &TransformSpec,
        samples: Samples<'_, T>,
        rows: Carry,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let Some(gpu) = self.gpu.as_mut() else {
            return Ok(());
        };
        gpu.warm_up(spec, samples, rows, reduction, out)
    }

    fn pinned_memory(&self) -> Option<PinnedMemory<T>> {
        self.gpu.as_ref().and_then(|g| g.pinned_memory())
    }

    fn take_device_times(&mut self) -> Option<super::DeviceTimes> {
        self.gpu.as_mut().and_then(|g| g.take_device_times())
    }

    fn take_device_trace(&mut self) -> Option<super::DeviceTrace> {
        self.gpu.as_mut().and_then(|g| g.take_device_trace())
    }
}
