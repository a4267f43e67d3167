//! Running one batch on the OpenCL engine: the fused reductions and the plan made ready, the
//! batch cut into chunks, the buffers reserved, then the chunks pipelined through the slots on
//! three queues (copy in, compute, copy out) chained by events. Samples held as f32 are widened
//! after their copy, rows asked for as f32 narrowed before theirs (`carry`).

use super::carry::{read_chunk, write_chunk, Carrier, HostIn, HostOut};
use super::launch::{cl, Launch};
use super::segments::ChunkSpan;
use super::*;
use crate::fft::carry::f32s_mut;
use opencl3::event::Event;

/// The sizes of one batch: values per frame in and out, the chunks and the pipeline slots.
struct Shape {
    /// Input values per frame.
    per_in: usize,
    /// Bins per frame (post kernel work-items).
    bins: usize,
    /// Output values per frame of the transform (buffer sizes).
    per_out: usize,
    /// Values per frame copied back: the bands when they are summed here.
    per_final: usize,
    /// Frames start `step` values apart in the input.
    step: usize,
    direct_in: bool,
    direct_out: bool,
    /// Samples cross as f32 (widened on the device), rows come back as f32 (narrowed there).
    carried: (bool, bool),
    /// Frames per chunk, at most.
    chunk: usize,
    spans: Vec<ChunkSpan>,
    nslots: usize,
}

/// A slot's device buffers, borrowed apart from its staging blocks.
struct SlotBufs<'s, T> {
    dev_in: Option<&'s Buffer<T>>,
    dev_out: Option<&'s Buffer<T>>,
    dev_bands: Option<&'s Buffer<T>>,
    dev_runs: Option<&'s Buffer<T>>,
}

/// What the chunk loop borrows from the engine.
struct Chunker<'a, T: Sample> {
    queue: &'a CommandQueue,
    copy_in: &'a CommandQueue,
    copy_out: &'a CommandQueue,
    plan: &'a mut Plan<T>,
    work: (Option<&'a Buffer<T>>, Option<&'a Buffer<T>>),
    bands: Option<&'a mut bands::DeviceBands<T>>,
    reduce: Option<&'a mut segments::DeviceSegments<T>>,
    /// Widens and narrows carried values (a batch that carries any).
    carrier: Option<&'a mut Carrier>,
    args: ScaleArgs<T>,
    step_u32: u32,
}

impl<T: Sample> OpenClEngine<T> {
    pub(super) fn run(
        &mut self,
        spec: &TransformSpec,
        (input, rows): (Samples<'_, T>, Carry),
        (band_weights, runs): (Option<&BandWeights>, Option<&Segments<'_>>),
        out: &mut [T],
    ) -> Result<(), String> {
        self.load_reductions(band_weights, runs)?;
        let key: PlanKey = (spec.n, spec.kind, spec.window, spec.scale == Scale::Complex);
        if !self.plans.contains_key(&key) {
            let plan = self.build_plan(spec)?;
            self.plans.insert(key, plan);
        }
        let (data, count, step) = match input {
            Samples::Run(f) => (HostIn::Run(&f.data[..f.needed(spec)]), f.count, f.step),
            Samples::F32(f) => (HostIn::F32(&f.data[..f.needed(spec)]), f.count, f.step),
        };
        let out_len = out.len();
        let mut out = match rows {
            Carry::Run => HostOut::Run(out),
            Carry::F32 => HostOut::F32(&mut f32s_mut(out)[..out_len]),
        };
        let reduced = (band_weights.map(BandWeights::bands), runs);
        let shape = self.shape(spec, (data, count, step), &out, reduced)?;
        if (shape.carried.0 || shape.carried.1) && self.carrier.is_none() {
            self.carrier = Some(Carrier::new(&self.dev)?);
        }
        self.reserve(&key, &shape, band_weights.is_some(), runs.is_some())?;
        let args = self.scale_args(spec, &key)?;
        let timed = self.options.profile;
        let mut profile = BatchProfile {
            direct_in: shape.direct_in,
            direct_out: shape.direct_out,
            ..Default::default()
        };
        let step_u32 = u32::try_from(shape.step)
            .map_err(|_| format!("frame step {} too large", shape.step))?;
        let OpenClEngine {
            queue,
            copy_in,
            copy_out,
            plans,
            slots,
            work_a,
            work_b,
            bands,
            runs: device_runs,
            carrier,
            ..
        } = self;
        let mut chunker = Chunker {
            queue,
            copy_in,
            copy_out,
            plan: plans.get_mut(&key).ok_or("plan missing")?,
            work: (work_a.buf.as_ref(), work_b.buf.as_ref()),
            bands: bands.as_mut().filter(|_| band_weights.is_some()),
            reduce: device_runs.as_mut().filter(|_| runs.is_some()),
            carrier: carrier.as_mut(),
            args,
            step_u32,
        };
        // Pipeline over the chunks in `nslots` rotating slots: while chunk c is being written,
        // earlier chunks are being transformed and read back. Staged input is copied into the
        // slot's pinned buffer first, staged output out of it once its read has finished.
        let nslots = shape.nslots;
        for c in 0..shape.spans.len() + nslots {
            let slot = &mut slots[c % nslots];
            slot.drain(&mut out, timed.then_some(&mut profile))?;
            let Some(&span) = shape.spans.get(c) else {
                continue; // past the last chunk: only draining
            };
            slot.pending = Some(chunker.enqueue_chunk(slot, span, &shape, data, &mut out)?);
        }
        self.last_profile = Some(profile);
        Ok(())
    }

    /// The runs and band matrix of fused `--average` / `--bands` on the device: kept while
    /// batches bring the same ones (the common case).
    fn load_reductions(
        &mut self,
        band_weights: Option<&BandWeights>,
        runs: Option<&Segments<'_>>,
    ) -> Result<(), String> {
        if let Some(r) = runs.filter(|r| self.runs.as_ref().is_none_or(|d| !d.holds(r))) {
            self.runs = Some(segments::DeviceSegments::new(&self.dev, &self.queue, r)?);
        }
        let stale = |b: &bands::DeviceBands<T>, w: &BandWeights| {
            b.id != w.id || b.finish != w.finish as i32 || !b.has_unit(w.unit)
        };
        if let Some(w) = band_weights.filter(|w| self.bands.as_ref().is_none_or(|b| stale(b, w))) {
            self.bands = Some(bands::DeviceBands::new(&self.dev, &self.queue, w)?);
        }
        Ok(())
    }

    /// The batch cut into chunks (between runs when runs are reduced here; a long run is a
    /// chunk of its own); DMA straight from / into the caller's memory where it is pinned.
    fn shape(
        &self,
        spec: &TransformSpec,
        (data, frames, step): (HostIn<'_, T>, usize, usize),
        out: &HostOut<'_, T>,
        (bands, runs): (Option<usize>, Option<&Segments<'_>>),
    ) -> Result<Shape, String> {
        let per_in = spec.values_per_frame();
        let per_out = spec.values_out();
        let pinned = &self.dev.pinned;
        let ((in_at, in_bytes), (out_at, out_bytes)) = (data.memory(), out.memory());
        let direct_in = pinned.contains(in_at, in_bytes);
        let direct_out = pinned.contains(out_at, out_bytes);
        let frame_bytes = per_in * data.value_bytes();
        let chunk_bytes = self
            .options
            .chunk_bytes
            .unwrap_or(match direct_in && direct_out {
                true => pinned_chunk_bytes(frames * frame_bytes),
                false => STAGED_CHUNK_BYTES,
            });
        let chunk = chunk_frames(chunk_bytes, per_in, data.value_bytes()).min(frames);
        let spans = segments::chunk_spans(frames, chunk, runs.map(|r| r.lengths));
        let chunk = spans.iter().map(|s| s.fc).max().unwrap_or(chunk);
        Ok(Shape {
            per_in,
            bins: spec.bins(),
            per_out,
            per_final: bands.unwrap_or(per_out),
            step,
            direct_in,
            direct_out,
            carried: (
                matches!(data, HostIn::F32(_)),
                matches!(out, HostOut::F32(_)),
            ),
            chunk,
            nslots: spans.len().min(SLOTS),
            spans,
        })
    }

    /// Work buffers (multi-pass paths), slots and their staging and reduction buffers, sized
    /// for the largest chunk.
    fn reserve(
        &mut self,
        key: &PlanKey,
        shape: &Shape,
        bands: bool,
        runs: bool,
    ) -> Result<(), String> {
        let dev = self.dev.clone();
        let chunk = shape.chunk;
        let points = self.plans.get(key).ok_or("plan missing")?.work_points;
        if points > 0 {
            ensure(
                &mut self.work_a,
                &dev,
                CL_MEM_READ_WRITE,
                2 * points * chunk,
            )?;
            ensure(
                &mut self.work_b,
                &dev,
                CL_MEM_READ_WRITE,
                2 * points * chunk,
            )?;
        }
        while self.slots.len() < shape.nslots {
            self.slots.push(Slot::new());
        }
        let staged = |direct: bool, len: usize| if direct { 0 } else { len };
        let per_final = chunk * shape.per_final;
        for slot in self.slots.iter_mut().take(shape.nslots) {
            slot.reserve(
                &dev,
                chunk * shape.per_in,
                chunk * shape.per_out,
                staged(shape.direct_in, chunk * shape.per_in),
                staged(shape.direct_out, per_final),
            )?;
            if bands {
                ensure(&mut slot.dev_bands, &dev, CL_MEM_READ_WRITE, per_final)?;
            }
            if runs {
                ensure(&mut slot.dev_runs, &dev, CL_MEM_READ_WRITE, per_final)?;
            }
            if shape.carried.0 {
                ensure(
                    &mut slot.dev_in32,
                    &dev,
                    CL_MEM_READ_ONLY,
                    chunk * shape.per_in,
                )?;
            }
            if shape.carried.1 {
                ensure(&mut slot.dev_out32, &dev, CL_MEM_READ_WRITE, per_final)?;
            }
        }
        Ok(())
    }

    /// The output scale as the kernels take it (the plan knows the window's sums).
    fn scale_args(&self, spec: &TransformSpec, key: &PlanKey) -> Result<ScaleArgs<T>, String> {
        let plan = self.plans.get(key).ok_or("plan missing")?;
        let scale = ScalePlan::with_window_sums(spec, plan.window_sums.0, plan.window_sums.1);
        let mode: i32 = match scale.mode {
            super::super::scale::ScaleMode::Magnitude => 0,
            super::super::scale::ScaleMode::Power => 1,
            super::super::scale::ScaleMode::Db => 2,
            // COMPLEX_OUT kernels write X and ignore the mode
            super::super::scale::ScaleMode::Complex => 3,
        };
        Ok(ScaleArgs {
            mode,
            norm_edge: T::of_f64(scale.norm),
            norm_interior: T::of_f64(scale.norm * scale.interior_factor),
        })
    }
}

impl<T: Sample> Chunker<'_, T> {
    /// Enqueues one chunk in `slot`: its input written (and widened, carried as f32), its
    /// kernels (transform, then the fused bands and runs), its output read back (narrowed
    /// first, carried as f32); the queues flushed.
    fn enqueue_chunk(
        &mut self,
        slot: &mut Slot<T>,
        span: ChunkSpan,
        shape: &Shape,
        input: HostIn<'_, T>,
        out: &mut HostOut<'_, T>,
    ) -> Result<Pending, String> {
        let (f0, fc) = (span.f0, span.fc);
        let at = f0 * shape.step..(f0 + fc - 1) * shape.step + shape.per_in;
        let (write, widened) = self.enqueue_input(slot, input, at, shape.direct_in)?;
        let ready = widened.as_ref().unwrap_or(&write).get();
        let bufs = SlotBufs {
            dev_in: slot.dev_in.buf.as_ref(),
            dev_out: slot.dev_out.buf.as_ref(),
            dev_bands: slot.dev_bands.buf.as_ref(),
            dev_runs: slot.dev_runs.buf.as_ref(),
        };
        let (transform, dev_final) = self.enqueue_transform(bufs, span, shape, ready)?;
        let mut kernels: Vec<_> = widened.into_iter().chain(transform).collect();
        let last = kernels
            .last()
            .map(|e| e.get())
            .ok_or("no kernel launched")?;
        let (r0, len) = (span.r0 * shape.per_final, span.rc * shape.per_final);
        let staged = slot.pin_out.as_mut().filter(|_| !shape.direct_out);
        let read = match out {
            HostOut::Run(out) => {
                let dst = match staged {
                    Some(pin) => &mut pin.as_mut_slice()[..len],
                    None => &mut out[r0..r0 + len],
                };
                // SAFETY: `dst` (the caller's output or the slot's pinned block) is not read or
                // freed before this read's event completes: the slot's `drain` waits for it
                // before the slot is reused or the batch returns, on error and unwinding too
                // (`abandon`). The read waits for `last`, the final kernel writing `dev_final`,
                // which holds the chunk's `len` values.
                unsafe { read_chunk(self.copy_out, dev_final, dst, last) }?
            }
            HostOut::F32(out) => {
                let dev32 = slot
                    .dev_out32
                    .buf
                    .as_ref()
                    .ok_or("device buffers missing")?;
                let carrier = self.carrier.as_deref_mut().ok_or("carrier missing")?;
                let narrowed = carrier.narrow(self.queue, (dev_final, dev32), len)?;
                let dst = match staged {
                    Some(pin) => &mut f32s_mut(pin.as_mut_slice())[..len],
                    None => &mut out[r0..r0 + len],
                };
                // SAFETY: as for the read above; it waits for `narrowed`, which writes the
                // chunk's `len` values into `dev32`.
                let read = unsafe { read_chunk(self.copy_out, dev32, dst, narrowed.get()) }?;
                kernels.push(narrowed);
                read
            }
        };
        for q in [self.copy_in, self.queue, self.copy_out] {
            q.flush().map_err(|e| cl("flush", e))?;
        }
        Ok(Pending {
            out_at: r0,
            len,
            staged_out: !shape.direct_out,
            write,
            kernels,
            read,
        })
    }

    /// Enqueues the copy of the chunk's samples (`at` of `input`) to the device, through the
    /// slot's pinned block unless the input is pinned (`direct`): into the slot's input buffer,
    /// or, carried as f32, into its f32 buffer and then widened into the input buffer. Returns
    /// the copy's event and the widening's.
    fn enqueue_input(
        &mut self,
        slot: &mut Slot<T>,
        input: HostIn<'_, T>,
        at: std::ops::Range<usize>,
        direct: bool,
    ) -> Result<(Event, Option<Event>), String> {
        let staging = slot.pin_in.as_mut().filter(|_| !direct);
        let staging = staging.map(|pin| pin.as_mut_slice());
        match input {
            HostIn::Run(data) => {
                let dev = slot.dev_in.buf.as_mut().ok_or("device buffers missing")?;
                // SAFETY: the source (the caller's input or this slot's pinned staging block)
                // stays alive and unwritten until this write's event completes: the chunk's
                // read waits for it through the kernels, and `drain` waits for the read before
                // the slot is reused or the batch returns, on error and unwinding too
                // (`abandon`). `dev` holds a whole chunk, at least `at.len()` values.
                let write = unsafe { write_chunk(self.copy_in, dev, &data[at], staging) }?;
                Ok((write, None))
            }
            HostIn::F32(data) => {
                let dev32 = slot.dev_in32.buf.as_mut().ok_or("device buffers missing")?;
                let staging = staging.map(f32s_mut);
                let count = at.len();
                // SAFETY: as for the write above (`widen` waits for it, the kernels for
                // `widen`); `dev32` holds a whole chunk of f32 values.
                let write = unsafe { write_chunk(self.copy_in, dev32, &data[at], staging) }?;
                let (Some(from), Some(to)) = (slot.dev_in32.buf.as_ref(), slot.dev_in.buf.as_ref())
                else {
                    return Err("device buffers missing".into());
                };
                let carrier = self.carrier.as_deref_mut().ok_or("carrier missing")?;
                let widened = carrier.widen(self.queue, (from, to), count, write.get())?;
                Ok((write, Some(widened)))
            }
        }
    }

    /// The chunk's kernels after its write: the transform, then bands and runs when they are
    /// fused. Returns their events and the buffer the host reads back.
    fn enqueue_transform<'s>(
        &mut self,
        slot: SlotBufs<'s, T>,
        span: ChunkSpan,
        shape: &Shape,
        write: opencl3::types::cl_event,
    ) -> Result<(Vec<opencl3::event::Event>, &'s Buffer<T>), String> {
        let (Some(dev_in), Some(dev_out)) = (slot.dev_in, slot.dev_out) else {
            return Err("device buffers missing".into());
        };
        let launch = Launch {
            q: self.queue,
            inb: dev_in,
            outb: dev_out,
            work: self.work,
            frames: span.fc,
            n_bins: span.fc * shape.bins,
            args: self.args,
            step: self.step_u32,
            wait: &[write],
        };
        let mut kernels = enqueue_kernels(self.plan, &launch)?;
        let dev_final = match self.bands.as_deref_mut() {
            Some(b) => {
                let dev_bands = slot.dev_bands.ok_or("band buffer missing")?;
                kernels.push(b.enqueue(self.queue, dev_out, dev_bands, span.fc)?);
                dev_bands
            }
            None => dev_out,
        };
        let dev_final = match self.reduce.as_deref_mut() {
            Some(r) => {
                let dev_runs = slot.dev_runs.ok_or("run buffer missing")?;
                kernels.push(r.enqueue(self.queue, dev_final, dev_runs, span, shape.per_final)?);
                dev_runs
            }
            None => dev_final,
        };
        Ok((kernels, dev_final))
    }
}
