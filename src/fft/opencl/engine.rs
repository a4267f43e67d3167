//! The `Engine` trait on the OpenCL engine: every entry point goes through `guarded_run`.

use super::*;

impl<T: Sample> Engine<T> for OpenClEngine<T> {
    fn name(&self) -> String {
        format!("opencl:{}", self.dev.info.name)
    }

    fn transform(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        crate::fft::check_batch("opencl", spec, input.len(), frames, out.len())?;
        let input = FrameStep::packed_in(spec, input, frames);
        self.guarded_run(spec, (Samples::Run(input), Carry::Run), (None, None), out)
    }

    fn transform_bands(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: &BandWeights,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let reduction = (Some(bands), None);
        crate::fft::check_reduced("opencl", spec, (input.len(), frames), reduction, out.len())?;
        let input = FrameStep::packed_in(spec, input, frames);
        self.guarded_run(spec, (Samples::Run(input), Carry::Run), reduction, out)
    }

    fn transform_segments(
        &mut self,
        spec: &TransformSpec,
        input: &[T],
        frames: usize,
        bands: Option<&BandWeights>,
        runs: &Segments<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let reduction = (bands, Some(runs));
        crate::fft::check_reduced("opencl", spec, (input.len(), frames), reduction, out.len())?;
        let input = FrameStep::packed_in(spec, input, frames);
        self.guarded_run(spec, (Samples::Run(input), Carry::Run), reduction, out)
    }

    fn transform_strided(
        &mut self,
        spec: &TransformSpec,
        frames: FrameStep<'_, T>,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        frames.check_batch("opencl", spec, reduction, out.len())?;
        self.guarded_run(spec, (Samples::Run(frames), Carry::Run), reduction, out)
    }

    /// In f64: f32 samples cross as f32 and widen on the device, rows asked for as f32 narrow
    /// there and cross as f32 (`carry`). In f32 there is nothing to carry: as on the host.
    fn transform_carried(
        &mut self,
        spec: &TransformSpec,
        samples: Samples<'_, T>,
        rows: Carry,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<Carry, EngineError> {
        if T::NAME != "f64" {
            return crate::fft::carry::on_host(
                self,
                spec,
                samples,
                (reduction, &mut Vec::new()),
                out,
            );
        }
        samples.check_batch("opencl", spec, reduction, out.len())?;
        self.guarded_run(spec, (samples, rows), reduction, out)?;
        Ok(rows)
    }

    /// `transform_carried` with the injected fault set aside (one of the warm-up strikes
    /// first) and the batch count kept; its device times and trace are dropped.
    fn warm_up(
        &mut self,
        spec: &TransformSpec,
        samples: Samples<'_, T>,
        rows: Carry,
        reduction: Reduction<'_>,
        out: &mut [T],
    ) -> Result<(), EngineError> {
        let (fault, batches) = (self.options.fault.take(), self.batches);
        let held = fault.as_ref().map_or(Ok(()), |f| f.before_warm_up());
        let warmed = held.map_err(dev_err).and_then(|()| {
            let carried = self.transform_carried(spec, samples, rows, reduction, out);
            carried.map(drop)
        });
        (self.options.fault, self.batches) = (fault, batches);
        let _dropped = (self.take_device_times(), self.take_device_trace());
        warmed
    }

    fn take_device_times(&mut self) -> Option<crate::fft::DeviceTimes> {
        let p = self.last_profile.take()?;
        let times = crate::fft::DeviceTimes {
            upload_ns: p.write_ns,
            kernel_ns: p.kernel_ns,
            download_ns: p.read_ns,
        };
        (times != crate::fft::DeviceTimes::default()).then_some(times)
    }

    fn take_device_trace(&mut self) -> Option<crate::fft::DeviceTrace> {
        chunk_log::take(&mut self.slots, self.dev.info.address())
    }

    fn pinned_memory(&self) -> Option<PinnedMemory<T>> {
        Some(Arc::new(pinned::DevicePinned(self.dev.clone())))
    }
}
