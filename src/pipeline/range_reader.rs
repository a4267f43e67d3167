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
//! (`dispatch::carriage`): raw f32 read straight into the batch, decoded values narrowed
//! (`job_reader`, one thread's reading of a job into its batch).

mod job_reader;

use super::batcher::{Batch, FrameMeta};
use super::dispatch::Dispatcher;
use super::pool::BufferPool;
use super::Control;
use crate::error::{FftdError, Result};
use job_reader::JobReader;

use crate::fft::{Carry, TransformSpec};
use crate::frame::expected_frames;
use crate::source::channels::ChannelSplitter;
use crate::source::seekable::SeekableLayout;

use crate::stats::Counters;
use crate::timeline::{Kind, Phase};
use crate::types::Sample;

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

    /// Values in the largest batch a device's lane gets, in and out (`row_values` per frame: the
    /// spectrum's, or the bands' where the engine sums them): the size a late lane's pinned
    /// buffers are made before it joins (`BufferPool::expect`).
    pub(super) fn device_batch_values(
        &self,
        spec_of: &dyn Fn(usize, crate::types::InputKind, f64) -> TransformSpec,
        row_values: &dyn Fn(&TransformSpec) -> usize,
    ) -> (usize, usize) {
        let per_stream = self.streams.iter().map(|stream| {
            let spec = spec_of(self.framing.n, stream.layout.kind, stream.layout.rate);
            let count = self.framing.job_frames(&stream.layout, true) as usize;
            let (_, values_in) = self.framing.batch_layout(&spec, count);
            (values_in, count * row_values(&spec))
        });
        per_stream.fold((0, 0), |(i, o), (a, b)| (i.max(a), o.max(b)))
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

    /// The stream and frame count of the job `next` would give now, without taking it.
    fn peek(&self, devices: bool) -> Option<(usize, usize)> {
        let cursor = self.cursor.lock().ok()?;
        let (mut index, mut next) = *cursor;
        while index < self.streams.len() && next >= self.streams[index].frames {
            index += 1;
            next = 0;
        }
        let stream = self.streams.get(index)?;
        let most = self.framing.job_frames(&stream.layout, devices);
        Some((index, (stream.frames - next).min(most) as usize))
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
        let Some(taken) = take_job(jobs, (dispatcher, control), pool, spec_of) else {
            break;
        };
        let TakenJob {
            job,
            spec,
            lane,
            step,
            mut data,
        } = taken;
        let stream = &jobs.streams[job.stream];
        let carry_f32 = dispatcher.carriage(lane).samples_f32;
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
            pool.give(data); // (a device's block goes back to its home)
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
        let batch = Batch {
            id: job.id,
            spec,
            frames: frames_of(stream, &jobs.framing, job),
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

/// The records of a job's frames, completed now.
fn frames_of(stream: &RangeStream, framing: &Framing, job: Job) -> Vec<FrameMeta> {
    let completed = Instant::now();
    (0..job.count as u64)
        .map(|i| FrameMeta {
            stream: stream.stream,
            seq: job.first + i,
            start: (job.first + i) * framing.hop as u64,
            time_s: None,
            frames: 1,
            completed,
        })
        .collect()
}

/// A job, its transform, the lane its batch is meant for, and its buffer (`take_job`).
struct TakenJob<T: Sample> {
    job: Job,
    spec: TransformSpec,
    lane: crate::pipeline::dispatch::LaneId,
    /// Values between frame starts in `data` (`Framing::batch_layout`).
    step: usize,
    data: crate::fft::HostBuf<T>,
}

/// The next job and its batch buffer, the buffer taken first: a reader that waits for one (a
/// device's sample blocks all in use, `pool::DEVICE_SAMPLE_BLOCKS`) holds no batch number
/// meanwhile, so no later batch is numbered ahead of its (the sink writes them in order). The
/// buffer is taken again when the job turns out another stream's or larger (a device joined
/// meanwhile). None when no job is left.
fn take_job<T: Sample>(
    jobs: &RangeJobs,
    (dispatcher, control): (&Dispatcher<T>, &Control),
    pool: &BufferPool<T>,
    spec_of: &dyn Fn(usize, crate::types::InputKind, f64) -> TransformSpec,
) -> Option<TakenJob<T>> {
    let layout = |stream: usize, count: usize| {
        let layout = &jobs.streams[stream].layout;
        let spec = spec_of(jobs.framing.n, layout.kind, layout.rate);
        let lane = dispatcher.choose(&spec, count);
        let (step, len) = jobs.framing.batch_layout(&spec, count);
        (spec, lane, step, len)
    };
    let (stream, count) = jobs.peek(dispatcher.has_device())?;
    let (mut spec, mut lane, mut step, len) = layout(stream, count);
    let mut data = pool.take(lane, len);
    let Some(job) = jobs.next(control, dispatcher.has_device()) else {
        pool.give(data);
        return None;
    };
    if job.stream != stream || job.count > count {
        pool.give(data);
        let len;
        (spec, lane, step, len) = layout(job.stream, job.count);
        data = pool.take(lane, len);
    }
    // (a job of the stream peeked has at most the frames peeked: the last one may have fewer)
    data.set_len_for_overwrite(jobs.framing.batch_layout(&spec, job.count).1);
    Some(TakenJob {
        job,
        spec,
        lane,
        step,
        data,
    })
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
