//! Framing: cuts one stream's samples into frames of `n` samples every `hop` samples, numbers them
//! and stamps them with their start time. Frames hold raw (unwindowed) samples; the engine applies
//! the window.
//!
//! Frame count for L samples, frame N, hop H:
//! - L <= N: one frame (zero-padded to N).
//! - `--tail pad` (default): ceil((L-N)/H) + 1 frames; the last one zero-padded. Except where the
//!   hop is longer than the frame and the samples after the last whole frame lie in the gap before
//!   the next frame's start: no frame holds them (as no frame holds the gaps between frames), and
//!   no frame of padding alone is made; floor((L-N)/H) + 1 frames.
//! - `--tail drop`: floor((L-N)/H) + 1 frames; samples after the last whole frame are not analysed.
//!
//! `--frame whole` takes the whole stream as one frame, zero-padded to the next power of two.

use crate::error::{FftdError, Result};
use crate::types::{InputKind, Sample};
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

/// `--frame N|whole`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSize {
    Fixed(usize),
    Whole,
}

impl FromStr for FrameSize {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        // (spaces around the number are taken, as `--hop`'s and the other counts' are)
        let s = text.trim();
        if s == "whole" {
            return Ok(FrameSize::Whole);
        }
        match s.parse::<usize>() {
            Ok(n) if n >= 2 => Ok(FrameSize::Fixed(n)),
            Ok(n) => Err(format!(
                "invalid frame size {n}: a frame needs at least 2 samples"
            )),
            Err(_) => Err(format!(
                "invalid frame size '{s}': expected a number of samples >= 2, or 'whole'"
            )),
        }
    }
}

impl fmt::Display for FrameSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameSize::Fixed(n) => write!(f, "{n}"),
            FrameSize::Whole => f.write_str("whole"),
        }
    }
}

/// `--tail pad|drop`: what happens to samples after the last whole frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Tail {
    /// Analyse them in one last zero-padded frame (none where they lie in the gap between
    /// frames, a hop being longer than a frame).
    Pad,
    /// Leave them out.
    Drop,
}

/// One frame on its way to the FFT stage.
#[derive(Debug)]
pub struct Frame<T> {
    /// Stream id (one per input file, or per channel with `--channel all`).
    pub stream: usize,
    /// 0-based frame number within the stream.
    pub seq: u64,
    /// Index of the frame's first sample in the stream.
    pub start: u64,
    /// Samples per frame.
    pub n: usize,
    /// Samples of the input in the frame, from its start (the rest of `n` is zero padding).
    pub samples: usize,
    pub kind: InputKind,
    /// Sample rate of the stream, Hz.
    pub rate: f64,
    /// `n` values (real) or `2n` interleaved re,im values (complex), unwindowed, zero-padded.
    pub data: Vec<T>,
    /// When the frame's last sample arrived (for latency).
    pub completed: Instant,
    /// From live capture: the batcher sends it on as soon as nothing else is waiting.
    pub live: bool,
}

/// Largest frame fftd will try to allocate: half of the memory it may use (the machine's, or
/// its control group's cap: `limits::usable_memory_bytes`).
fn check_frame_memory<T>(n: usize, width: usize) -> Result<()> {
    let bytes = (n as u128) * (width as u128) * (std::mem::size_of::<T>() as u128);
    let limit = crate::limits::usable_memory_bytes().map(|m| m as u128 / 2);
    match limit {
        Some(limit) if bytes > limit => Err(FftdError::Usage(format!(
            "frame of {n} samples needs {} MiB per frame buffer, more than half of the memory fftd may use here ({} MiB)",
            bytes >> 20,
            limit >> 20
        ))),
        _ if bytes > usize::MAX as u128 / 4 => Err(FftdError::Usage(format!(
            "frame of {n} samples is too large to address"
        ))),
        _ => Ok(()),
    }
}

/// Cuts one stream into frames.
pub(crate) struct Framer<T> {
    stream: usize,
    size: FrameSize,
    hop: usize,
    tail: Tail,
    kind: InputKind,
    rate: f64,
    width: usize,
    /// Samples (values) from the start of the next frame onwards.
    buf: Vec<T>,
    /// Samples still to skip before `buf` starts (hop > n).
    skip: u64,
    /// Sample index of `buf[0]`.
    next_start: u64,
    seq: u64,
    total: u64,
    /// Where framing last (re)started (`restart_at`) and the frames emitted by then: the tail
    /// rule counts from there.
    origin: (u64, u64),
    /// Framing restarted after a gap: samples since then shorter than a frame are a tail like
    /// any other (`--tail drop` leaves them out), not an input shorter than a frame.
    restarted: bool,
}

impl<T: Sample> Framer<T> {
    pub(crate) fn new(
        stream: usize,
        size: FrameSize,
        hop: usize,
        tail: Tail,
        kind: InputKind,
        rate: f64,
    ) -> Result<Self> {
        let width = kind.width();
        let mut buf = Vec::new();
        if let FrameSize::Fixed(n) = size {
            check_frame_memory::<T>(n, width)?;
            buf.try_reserve_exact(n * width).map_err(|_| {
                FftdError::Usage(format!("frame of {n} samples does not fit in memory"))
            })?;
        }
        Ok(Framer {
            stream,
            size,
            hop: hop.max(1),
            tail,
            kind,
            rate,
            width,
            buf,
            skip: 0,
            next_start: 0,
            seq: 0,
            total: 0,
            origin: (0, 0),
            restarted: false,
        })
    }

    /// Frames emitted so far.
    pub(crate) fn frames(&self) -> u64 {
        self.seq
    }

    /// Samples pushed so far.
    pub(crate) fn samples(&self) -> u64 {
        self.total
    }

    /// A frame of `values`, zero-padded to `n` samples.
    fn make_frame(&mut self, n: usize, start: u64, values: &[T]) -> Frame<T> {
        let mut data = Vec::with_capacity(n * self.width);
        data.extend_from_slice(values);
        self.frame_of(n, start, data)
    }

    /// The next frame, holding `data` (zero-padded to `n` samples).
    fn frame_of(&mut self, n: usize, start: u64, mut data: Vec<T>) -> Frame<T> {
        let samples = data.len() / self.width;
        data.resize(n * self.width, T::zero());
        let frame = Frame {
            stream: self.stream,
            seq: self.seq,
            start,
            n,
            samples,
            kind: self.kind,
            rate: self.rate,
            data,
            completed: Instant::now(),
            live: false,
        };
        self.seq += 1;
        frame
    }

    /// Adds samples (`width` values each) and emits every frame they complete.
    /// `emit` returns false to stop early (the rest of `values` is then ignored).
    pub(crate) fn push(
        &mut self,
        values: &[f64],
        emit: &mut dyn FnMut(Frame<T>) -> bool,
    ) -> Result<bool> {
        let w = self.width;
        let mut values = values;
        self.total += (values.len() / w) as u64;
        let n = match self.size {
            FrameSize::Whole => {
                self.buf.try_reserve(values.len()).map_err(|_| {
                    FftdError::Runtime(format!(
                        "--frame whole: the input ({} samples so far) does not fit in memory",
                        self.total
                    ))
                })?;
                self.buf.extend(values.iter().map(|&v| T::of_f64(v)));
                return Ok(true);
            }
            FrameSize::Fixed(n) => n,
        };
        while !values.is_empty() {
            if self.skip > 0 {
                let skipped = (self.skip as usize).min(values.len() / w);
                values = &values[skipped * w..];
                self.skip -= skipped as u64;
                self.next_start += skipped as u64;
                continue;
            }
            let need = n * w - self.buf.len();
            let take = need.min(values.len());
            self.buf
                .extend(values[..take].iter().map(|&v| T::of_f64(v)));
            values = &values[take..];
            if self.buf.len() == n * w {
                let start = self.next_start;
                let frame = if self.hop >= n {
                    // no overlap with the next frame: hand the buffer itself on
                    let data = std::mem::replace(&mut self.buf, Vec::with_capacity(n * w));
                    self.skip = (self.hop - n) as u64;
                    self.next_start += n as u64;
                    self.frame_of(n, start, data)
                } else {
                    let buf = std::mem::take(&mut self.buf);
                    let frame = self.make_frame(n, start, &buf);
                    self.buf = buf;
                    self.advance();
                    frame
                };
                if !emit(frame) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Moves the next frame's start one hop on.
    fn advance(&mut self) {
        let held = self.buf.len() / self.width;
        let drop = self.hop.min(held);
        self.buf.drain(..drop * self.width);
        self.skip = (self.hop - drop) as u64;
        self.next_start += drop as u64;
    }

    /// Ends the stream: emits the padded tail frame (or the whole-input frame) when there is one.
    pub(crate) fn finish(&mut self, emit: &mut dyn FnMut(Frame<T>) -> bool) -> Result<()> {
        match self.size {
            FrameSize::Whole => {
                let len = self.buf.len() / self.width;
                if len < 2 {
                    return Err(FftdError::Runtime(format!(
                        "--frame whole needs at least 2 samples, the input has {len}"
                    )));
                }
                let n = len.next_power_of_two();
                check_frame_memory::<T>(n, self.width)?;
                let buf = std::mem::take(&mut self.buf);
                let frame = self.make_frame(n, 0, &buf);
                emit(frame);
            }
            FrameSize::Fixed(n) => {
                // samples since framing (re)started: a gap's frames restart the count
                let total = self.total - self.origin.0;
                let pending_tail = if total <= n as u64 {
                    // no whole frame since the start: an input shorter than a frame is one
                    // frame whatever the tail, the samples after a gap follow the tail rule
                    let tail = !self.restarted || self.tail == Tail::Pad;
                    self.seq == self.origin.1 && total > 0 && tail
                } else {
                    self.tail == Tail::Pad && (total - n as u64) % self.hop as u64 != 0
                };
                // a tail frame holds the samples from the next frame's start on: none where the
                // input ended in the gap before it (hop > frame) or no sample came since a gap
                // in the input (`restart_at`), and a frame of padding alone is none
                if pending_tail && !self.buf.is_empty() {
                    let buf = std::mem::take(&mut self.buf);
                    let frame = self.make_frame(n, self.next_start, &buf);
                    emit(frame);
                }
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Ends a stream whose input was stopped, not ended (Ctrl-C): the samples after the last
    /// whole frame are no tail, so no padded frame is made of them; `--frame whole` still makes
    /// its one frame of the samples read.
    pub(crate) fn finish_stopped(&mut self, emit: &mut dyn FnMut(Frame<T>) -> bool) -> Result<()> {
        match self.size {
            FrameSize::Whole => self.finish(emit),
            FrameSize::Fixed(_) => {
                self.buf.clear();
                Ok(())
            }
        }
    }

    /// Drops partial data after a gap in the input (live overrun) and restarts framing at `start`.
    pub(crate) fn restart_at(&mut self, start: u64) {
        self.buf.clear();
        self.skip = 0;
        self.next_start = start;
        self.total = start;
        self.origin = (start, self.seq);
        self.restarted = true;
    }
}

/// Expected frame count for `samples` samples (the rule above), for tests and `--stats`.
pub fn expected_frames(samples: u64, n: u64, hop: u64, tail: Tail) -> u64 {
    if samples == 0 {
        0
    } else if samples <= n {
        1
    } else {
        let whole = (samples - n) / hop + 1;
        // the padded frame starts one hop after the last whole one, if that is inside the input
        let padded = tail == Tail::Pad && (samples - n) % hop != 0 && whole * hop < samples;
        whole + u64::from(padded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (start, samples that are not padding) of each frame of 10 samples, a gap to sample 30,
    /// then `after` (frame 8, hop 4).
    fn frames_around_a_gap(after: &[f64]) -> Vec<(u64, usize)> {
        let mut framer =
            Framer::<f64>::new(0, FrameSize::Fixed(8), 4, Tail::Pad, InputKind::Real, 1.0)
                .expect("framer");
        let mut frames = Vec::new();
        let mut keep = |f: Frame<f64>| {
            frames.push((f.start, f.data.iter().filter(|&&v| v != 0.0).count()));
            true
        };
        let samples: Vec<f64> = (1..=10).map(f64::from).collect();
        framer.push(&samples, &mut keep).expect("push");
        framer.restart_at(30); // samples 10..30 lost
        framer.push(after, &mut keep).expect("push");
        framer.finish(&mut keep).expect("finish");
        frames
    }

    #[test]
    fn after_a_gap_fewer_samples_than_a_frame_follow_the_tail_rule() {
        for (tail, want) in [
            (Tail::Pad, vec![(0, 8), (30, 3)]),
            (Tail::Drop, vec![(0, 8)]),
        ] {
            let mut framer =
                Framer::<f64>::new(0, FrameSize::Fixed(8), 4, tail, InputKind::Real, 1.0)
                    .expect("framer");
            let mut frames = Vec::new();
            let mut keep = |f: Frame<f64>| {
                frames.push((f.start, f.samples));
                true
            };
            let samples: Vec<f64> = (1..=8).map(f64::from).collect();
            framer.push(&samples, &mut keep).expect("push");
            framer.restart_at(30);
            framer.push(&[1.0, 2.0, 3.0], &mut keep).expect("push");
            framer.finish(&mut keep).expect("finish");
            assert_eq!(frames, want, "{tail:?}");
        }
    }

    #[test]
    fn a_stream_that_ends_at_a_gap_gets_no_frame_of_padding_alone() {
        // no frame after the gap: its samples were lost
        assert_eq!(frames_around_a_gap(&[]), vec![(0, 8)]);
        // samples after the gap: the tail frame holds them
        assert_eq!(frames_around_a_gap(&[1.0, 2.0, 3.0]), vec![(0, 8), (30, 3)]);
    }

    fn cut(l: usize, n: usize, hop: usize, tail: Tail, chunk: usize) -> Vec<Frame<f64>> {
        let mut framer =
            Framer::<f64>::new(0, FrameSize::Fixed(n), hop, tail, InputKind::Real, 1.0)
                .expect("framer");
        let samples: Vec<f64> = (1..=l).map(|v| v as f64).collect();
        let mut frames = Vec::new();
        for block in samples.chunks(chunk.max(1)) {
            framer
                .push(block, &mut |f| {
                    frames.push(f);
                    true
                })
                .expect("push");
        }
        framer
            .finish(&mut |f| {
                frames.push(f);
                true
            })
            .expect("finish");
        frames
    }

    /// The frame count by walking the starts 0, H, 2H, ...: the frames that lie whole in the
    /// input, then (`--tail pad`) the next one if it starts inside the input; one frame for an
    /// input no longer than a frame.
    fn frames_by_starts(l: usize, n: usize, hop: usize, tail: Tail) -> u64 {
        if l <= n {
            return 1;
        }
        let whole = (0..).take_while(|k| k * hop + n <= l).count();
        let padded = tail == Tail::Pad && whole * hop < l && (l - n) % hop != 0;
        (whole + usize::from(padded)) as u64
    }

    #[test]
    fn frame_count_rule_holds_for_many_shapes() {
        for l in 1..40usize {
            for n in [2usize, 3, 4, 7, 8] {
                for hop in [1usize, 2, 3, 4, 8, 11] {
                    for tail in [Tail::Pad, Tail::Drop] {
                        for chunk in [1usize, 5, 64] {
                            let frames = cut(l, n, hop, tail, chunk);
                            let want = expected_frames(l as u64, n as u64, hop as u64, tail);
                            assert_eq!(frames.len() as u64, want, "L={l} N={n} H={hop} {tail:?}");
                            assert_eq!(want, frames_by_starts(l, n, hop, tail));
                            for (i, f) in frames.iter().enumerate() {
                                assert_eq!(f.seq, i as u64);
                                assert_eq!(f.start, i as u64 * hop as u64);
                                // no frame of padding alone (hop > frame: the input may end in
                                // the gap after its last whole frame)
                                assert!(f.start < l as u64 && f.samples > 0, "L={l} N={n} H={hop}");
                                // every frame holds exactly the samples it should, zero-padded
                                for (j, v) in f.data.iter().enumerate() {
                                    let idx = f.start as usize + j;
                                    let want = if idx < l { (idx + 1) as f64 } else { 0.0 };
                                    assert_eq!(*v, want, "L={l} N={n} H={hop} frame {i} value {j}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn whole_pads_to_power_of_two() {
        let mut framer =
            Framer::<f32>::new(0, FrameSize::Whole, 1, Tail::Pad, InputKind::Real, 1.0)
                .expect("framer");
        framer
            .push(&[1.0, 2.0, 3.0, 4.0, 5.0], &mut |_| true)
            .expect("push");
        let mut got = Vec::new();
        framer
            .finish(&mut |f| {
                got.push(f);
                true
            })
            .expect("finish");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].n, 8);
        assert_eq!(got[0].data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn whole_rejects_one_sample() {
        let mut framer =
            Framer::<f32>::new(0, FrameSize::Whole, 1, Tail::Pad, InputKind::Real, 1.0)
                .expect("framer");
        framer.push(&[1.0], &mut |_| true).expect("push");
        assert!(framer.finish(&mut |_| true).is_err());
    }

    #[test]
    fn frame_size_parsing() {
        assert_eq!("4096".parse::<FrameSize>(), Ok(FrameSize::Fixed(4096)));
        assert_eq!("whole".parse::<FrameSize>(), Ok(FrameSize::Whole));
        // as --hop " 4" is taken (session 48's audit: --frame " 16" was not)
        assert_eq!(" 16".parse::<FrameSize>(), Ok(FrameSize::Fixed(16)));
        assert_eq!("whole ".parse::<FrameSize>(), Ok(FrameSize::Whole));
        assert!("1".parse::<FrameSize>().is_err());
        assert!("0".parse::<FrameSize>().is_err());
        assert!("x".parse::<FrameSize>().is_err());
    }
}
