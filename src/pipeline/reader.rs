//! Reader stage for sequential inputs: a fixed pool of threads, each taking one source at a time
//! (`read_sequential`). Reads sample blocks, splits channels into streams, frames
//! each stream and sends frames to the batcher. File sources block when the FFT stage is busy
//! (nothing is ever lost); live sources drop whole frames instead, counted and warned about at
//! most once a second, so capture never stalls. Samples a live source lost itself (`take_gap`)
//! count as dropped frames too, and framing restarts after them.

use super::plan::{SequentialQueue, SourcePlan};
use super::Control;
use crate::error::{FftdError, Result};
use crate::frame::{Frame, Framer};
use crate::pipeline::spec::ReadSpec;
use crate::stats::Counters;
use crate::timeline::{Kind, Phase, ThreadClock};
use crate::types::Sample;
use crossbeam_channel::{Sender, TrySendError};
use std::time::{Duration, Instant};

/// Sample frames read per block.
const BLOCK: usize = 1 << 14;

/// Per-stream state in a reader.
struct StreamState<T> {
    framer: Framer<T>,
    /// Samples this stream may still take (`--duration`).
    sample_limit: Option<u64>,
    /// Stream finished (limit reached).
    done: bool,
}

/// One thread of the reader pool: reads the queue's inputs one after another, each opened when
/// its turn comes and closed when done, until the queue is empty, a stop or an error. An error
/// of an input itself (a bad line, an unreadable file) ends that input's streams where it is
/// found and is the run's error at the end; the other inputs go on.
pub(super) fn read_sequential<T: Sample>(
    queue: &SequentialQueue,
    spec: &ReadSpec,
    tx: Sender<Frame<T>>,
    control: &Control,
) {
    // the time after the last input: the thread waits for the stages after it to end
    let mut clock = control.clock(Kind::Reader, Phase::ReaderWait);
    while !control.stopping() {
        // opening the next input (and waiting for it: a FIFO's writer) counts as reading
        let next = queue.next();
        clock.lap(Phase::Read);
        let Some(next) = next else {
            return;
        };
        let clock = &mut clock;
        let read = next.and_then(|plan| read_source::<T>(plan, spec, tx.clone(), control, clock));
        match read {
            Ok(()) => {}
            // a bad input ends its own streams only: the others are analysed in full, and the
            // run fails at the end naming it
            Err(e @ (FftdError::Input { .. } | FftdError::Io { .. })) => control.fail_input(e),
            Err(e) => {
                control.fail(e);
                return;
            }
        }
    }
}

/// Reads one source to its end (or a limit, or a stop), sending its streams' frames on.
pub(super) fn read_source<T: Sample>(
    plan: SourcePlan,
    spec: &ReadSpec,
    tx: Sender<Frame<T>>,
    control: &Control,
    clock: &mut ThreadClock<'_>,
) -> Result<()> {
    let mut reading = SourceReader::new(plan, spec, tx, control, clock)?;
    while reading.wanted() {
        if !reading.read_block()? {
            break;
        }
    }
    reading.finish()
}

/// One source being read: its streams' framers, the block buffers and the sender.
struct SourceReader<'a, 'c, 'k, T> {
    plan: SourcePlan,
    spec: &'a ReadSpec,
    streams: Vec<StreamState<T>>,
    sender: FrameSender<'a, 'c, 'k, T>,
    /// Values per sample (2 for complex input).
    width: usize,
    /// Sample frames per read.
    block_frames: usize,
    block: Vec<f64>,
    per_stream: Vec<Vec<f64>>,
    pace: Option<Pace>,
}

impl<'a, 'c, 'k, T: Sample> SourceReader<'a, 'c, 'k, T> {
    fn new(
        plan: SourcePlan,
        spec: &'a ReadSpec,
        tx: Sender<Frame<T>>,
        control: &'a Control,
        clock: &'c mut ThreadClock<'k>,
    ) -> Result<Self> {
        let info = plan.source.info().clone();
        let width = info.kind.width();
        let mut streams = Vec::new();
        for k in 0..plan.splitter.streams() {
            let stream = plan.first_stream + k;
            let (kind, rate) = (info.kind, info.rate);
            streams.push(StreamState {
                framer: Framer::<T>::new(stream, spec.frame, spec.hop, spec.tail, kind, rate)?,
                sample_limit: spec.duration.map(|d| (d * info.rate).ceil() as u64),
                done: false,
            });
        }
        let sender = FrameSender {
            tx,
            live: info.live,
            prompt: spec.realtime,
            control,
            last_warning: None,
            dropped_since_warning: 0,
            closed: false,
            clock,
            analysed: Analysed {
                stream: plan.first_stream,
                to: 0,
            },
        };
        // sample frames per read: BLOCK, fewer for inputs of many channels (memory stays bounded
        // whatever channel count a header claims)
        let mut block_frames = (BLOCK * 8 / (info.channels * width).max(1)).clamp(1, BLOCK);
        let pace = spec.realtime.then(|| Pace::new(info.rate));
        if pace.is_some() {
            block_frames = block_frames.min(((info.rate / PACED_BLOCKS_PER_S) as usize).max(1));
        }
        Ok(SourceReader {
            block: Vec::with_capacity(block_frames * info.channels * width),
            per_stream: vec![Vec::new(); streams.len()],
            plan,
            spec,
            streams,
            sender,
            width,
            block_frames,
            pace,
        })
    }

    /// Whether to read on: no stop, the frames still taken, a stream not done.
    fn wanted(&self) -> bool {
        let control = self.sender.control;
        !control.stopping() && !self.sender.closed && self.streams.iter().any(|s| !s.done)
    }

    /// Reads one block and frames it; false at the end of the input.
    fn read_block(&mut self) -> Result<bool> {
        self.block.clear();
        let got = self.plan.source.read(&mut self.block, self.block_frames);
        let clock = &mut *self.sender.clock;
        let (from, to) = clock.lap(Phase::Read);
        clock.move_ns(
            Phase::Read,
            Phase::Decode,
            self.plan.source.take_decode_ns(),
        );
        clock.span("read", from, to, None, Some(self.plan.first_stream));
        let got = got?;
        if got == 0 {
            return Ok(false);
        }
        let gap = self.plan.source.take_gap();
        if gap > 0 {
            self.skip_gap(gap);
        }
        let outage = self.plan.source.take_outage(); // --retry: rows run on past the outage
        for s in self.streams.iter_mut().filter(|_| outage > 0) {
            s.framer.restart_at(s.framer.samples() + outage);
        }
        let control = self.sender.control;
        Counters::add(&control.counters.samples_in, got as u64);
        if let Some(pace) = self.pace.as_mut() {
            pace.wait(got as u64, control);
            self.sender.clock.lap(Phase::Read); // a paced input is a slow one
        }
        self.frame_block()?;
        Ok(true)
    }

    /// Samples the source lost: the frames they would have started count as dropped (only the
    /// part inside --duration), and framing restarts after them.
    fn skip_gap(&mut self, gap: u64) {
        let counted = (self.streams.iter())
            .map(|s| match s.sample_limit {
                Some(limit) => gap.min(limit.saturating_sub(s.framer.samples())),
                None => gap,
            })
            .max()
            .unwrap_or(gap);
        if counted > 0 {
            let frames = counted.div_ceil(self.spec.hop as u64) * self.streams.len() as u64;
            self.sender.lost_in_source(frames);
        }
        for s in self.streams.iter_mut() {
            let resume = s.framer.samples() + gap;
            s.framer.restart_at(resume);
        }
    }

    /// Splits the block into streams and frames each (up to its limits).
    fn frame_block(&mut self) -> Result<()> {
        let (width, max_frames) = (self.width, self.spec.max_frames);
        let framing = self.sender.clock.last();
        self.plan
            .splitter
            .split(&mut self.block, &mut self.per_stream);
        let sender = &mut self.sender;
        for (state, samples) in self.streams.iter_mut().zip(&mut self.per_stream) {
            if state.done {
                continue;
            }
            if let Some(limit) = state.sample_limit {
                let allowed = limit.saturating_sub(state.framer.samples()) as usize;
                if samples.len() / width >= allowed {
                    samples.truncate(allowed * width);
                    state.done = true;
                }
            }
            let framer = &mut state.framer;
            let keep_going = framer.push(samples, &mut |frame| sender.send(frame, max_frames))?;
            if !keep_going || framer.frames() >= max_frames {
                state.done = true;
            }
        }
        let (_, to) = sender.clock.lap(Phase::Frame);
        let first = Some(self.plan.first_stream);
        sender.clock.span("frame", framing, to, None, first);
        Ok(())
    }

    /// End of input or a limit: finishes every stream (the padded tail frame, per `--tail`).
    /// After a stop request (Ctrl-C, SIGTERM, a failure) the input has not ended: the samples
    /// after the last whole frame are not its tail, and no frame padded with zeros stands in for
    /// the samples that would have followed (`Framer::finish_stopped`).
    fn finish(mut self) -> Result<()> {
        let max_frames = self.spec.max_frames;
        let sender = &mut self.sender;
        let stopped = sender.control.stopping();
        for state in self.streams.iter_mut() {
            if state.framer.frames() < max_frames && !sender.closed {
                let send = &mut |frame| sender.send(frame, max_frames);
                match stopped {
                    true => state.framer.finish_stopped(send)?,
                    false => state.framer.finish(send)?,
                }
            }
        }
        sender.clock.lap(Phase::Frame);
        Ok(())
    }
}

/// Sends frames downstream, blocking for files and dropping for live input.
struct FrameSender<'a, 'c, 'k, T> {
    tx: Sender<Frame<T>>,
    /// The thread's clock: a blocked send is time spent waiting downstream.
    clock: &'c mut ThreadClock<'k>,
    live: bool,
    control: &'a Control,
    last_warning: Option<Instant>,
    dropped_since_warning: u64,
    closed: bool,
    /// Frames of a paced input (`--realtime`) go on at once, as live ones do, but are never
    /// dropped.
    prompt: bool,
    analysed: Analysed,
}

/// Counts the input's samples that lie in frames sent on (`Counters::samples_analysed`), each
/// once, on the input's first stream (its channels share the frames' places).
struct Analysed {
    /// The stream counted.
    stream: usize,
    /// The end of the samples counted so far.
    to: u64,
}

impl Analysed {
    /// The samples of `frame` not counted yet (0 for the other streams).
    fn fresh<T>(&mut self, frame: &Frame<T>) -> u64 {
        if frame.stream != self.stream {
            return 0;
        }
        let end = frame.start + frame.samples as u64;
        let fresh = end.saturating_sub(frame.start.max(self.to));
        self.to = self.to.max(end);
        fresh
    }
}

/// Blocks read per second of signal with `--realtime`.
const PACED_BLOCKS_PER_S: f64 = 100.0;

/// `--realtime`: holds a reader to its input's sample rate.
struct Pace {
    started: Instant,
    rate: f64,
    samples: u64,
}

impl Pace {
    fn new(rate: f64) -> Self {
        Pace {
            started: Instant::now(),
            rate,
            samples: 0,
        }
    }

    /// Waits until `got` more samples are due (returns early on a stop).
    fn wait(&mut self, got: u64, control: &Control) {
        self.samples += got;
        // (a rate of `limits::RATE_HZ` keeps this within a `Duration`; past an `Instant`'s
        // range the samples are never due, and only a stop ends the wait)
        let after = Duration::try_from_secs_f64(self.samples as f64 / self.rate);
        let due = after.ok().and_then(|d| self.started.checked_add(d));
        while !control.stopping() {
            let Some(due) = due else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            };
            let now = Instant::now();
            if now >= due {
                return;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(100)));
        }
    }
}

impl<T> FrameSender<'_, '_, '_, T> {
    /// Returns false when no more frames should be sent for this stream.
    fn send(&mut self, mut frame: Frame<T>, max_frames: u64) -> bool {
        frame.live = self.live || self.prompt;
        if frame.seq >= max_frames {
            return false;
        }
        let last = frame.seq + 1 >= max_frames;
        Counters::add(&self.control.counters.frames_in, 1);
        let fresh = self.analysed.fresh(&frame);
        let analysed = &self.control.counters.samples_analysed;
        if self.live {
            match self.tx.try_send(frame) {
                Ok(()) => Counters::add(analysed, fresh),
                Err(TrySendError::Full(_)) => self.dropped(),
                Err(TrySendError::Disconnected(_)) => self.closed = true,
            }
        } else {
            let waited = Instant::now();
            let sent = match self.tx.try_send(frame) {
                Err(TrySendError::Full(frame)) => {
                    self.clock.lap(Phase::Frame);
                    let sent = self.tx.send(frame).is_ok();
                    Counters::add_since(&self.control.counters.reader_wait_ns, waited);
                    let (from, to) = self.clock.lap(Phase::ReaderWait);
                    self.clock.span("wait", from, to, None, None);
                    sent
                }
                other => other.is_ok(),
            };
            if sent {
                Counters::add(analysed, fresh);
            } else {
                self.closed = true;
            }
        }
        !self.closed && !last
    }

    /// Samples lost inside a live source (its queue overflowed): the `frames` that would have
    /// started in them count as dropped.
    fn lost_in_source(&mut self, frames: u64) {
        Counters::add(&self.control.counters.dropped, frames.saturating_sub(1));
        self.dropped_since_warning += frames.saturating_sub(1);
        self.dropped();
    }

    fn dropped(&mut self) {
        Counters::add(&self.control.counters.dropped, 1);
        self.dropped_since_warning += 1;
        let now = Instant::now();
        if self
            .last_warning
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            tracing::warn!(
                dropped = self.dropped_since_warning,
                "analysis is behind live input: dropped {} frame(s)",
                self.dropped_since_warning
            );
            self.last_warning = Some(now);
            self.dropped_since_warning = 0;
        }
    }
}
