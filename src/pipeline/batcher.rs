//! Batcher stage: gathers frames (from any streams) that share a transform into batches of up to
//! `--batch` frames, packed back to back in one buffer of the lane the dispatcher means the
//! batch for (`dispatch`: chosen when the batch starts, so the buffer is that device's pinned
//! memory). A batch is sent when full, or when its oldest frame has waited `--max-latency`, so a
//! slow stream is never held waiting. Frames from live capture go on at once when no other frame
//! is queued behind them. Batches are numbered (`Control::take_batch_id`, shared with the range
//! readers) in the order they are sent; the sink writes them back in that order.

use super::dispatch::{Dispatcher, LaneId};
use super::pool::BufferPool;
use super::Control;
use crate::fft::{HostBuf, TransformSpec};
use crate::frame::Frame;
use crate::pipeline::spec::RunSpec;
use crate::timeline::{Kind, Phase, ThreadClock};
use crate::types::{InputKind, Sample};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Where one frame of a batch came from.
#[derive(Clone, Copy, Debug)]
pub struct FrameMeta {
    pub stream: usize,
    pub seq: u64,
    pub start: u64,
    /// The row's time when it is not `start` / rate (an averaged row: its interval's start).
    pub time_s: Option<f64>,
    /// Frames the row stands for: 1, or an averaged row's frame count (rtl-power's samples).
    pub frames: u32,
    pub completed: Instant,
}

/// Frames for one engine call: frame i starts at value i × `step` of `data` (`step` equal to
/// a frame's values: packed back to back; less: overlapping frames of one stream, their shared
/// samples held once, as the range readers write them).
pub struct Batch<T> {
    pub id: u64,
    pub spec: TransformSpec,
    pub frames: Vec<FrameMeta>,
    pub data: HostBuf<T>,
    pub step: usize,
}

/// Frames sharing (size, kind, rate) share a batch.
type BatchKey = (usize, InputKind, u64);

struct Pending<T> {
    batch: Batch<T>,
    oldest: Instant,
    capacity: usize,
    /// The lane whose memory holds the batch.
    lane: LaneId,
}

pub fn run_batcher<T: Sample>(
    rx: Receiver<Frame<T>>,
    dispatcher: &Dispatcher<T>,
    settings: &RunSpec,
    spec_of: &dyn Fn(usize, InputKind, f64) -> TransformSpec,
    pool: &BufferPool<T>,
    control: &Control,
) {
    let waited_ns = &control.counters.batcher_wait_ns;
    let max_wait = Duration::from_secs_f64(settings.engine.max_latency_ms / 1000.0);
    let mut pending: HashMap<BatchKey, Pending<T>> = HashMap::new();
    let mut clock = control.clock(Kind::Dispatch, Phase::DispatchInput);
    let send = |p: Pending<T>, clock: &mut ThreadClock<'_>| {
        let batch = Batch {
            id: control.take_batch_id(),
            ..p.batch
        };
        let (id, stream) = (batch.id, batch.frames.first().map(|f| f.stream));
        clock.lap_span(Phase::Pack, Some(id), stream);
        let sent = dispatcher.send(batch, p.lane, waited_ns);
        clock.lap_span(Phase::DispatchWorker, Some(id), stream);
        sent
    };
    loop {
        let deadline = pending.values().map(|p| p.oldest + max_wait).min();
        let received = match deadline {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => rx.recv_deadline(d),
        };
        clock.lap(Phase::DispatchInput);
        match received {
            Ok(mut frame) => {
                if settings.analysis.dc_remove {
                    let width = frame.kind.width();
                    crate::source::dc::remove_frame_means(&mut frame.data, frame.n * width, width);
                }
                let rate = frame.rate;
                let key = (frame.n, frame.kind, rate.to_bits());
                let entry = pending.entry(key).or_insert_with(|| {
                    let spec = spec_of(frame.n, frame.kind, rate);
                    let capacity = settings.engine.batch_frames(frame.n);
                    let lane = dispatcher.choose(&spec, capacity);
                    Pending {
                        batch: Batch {
                            id: 0,
                            spec,
                            frames: Vec::with_capacity(capacity),
                            data: pool.take(lane, capacity * spec.values_per_frame()),
                            step: spec.values_per_frame(),
                        },
                        oldest: Instant::now(),
                        capacity,
                        lane,
                    }
                });
                if entry.batch.frames.is_empty() {
                    entry.oldest = Instant::now();
                }
                entry.batch.frames.push(FrameMeta {
                    stream: frame.stream,
                    seq: frame.seq,
                    start: frame.start,
                    time_s: None,
                    frames: 1,
                    completed: frame.completed,
                });
                entry.batch.data.extend_from_slice(&frame.data);
                clock.lap(Phase::Pack);
                // a full batch goes now; so does live input when nothing else is waiting
                let idle_live = frame.live && rx.is_empty();
                if entry.batch.frames.len() >= entry.capacity || idle_live {
                    if let Some(p) = pending.remove(&key) {
                        if !send(p, &mut clock) {
                            return;
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                let due: Vec<BatchKey> = pending
                    .iter()
                    .filter(|(_, p)| p.oldest + max_wait <= now)
                    .map(|(k, _)| *k)
                    .collect();
                for key in due {
                    if let Some(p) = pending.remove(&key) {
                        if !send(p, &mut clock) {
                            return;
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                let mut rest: Vec<Pending<T>> = pending.drain().map(|(_, p)| p).collect();
                rest.sort_by_key(|p| p.oldest);
                for p in rest {
                    if !send(p, &mut clock) {
                        return;
                    }
                }
                return;
            }
        }
    }
}
