//! Batcher stage: gathers frames (from any streams) that share a transform into batches of up to
//! `--batch` frames, packed back to back in one buffer of the lane the dispatcher means the
//! batch for (`dispatch`: chosen when the batch starts, so the buffer is that device's pinned
//! memory). A batch is sent when full, or when its oldest frame has waited `--max-latency`, so a
//! slow stream is never held waiting. Frames from live capture go on at once when no other frame
//! is queued behind them. Batches are numbered (`Control::take_batch_id`, shared with the range
//! readers) in the order they are sent; the sink writes them back in that order. In an f64 run
//! a batch for a device holds f32 values as f32 (`dispatch::carriage`), until a frame brings a
//! value that is not one.

use super::dispatch::{Dispatcher, LaneId};
use super::pool::BufferPool;
use super::Control;
use crate::fft::carry::{f32s_mut, narrow_exact, widen_front};
use crate::fft::{Carry, HostBuf, TransformSpec};
use crate::frame::Frame;
use crate::pipeline::spec::BatchSpec;
use crate::timeline::{Kind, Phase, ThreadClock};
use crate::types::{InputKind, Sample};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::time::Instant;

/// Where one frame of a batch came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameMeta {
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
pub(crate) struct Batch<T> {
    pub id: u64,
    pub spec: TransformSpec,
    pub frames: Vec<FrameMeta>,
    /// `data.len()` values: of the run's type, or f32 in the first half of its bytes
    /// (`samples`: an f64 run's batch for a device, `dispatch::carriage`).
    pub data: HostBuf<T>,
    pub samples: Carry,
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

/// The batcher's thread: gathers `rx`'s frames into batches until the readers end (then sends
/// what is left, oldest first) or the dispatcher closes.
pub(super) fn run_batcher<T: Sample>(
    rx: Receiver<Frame<T>>,
    dispatcher: &Dispatcher<T>,
    spec: BatchSpec,
    spec_of: &dyn Fn(usize, InputKind, f64) -> TransformSpec,
    pool: &BufferPool<T>,
    control: &Control,
) {
    let mut batcher = Batcher {
        maker: BatchMaker {
            dispatcher,
            spec,
            spec_of,
            pool,
        },
        control,
        pending: HashMap::new(),
        clock: control.clock(Kind::Dispatch, Phase::DispatchInput),
    };
    loop {
        let deadline = batcher.deadline();
        let received = match deadline {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => rx.recv_deadline(d),
        };
        batcher.clock.lap(Phase::DispatchInput);
        let open = match received {
            Ok(frame) => batcher.take(frame, &rx),
            Err(RecvTimeoutError::Timeout) => batcher.send_due(),
            Err(RecvTimeoutError::Disconnected) => {
                batcher.send_rest();
                return;
            }
        };
        if !open {
            return;
        }
    }
}

/// The batches being filled, one per (size, kind, rate), and where they go.
struct Batcher<'a, 'c, T: Sample> {
    maker: BatchMaker<'a, T>,
    control: &'c Control,
    pending: HashMap<BatchKey, Pending<T>>,
    clock: ThreadClock<'c>,
}

impl<T: Sample> Batcher<'_, '_, T> {
    /// When the oldest waiting frame's batch is due.
    fn deadline(&self) -> Option<Instant> {
        let max_wait = self.maker.spec.max_wait;
        self.pending.values().map(|p| p.oldest + max_wait).min()
    }

    /// Adds a frame to its batch; a full batch goes now, and so does live input when nothing
    /// is queued behind it in `rx`. False once the dispatcher has closed.
    fn take(&mut self, mut frame: Frame<T>, rx: &Receiver<Frame<T>>) -> bool {
        if self.maker.spec.dc_remove {
            let width = frame.kind.width();
            crate::source::dc::remove_frame_means(&mut frame.data, frame.n * width, width);
        }
        let key = (frame.n, frame.kind, frame.rate.to_bits());
        let entry = match self.pending.entry(key) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(slot) => slot.insert(self.maker.start(&frame)),
        };
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
        entry.batch.append(&frame.data);
        let full = entry.batch.frames.len() >= entry.capacity;
        self.clock.lap(Phase::Pack);
        match full || (frame.live && rx.is_empty()) {
            true => self.send_key(key),
            false => true,
        }
    }

    /// Sends every batch whose oldest frame has waited `--max-latency`.
    fn send_due(&mut self) -> bool {
        let now = Instant::now();
        let max_wait = self.maker.spec.max_wait;
        let due: Vec<BatchKey> = (self.pending.iter())
            .filter(|(_, p)| p.oldest + max_wait <= now)
            .map(|(k, _)| *k)
            .collect();
        due.into_iter().all(|key| self.send_key(key))
    }

    /// After the last frame: every batch still filling, oldest first.
    fn send_rest(&mut self) {
        let mut rest: Vec<Pending<T>> = self.pending.drain().map(|(_, p)| p).collect();
        rest.sort_by_key(|p| p.oldest);
        for p in rest {
            if !self.send(p) {
                return;
            }
        }
    }

    fn send_key(&mut self, key: BatchKey) -> bool {
        match self.pending.remove(&key) {
            Some(p) => self.send(p),
            None => true,
        }
    }

    /// Numbers a batch and hands it to its lane; false once the dispatcher has closed.
    fn send(&mut self, p: Pending<T>) -> bool {
        let batch = Batch {
            id: self.control.take_batch_id(),
            ..p.batch
        };
        let (id, stream) = (batch.id, batch.frames.first().map(|f| f.stream));
        self.clock.lap_span(Phase::Pack, Some(id), stream);
        let waited_ns = &self.control.counters.batcher_wait_ns;
        let sent = self.maker.dispatcher.send(batch, p.lane, waited_ns);
        self.clock.lap_span(Phase::DispatchWorker, Some(id), stream);
        sent
    }
}

/// Starts batches: in the memory of the lane the dispatcher means each for, sized by the spec.
struct BatchMaker<'a, T: Sample> {
    dispatcher: &'a Dispatcher<T>,
    spec: BatchSpec,
    spec_of: &'a dyn Fn(usize, InputKind, f64) -> TransformSpec,
    pool: &'a BufferPool<T>,
}

impl<T: Sample> BatchMaker<'_, T> {
    /// A new batch for frames like `frame`, in the memory of the lane the dispatcher means it for.
    fn start(&self, frame: &Frame<T>) -> Pending<T> {
        let spec = (self.spec_of)(frame.n, frame.kind, frame.rate);
        let capacity = self.spec.frames(frame.n);
        let lane = self.dispatcher.choose(&spec, capacity);
        let samples = Carry::f32_if(self.dispatcher.carriage(lane).samples_f32);
        Pending {
            batch: Batch {
                id: 0,
                spec,
                frames: Vec::with_capacity(capacity),
                data: self.pool.take(lane, capacity * spec.values_per_frame()),
                samples,
                step: spec.values_per_frame(),
            },
            oldest: Instant::now(),
            capacity,
            lane,
        }
    }
}

impl<T: Sample> Batch<T> {
    /// Appends a frame's values: as f32 while the batch holds f32 and they are f32 values,
    /// else in the run's type (a batch that held f32 is widened back first).
    fn append(&mut self, values: &[T]) {
        if self.samples == Carry::F32 {
            let at = self.data.len();
            self.data.set_len_for_overwrite(at + values.len());
            let into = &mut f32s_mut(&mut self.data)[at..at + values.len()];
            if narrow_exact(values, into) {
                return;
            }
            self.data.set_len_for_overwrite(at);
            widen_front(&mut self.data, at);
            self.samples = Carry::Run;
        }
        self.data.extend_from_slice(values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fft::carry::f32s;
    use crate::fft::Scale;
    use crate::window::WindowKind;

    fn batch(samples: Carry) -> Batch<f64> {
        Batch {
            id: 0,
            spec: TransformSpec {
                n: 4,
                kind: InputKind::Real,
                window: WindowKind::Hann,
                scale: Scale::Magnitude,
                rate: 1.0,
            },
            frames: Vec::new(),
            data: HostBuf::heap(12),
            samples,
            step: 4,
        }
    }

    #[test]
    fn f32_frames_stay_f32_until_one_is_not() {
        let mut b = batch(Carry::F32);
        b.append(&[0.5, -1.25, 3.0, 1e-3f32 as f64]);
        b.append(&[2.0, 4.0, 8.0, 16.0]);
        assert_eq!(b.samples, Carry::F32);
        assert_eq!(b.data.len(), 8);
        let want = [0.5f32, -1.25, 3.0, 1e-3, 2.0, 4.0, 8.0, 16.0];
        assert_eq!(&f32s(&b.data)[..8], &want);
        // 0.1 is no f32: the batch turns back into f64, every value kept
        b.append(&[0.1, 0.2, 0.3, 0.4]);
        assert_eq!(b.samples, Carry::Run);
        let mut all: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
        all.extend([0.1, 0.2, 0.3, 0.4]);
        assert_eq!(&b.data[..], &all[..]);
    }

    #[test]
    fn a_batch_in_the_run_type_stays_so() {
        let mut b = batch(Carry::Run);
        b.append(&[0.5, 0.25, 1.0, 2.0]);
        assert_eq!(
            (b.samples, &b.data[..]),
            (Carry::Run, &[0.5, 0.25, 1.0, 2.0][..])
        );
    }
}
