//! Range reader stage: for seekable inputs (`source::seekable`), several threads read one stream
//! at once. The frames of every such stream are cut into batch-sized jobs up front (frame k starts
//! at sample k·hop, so a job's byte range follows from its first frame); each thread takes the
//! next job, reads its bytes with one positioned read, decodes them and writes the frames straight
//! into a batch buffer from the pool (the pinned memory of the device the dispatcher means the
//! batch for), skipping the framer and the batcher.
//!
//! Frames are exactly the sequential path's: the same decoder and channel splitter, samples past
//! the analysed length read as zeros (the padded tail), the frame count from `frame::expected_frames`
//! with `--duration` and `--max-frames` applied. A job takes its batch number together with its
//! frames, so each stream's batches are numbered in frame order and the sink writes them in order.
//! In an f64 run a job for a device writes its samples as f32 when they are f32 values
//! (`dispatch::carriage`): raw f32 read straight into the batch, decoded values narrowed.

use super::batcher::{Batch, FrameMeta};
use super::dispatch::Dispatcher;
use super::pool::BufferPool;
use super::Control;
use crate::error::{FftdError, Result};
use crate::fft::carry::f32s_mut;
use crate::fft::{Carry, TransformSpec};
use crate::frame::expected_frames;
use crate::source::channels::ChannelSplitter;
use crate::source::seekable::{SampleCoding, SeekableLayout};
use crate::source::InputFormat;
use crate::stats::Counters;
use crate::timeline::{Kind, Phase, ThreadClock};
use crate::types::Sample;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One stream of a seekable input.
pub(crate) struct RangeStream {
    /// Stream id.
    pub stream: usize,
    pub layout: Arc<SeekableLayout>,
    pub splitter: Arc<ChannelSplitter>,
    /// Which of the splitter's outputs this stream is.
    pub part: usize,
    /// Samples analysed (the file's, or fewer with `--duration`).
    pub samples: u64,
    /// Frames this stream gives.
    pub frames: u64,
}

impl RangeStream {
    /// The stream's frames for frame size `n` and `hop`, with `--duration` (`sample_limit`) and
    /// `--max-frames` applied as the sequential reader applies them.
    pub(crate) fn new(
        stream: usize,
        layout: Arc<SeekableLayout>,
        splitter: Arc<ChannelSplitter>,
        part: usize,
        framing: &Framing,
    ) -> Self {
        let samples = framing
            .sample_limit(layout.rate)
            .map_or(layout.frames, |limit| layout.frames.min(limit));
        let frames = expected_frames(samples, framing.n as u64, framing.hop as u64, framing.tail)
            .min(framing.max_frames);
        RangeStream {
            stream,
            layout,
            splitter,
            part,
            samples,
            frames,
        }
    }
}

impl RangeStream {
    /// Samples of the input in frames `from..to` of this stream, each once: a frame's up to the
    /// next frame's start, the stream's last frame's to its end, cut at the analysed length.
    fn covered(&self, framing: &Framing, from: u64, to: u64) -> u64 {
        let to = to.min(self.frames);
        if to <= from {
            return 0;
        }
        let (n, hop) = (framing.n as u64, framing.hop as u64);
        let span = |k: u64, len: u64| (k * hop + len).min(self.samples).saturating_sub(k * hop);
        if to < self.frames {
            // every frame but the last lies whole in the input (`expected_frames`)
            return (to - from) * n.min(hop);
        }
        (to - 1 - from) * n.min(hop) + span(to - 1, n)
    }
}

/// The framing settings every range stream shares.
pub(crate) struct Framing {
    pub n: usize,
    pub hop: usize,
    pub tail: crate::frame::Tail,
    pub max_frames: u64,
    /// `--duration` in seconds.
    pub duration: Option<f64>,
    /// Frames per batch once a device's lane has joined (`Dispatcher::has_device`).
    pub batch: usize,
    /// Frames per batch while the CPU engines alone take batches.
    pub cpu_batch: usize,
    /// `--dc-remove`: each frame's mean taken out (`source::dc`).
    pub dc_remove: bool,
}

/// Values (every channel) one job reads at most: a thread's scratch buffers stay within
/// 2^21 · (8 bytes of f64 + the file's bytes) whatever `--batch` and the channel count.
pub(super) const JOB_VALUES: u64 = 1 << 21;

impl Framing {
    fn sample_limit(&self, rate: f64) -> Option<u64> {
        self.duration.map(|d| (d * rate).ceil() as u64)
    }

    /// Frames in one job of `layout`: a batch (sized for devices once one has joined), or fewer
    /// so the job reads at most `JOB_VALUES` values; at least one.
    fn job_frames(&self, layout: &SeekableLayout, devices: bool) -> u64 {
        let batch = if devices { self.batch } else { self.cpu_batch };
        let per_sample = (layout.channels * layout.kind.width()) as u64;
        let (n, hop) = (self.n as u64, self.hop as u64);
        let samples = (JOB_VALUES / per_sample).saturating_sub(n);
        let fitting = if hop <= n {
            samples / hop + 1
        } else {
            samples / n + 1
        };
        fitting.clamp(1, batch as u64)
    }

    /// How a batch of `count` frames lies in its buffer: (values between frame starts, values in
    /// all). Overlapping frames (hop < frame) are held once, as the input has them: the engines
    /// read them in place, and a device gets each sample once.
    fn batch_layout(&self, spec: &TransformSpec, count: usize) -> (usize, usize) {
        let per_frame = spec.values_per_frame();
        match self.hop < self.n {
            true => {
                let step = self.hop * spec.kind.width();
                (step, (count.max(1) - 1) * step + per_frame)
            }
            false => (per_frame, count * per_frame),
        }
    }

    /// Whether a job of one frame of `layout` stays within `JOB_VALUES` (else: read it
    /// sequentially, whose blocks shrink with the channel count).
    pub(crate) fn fits(&self, layout: &SeekableLayout) -> bool {
        (self.n * layout.channels * layout.kind.width()) as u64 <= JOB_VALUES
    }
}

/// A batch of consecutive frames of one stream.
#[derive(Clone, Copy, Debug)]
struct Job {
    stream: usize,
    first: u64,
    count: usize,
    id: u64,
}

/// The jobs of every range stream, handed out in order.
pub(super) struct RangeJobs {
    streams: Vec<RangeStream>,
    framing: Framing,
    /// (index into `streams`, next frame).
    cursor: Mutex<(usize, u64)>,
}

impl RangeJobs {
    pub(super) fn new(streams: Vec<RangeStream>, framing: Framing) -> Self {
        RangeJobs {
            streams,
            framing,
            cursor: Mutex::new((0, 0)),
        }
    }

    /// The streams the jobs cover.
    pub(super) fn streams(&self) -> &[RangeStream] {
        &self.streams
    }

    /// Samples of all inputs the jobs will read and analyse (each input once).
    pub(super) fn total_samples(&self) -> u64 {
        let first_parts = self.streams.iter().filter(|s| s.part == 0);
        first_parts
            .map(|s| s.covered(&self.framing, 0, s.frames))
            .sum()
    }

    /// Values in the largest batch a device's lane gets, in and out (spectra of every frame):
    /// the size a late lane's pinned buffers are made before it joins (`BufferPool::expect`).
    pub(super) fn device_batch_values(
        &self,
        spec_of: &dyn Fn(usize, crate::types::InputKind, f64) -> TransformSpec,
    ) -> (usize, usize) {
        let per_stream = self.streams.iter().map(|stream| {
            let spec = spec_of(self.framing.n, stream.layout.kind, stream.layout.rate);
            let count = self.framing.job_frames(&stream.layout, true) as usize;
            let (_, values_in) = self.framing.batch_layout(&spec, count);
            (values_in, count * spec.values_out())
        });
        per_stream.fold((0, 0), |(i, o), (a, b)| (i.max(a), o.max(b)))
    }

    /// The first stream's transform (None with no streams).
    pub(super) fn first_spec(
        &self,
        spec_of: &dyn Fn(usize, crate::types::InputKind, f64) -> TransformSpec,
    ) -> Option<TransformSpec> {
        let layout = &self.streams.first()?.layout;
        Some(spec_of(self.framing.n, layout.kind, layout.rate))
    }

    /// The next job and its batch number, taken together so a stream's batches are numbered in
    /// frame order. None when every frame has been handed out.
    fn next(&self, control: &Control, devices: bool) -> Option<Job> {
        let mut cursor = self.cursor.lock().ok()?;
        let (index, next) = &mut *cursor;
        while *index < self.streams.len() && *next >= self.streams[*index].frames {
            *index += 1;
            *next = 0;
        }
        let stream = self.streams.get(*index)?;
        let most = self.framing.job_frames(&stream.layout, devices);
        let count = (stream.frames - *next).min(most) as usize;
        let job = Job {
            stream: *index,
            first: *next,
            count,
            id: control.take_batch_id(),
        };
        *next += count as u64;
        Some(job)
    }

    /// Hands out no more jobs of stream `index` (its input failed).
    fn give_up(&self, index: usize) {
        if let Ok(mut cursor) = self.cursor.lock() {
            if cursor.0 == index {
                *cursor = (index + 1, 0);
            }
        }
    }
}

/// One range-reader thread: takes jobs until none is left, a stop, or an error.
pub(super) fn run_range_reader<T: Sample>(
    jobs: &RangeJobs,
    dispatcher: &Dispatcher<T>,
    control: &Control,
    pool: &BufferPool<T>,
    spec_of: &dyn Fn(usize, crate::types::InputKind, f64) -> TransformSpec,
) -> Result<()> {
    let mut reader = JobReader::default();
    // the time after the last job: the thread waits for the stages after it to end
    let mut clock = control.clock(Kind::Reader, Phase::ReaderWait);
    while !control.stopping() {
        let Some(job) = jobs.next(control, dispatcher.has_device()) else {
            break;
        };
        let stream = &jobs.streams[job.stream];
        let spec = spec_of(jobs.framing.n, stream.layout.kind, stream.layout.rate);
        let lane = dispatcher.choose(&spec, job.count);
        let carry_f32 = dispatcher.carriage(lane).samples_f32;
        let (step, len) = jobs.framing.batch_layout(&spec, job.count);
        let mut data = pool.take(lane, len);
        data.set_len_for_overwrite(len);
        // a batch buffer comes free when the stages after the readers have let one go
        clock.lap_span(Phase::ReaderWait, Some(job.id), Some(stream.stream));
        let job_in = (stream, &jobs.framing, job);
        let filled = reader.fill_batch(job_in, &mut data, carry_f32, &mut clock);
        // (plan_streams sends overlapping frames with --dc-remove the sequential way: frames
        // that share samples in the buffer cannot each lose their own mean)
        if filled.is_ok() && jobs.framing.dc_remove && step == spec.values_per_frame() {
            let width = stream.layout.kind.width();
            crate::source::dc::remove_frame_means(&mut data, jobs.framing.n * width, width);
        }
        clock.lap_span(Phase::Frame, Some(job.id), Some(stream.stream));
        let held = *filled.as_ref().unwrap_or(&Carry::Run);
        if let Err(e) = filled {
            // the input's own fault ends its stream here; the other streams go on
            control.cut_stream(stream.stream, job.first);
            jobs.give_up(job.stream);
            control.skip_batch(job.id); // the sink goes past it
            dispatcher.skip(job.id); // later batches must not wait for this one
            match e {
                FftdError::Input { .. } | FftdError::Io { .. } => {
                    control.fail_input(e);
                    continue;
                }
                e => return Err(e),
            }
        }
        Counters::add(&control.counters.frames_in, job.count as u64);
        // a job reads the samples of its frames, no others: read and analysed are the same
        let samples = samples_counted(stream, &jobs.framing, job);
        Counters::add(&control.counters.samples_in, samples);
        Counters::add(&control.counters.samples_analysed, samples);
        let completed = Instant::now();
        let frames = (0..job.count as u64)
            .map(|i| FrameMeta {
                stream: stream.stream,
                seq: job.first + i,
                start: (job.first + i) * jobs.framing.hop as u64,
                time_s: None,
                frames: 1,
                completed,
            })
            .collect();
        let batch = Batch {
            id: job.id,
            spec,
            frames,
            data,
            samples: held,
            step,
        };
        let sent = dispatcher.send(batch, lane, &control.counters.reader_wait_ns);
        clock.lap_span(Phase::ReaderWait, Some(job.id), Some(stream.stream));
        if !sent {
            break;
        }
    }
    Ok(())
}

/// Samples of the input a job accounts for in `--stats` and the progress display: those in its
/// frames, each once (`RangeStream::covered`), counted on the input's first stream only, as the
/// sequential reader counts them.
fn samples_counted(stream: &RangeStream, framing: &Framing, job: Job) -> u64 {
    if stream.part != 0 {
        return 0;
    }
    stream.covered(framing, job.first, job.first + job.count as u64)
}

/// A thread's reading state: the open file and scratch buffers, reused from job to job.
#[derive(Default)]
struct JobReader {
    file: Option<(Arc<SeekableLayout>, File)>,
    bytes: Vec<u8>,
    values: Vec<f64>,
    parts: Vec<Vec<f64>>,
}

impl JobReader {
    /// `fill`, as f32 in the first half of `out`'s bytes when `carry_f32` and every sample is
    /// an f32 value (`dispatch::carriage`), else in the run's type; says which.
    fn fill_batch<T: Sample>(
        &mut self,
        (stream, framing, job): (&RangeStream, &Framing, Job),
        out: &mut [T],
        carry_f32: bool,
        clock: &mut ThreadClock<'_>,
    ) -> Result<Carry> {
        if carry_f32 {
            let len = out.len();
            let f32s = &mut f32s_mut(out)[..len];
            if self.fill(stream, framing, job, f32s, clock)? {
                return Ok(Carry::F32);
            }
        }
        self.fill(stream, framing, job, out, clock)?;
        Ok(Carry::Run)
    }

    /// Writes the job's frames into `out`: back to back (`count` frames of `n` samples), or, when
    /// they overlap, the samples they cover, once (`Framing::batch_layout`). Whether every
    /// sample was exactly a `T` (decoded values converted to `T` may not be).
    fn fill<T: Sample>(
        &mut self,
        stream: &RangeStream,
        framing: &Framing,
        job: Job,
        out: &mut [T],
        clock: &mut ThreadClock<'_>,
    ) -> Result<bool> {
        let span = (Some(job.id), Some(stream.stream));
        let (n, hop) = (framing.n as u64, framing.hop as u64);
        if hop <= n {
            // adjacent or overlapping frames: the samples they cover, each once and in order
            // (`Framing::batch_layout`), mono raw f32 read straight into the batch
            let base = job.first * hop;
            let raw_mono_f32 = stream.layout.coding == SampleCoding::Raw(InputFormat::F32)
                && stream.layout.channels == 1;
            if raw_mono_f32 {
                if let Some(out) = T::as_f32_mut(out) {
                    return self
                        .read_f32_in_place(stream, base, out, clock, span)
                        .map(|()| true);
                }
                if let Some(out) = T::as_f64_mut(out) {
                    return self
                        .read_f32_widened(stream, base, out, clock, span)
                        .map(|()| true);
                }
            }
            let end = (job.first + job.count as u64 - 1) * hop + n;
            let samples = self.read(stream, base, end, clock, span)?;
            return Ok(copy_padded(samples, out));
        }
        // frames with gaps between them: read each frame alone
        let frame_values = framing.n * stream.layout.kind.width();
        let mut exact = true;
        for (i, frame) in out.chunks_exact_mut(frame_values).enumerate() {
            let start = (job.first + i as u64) * hop;
            let samples = self.read(stream, start, start + n, clock, span)?;
            exact &= copy_padded(samples, frame);
        }
        Ok(exact)
    }

    /// Mono raw f32 frames back to back (hop = frame) into f32 batches: the file's bytes are read
    /// straight into the batch buffer (no conversion pass), then checked for NaN/inf as
    /// `raw::decode` checks them; samples past the analysed length are zeros.
    fn read_f32_in_place(
        &mut self,
        stream: &RangeStream,
        first: u64,
        out: &mut [f32],
        clock: &mut ThreadClock<'_>,
        (batch, id): (Option<u64>, Option<usize>),
    ) -> Result<()> {
        let layout = &stream.layout;
        let present = (stream.samples.saturating_sub(first) as usize).min(out.len());
        let (values, padding) = out.split_at_mut(present);
        padding.fill(0.0);
        let byte_offset = first * 4; // raw files: the samples start at byte 0
        open_file_of(&mut self.file, layout)?
            .read_exact_at(f32_bytes(values), layout.data_offset + byte_offset)
            .map_err(|e| FftdError::io(&layout.name, e))?;
        clock.lap_span(Phase::Read, batch, id);
        let all_finite = values.iter().fold(true, |ok, v| ok & v.is_finite());
        clock.lap_span(Phase::Decode, batch, id);
        match (!all_finite)
            .then(|| values.iter().position(|v| !v.is_finite()))
            .flatten()
        {
            Some(i) => Err(FftdError::input(
                layout.name.clone(),
                format!(
                    "value at byte offset {} is {}, not a finite number",
                    byte_offset + 4 * i as u64,
                    values[i] as f64
                ),
            )),
            None => Ok(()),
        }
    }

    /// Mono raw f32 samples into f64 batches (`--precision f64`) in one pass: the file's bytes
    /// are read into the upper half of the batch buffer, then widened in place from the front
    /// (value i is written over bytes 8i..8i+8, its f32 read first from byte 4·len + 4i, and
    /// no later f32 lies below that), instead of decoding into a scratch buffer and copying.
    fn read_f32_widened(
        &mut self,
        stream: &RangeStream,
        first: u64,
        out: &mut [f64],
        clock: &mut ThreadClock<'_>,
        (batch, id): (Option<u64>, Option<usize>),
    ) -> Result<()> {
        let layout = &stream.layout;
        let len = out.len();
        let present = (stream.samples.saturating_sub(first) as usize).min(len);
        let byte_offset = first * 4; // raw files: the samples start at byte 0
        let upper = &mut f64_bytes(out)[4 * len..];
        open_file_of(&mut self.file, layout)?
            .read_exact_at(&mut upper[..4 * present], layout.data_offset + byte_offset)
            .map_err(|e| FftdError::io(&layout.name, e))?;
        clock.lap_span(Phase::Read, batch, id);
        let bad = widen_in_place(out, present);
        out[present..].fill(0.0);
        clock.lap_span(Phase::Decode, batch, id);
        match bad {
            Some((i, v)) => Err(FftdError::input(
                layout.name.clone(),
                format!(
                    "value at byte offset {} is {}, not a finite number",
                    byte_offset + 4 * i as u64,
                    v as f64
                ),
            )),
            None => Ok(()),
        }
    }

    /// The stream's values (`width` per sample) for samples `first..last`, cut at the analysed
    /// length (what lies beyond reads as zeros in `copy_padded`).
    fn read(
        &mut self,
        stream: &RangeStream,
        first: u64,
        last: u64,
        clock: &mut ThreadClock<'_>,
        (batch, id): (Option<u64>, Option<usize>),
    ) -> Result<&[f64]> {
        let layout = &stream.layout;
        let last = last.min(stream.samples);
        self.values.clear();
        if first >= last {
            return Ok(&self.values);
        }
        let bytes = usize::try_from((last - first) * layout.frame_bytes as u64)
            .map_err(|_| FftdError::input(layout.name.clone(), "range too large to read"))?;
        self.bytes.resize(bytes, 0);
        let offset = layout.data_offset + first * layout.frame_bytes as u64;
        open_file_of(&mut self.file, layout)?
            .read_exact_at(&mut self.bytes, offset)
            .map_err(|e| FftdError::io(&layout.name, e))?;
        clock.lap_span(Phase::Read, batch, id);
        layout.decode(&self.bytes, first, &mut self.values)?;
        if layout.channels > 1 {
            // splitting channels counts with decoding here (the copy into frames is `frame`)
            self.parts.resize_with(stream.splitter.streams(), Vec::new);
            stream.splitter.split(&mut self.values, &mut self.parts);
        }
        clock.lap_span(Phase::Decode, batch, id);
        if layout.channels == 1 {
            return Ok(&self.values);
        }
        Ok(&self.parts[stream.part])
    }
}

/// The open file of `layout`, opening it (and closing the previous one) when it changes.
fn open_file_of<'a>(
    open: &'a mut Option<(Arc<SeekableLayout>, File)>,
    layout: &Arc<SeekableLayout>,
) -> Result<&'a File> {
    let same = matches!(open, Some((current, _)) if Arc::ptr_eq(current, layout));
    if !same {
        *open = None; // close first: a thread holds one input open at a time
        *open = Some((layout.clone(), layout.open()?));
    }
    match open {
        Some((_, file)) => Ok(file),
        None => Err(FftdError::Runtime("range reader lost its file".into())),
    }
}

// raw f32 files are little-endian, read in place as host f32 values
const _: () = assert!(
    cfg!(target_endian = "little"),
    "fftd reads f32 in place: little-endian hosts only"
);

/// The bytes of `values`, to read a file's f32 samples straight into them.
fn f32_bytes(values: &mut [f32]) -> &mut [u8] {
    let len = std::mem::size_of_val(values);
    // SAFETY: the byte slice covers exactly the memory of `values` (u8 needs no alignment), its
    // lifetime is the borrow of `values`, and every bit pattern written is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), len) }
}

/// Widens the `present` f32 values that lie in the upper half of `out`'s bytes (from byte
/// 4·len) into `out[..present]`, front to back in blocks; the first non-finite value and its
/// index, if any.
fn widen_in_place(out: &mut [f64], present: usize) -> Option<(usize, f32)> {
    const BLOCK: usize = 1024;
    let len = out.len();
    let present = present.min(len);
    let base = out.as_mut_ptr();
    let mut bad = None;
    let mut block = [0f32; BLOCK];
    let mut i = 0;
    while i < present {
        let k = BLOCK.min(present - i);
        // SAFETY: the f32s i..i+k lie at bytes 4·len + 4i .. 4·len + 4(i+k) of `out` (4-aligned:
        // `out` is 8-aligned), within it as i + k <= present <= len; they are copied out before
        // any write of this block, and the block's writes (bytes 8i .. 8(i+k)) end at or below
        // 4·len + 4(i+k) since i + k <= len: no f32 still to be read is overwritten.
        unsafe {
            let src = base.cast::<u8>().add(4 * len + 4 * i).cast::<f32>();
            std::ptr::copy_nonoverlapping(src, block.as_mut_ptr(), k);
        }
        let values = &block[..k];
        if bad.is_none() && !values.iter().fold(true, |ok, v| ok & v.is_finite()) {
            bad = values
                .iter()
                .position(|v| !v.is_finite())
                .map(|j| (i + j, values[j]));
        }
        // SAFETY: values i..i+k of `out` (through the same pointer as the reads above); the
        // f32s they overlap were copied into `block` already.
        let dst = unsafe { std::slice::from_raw_parts_mut(base.add(i), k) };
        for (d, v) in dst.iter_mut().zip(values) {
            *d = f64::from(*v);
        }
        i += k;
    }
    bad
}

/// The bytes of `values` (f64 values widened in place, `JobReader::read_f32_widened`).
fn f64_bytes(values: &mut [f64]) -> &mut [u8] {
    let len = std::mem::size_of_val(values);
    // SAFETY: the byte slice covers exactly the memory of `values` (u8 needs no alignment), its
    // lifetime is the borrow of `values`, and every bit pattern written is a valid f64.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), len) }
}

/// Fills `frame` from `values` (converted to `T`), zeros past their end; whether every value
/// was exactly a `T`.
fn copy_padded<T: Sample>(values: &[f64], frame: &mut [T]) -> bool {
    let take = values.len().min(frame.len());
    let mut exact = true;
    for (d, v) in frame[..take].iter_mut().zip(values) {
        *d = T::of_f64(*v);
        exact &= d.into_f64() == *v;
    }
    frame[take..].fill(T::zero());
    exact
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f32s in the upper half of an f64 buffer's bytes, as `read_f32_widened` reads them.
    fn upper_half(values: &[f32], len: usize) -> Vec<f64> {
        let mut out = vec![f64::NAN; len];
        let bytes = f64_bytes(&mut out);
        for (i, v) in values.iter().enumerate() {
            bytes[4 * len + 4 * i..4 * len + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    #[test]
    fn f32_samples_widen_in_place_exactly() {
        for (len, present) in [
            (1, 1),
            (5, 5),
            (3000, 3000),
            (3000, 2049),
            (1024, 1),
            (4096, 0),
        ] {
            let values: Vec<f32> = (0..present)
                .map(|i| (i as f32 * 0.37).sin() * 1e3)
                .collect();
            let mut out = upper_half(&values, len);
            assert_eq!(widen_in_place(&mut out, present), None);
            let want: Vec<f64> = values.iter().map(|v| f64::from(*v)).collect();
            assert_eq!(&out[..present], &want[..], "len {len} present {present}");
        }
    }

    #[test]
    fn the_first_non_finite_sample_is_named() {
        let mut values = vec![1.0f32; 2500];
        values[1500] = f32::INFINITY;
        values[2000] = f32::NAN;
        let mut out = upper_half(&values, 2500);
        assert_eq!(widen_in_place(&mut out, 2500), Some((1500, f32::INFINITY)));
    }
}
