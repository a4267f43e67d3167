//! Dispatch stage: spreads batches over the lanes of the FFT stage — one lane per device instance
//! (the CPU engines, or one OpenCL device), each with its own bounded queue, FFT workers and
//! buffer home in `pool` (pinned memory of its device). Producers (the batcher, the range
//! readers) ask `choose` which lane a new batch is for *before* they fill it, take its buffer
//! from that lane's home, and `send` it when full:
//!
//! - **Proportional.** A lane's score for a batch is its predicted time to get through its
//!   unfinished batches plus this one: (unfinished + 1) × the lane's predicted seconds for the
//!   batch (`lanes::LaneSpeed`, from each device's calibration; equal when not every lane has
//!   one). The lowest score wins, so in a saturated run each lane takes batches at the rate it
//!   finishes them, and when the queues have room the faster device gets the next batch.
//! - **Never held up by one device.** `send` tries the chosen lane first, then the others by
//!   score, and only waits (for room in any queue) when every queue is full, so a slow or
//!   stalled device's full queue does not stop the others. A batch sent to another lane than
//!   its buffer's is correct, only staged through the engine's own pinned buffers.
//! - **Failures.** A lane whose device fails is skipped for new batches; its workers hand the
//!   batches they get (`EngineError::HandOff`) to a live lane (`hand_off`), or, with none left,
//!   compute them on their CPU engines. Every batch keeps its number, and the sink writes batches
//!   in number order, so nothing is lost, duplicated or reordered.
//! - **End.** A batch is unfinished from `send` until a worker has finished it; the queues close
//!   when every producer has ended and no batch is unfinished, so a hand-off always has a queue
//!   to go to, and lanes that join late (`auto`'s GPUs) take batches until then.

use super::batcher::Batch;
use crate::fft::lanes::{Lane, LaneSet, LaneSpeed};
use crate::fft::TransformSpec;
use crate::stats::Counters;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A lane's index in the dispatcher (also its home in the buffer pools).
pub type LaneId = usize;

/// How long a producer waits for room before it looks again (a wake-up normally comes first).
const ROOM_POLL: Duration = Duration::from_millis(100);

struct LaneSlot<T> {
    lane: Arc<Lane>,
    tx: Option<Sender<Batch<T>>>,
    speed: LaneSpeed,
    /// Batches sent to this lane and not finished yet.
    unfinished: u64,
}

struct State<T> {
    lanes: Vec<LaneSlot<T>>,
    /// Producers still running (`Producer` guards alive).
    producers: usize,
    /// Batches sent and not finished, over all lanes.
    unfinished: u64,
    closed: bool,
    /// Dropped at close: its receivers see the end of dispatching.
    closing: Option<Sender<()>>,
}

pub struct Dispatcher<T> {
    state: Mutex<State<T>>,
    /// Signalled when a worker takes a batch from a queue (room) or finishes one.
    room: Condvar,
    lane_set: Arc<LaneSet>,
}

impl<T> State<T> {
    /// Seconds lane `i` is predicted to need for its unfinished batches and one more of
    /// `frames` frames of size `n`.
    fn score(&self, i: LaneId, n: usize, frames: usize) -> f64 {
        let slot = &self.lanes[i];
        let measured = self.lanes.iter().all(|l| l.speed.is_measured());
        let speed = match measured {
            true => &slot.speed,
            false => &LaneSpeed::Even,
        };
        (slot.unfinished + 1) as f64 * speed.seconds(n, frames)
    }

    /// Lanes that take new batches (not failed; every lane when all have failed: their workers
    /// then compute on their CPU engines), best score first, `except` left out.
    fn by_score(&self, n: usize, frames: usize, except: Option<LaneId>) -> Vec<LaneId> {
        let open = |i: &LaneId| Some(*i) != except && self.lanes[*i].tx.is_some();
        let mut ids: Vec<LaneId> = (0..self.lanes.len())
            .filter(open)
            .filter(|i| !self.lanes[*i].lane.failed())
            .collect();
        if ids.is_empty() && except.is_none() {
            ids = (0..self.lanes.len()).filter(open).collect();
        }
        let scores: Vec<f64> = ids.iter().map(|&i| self.score(i, n, frames)).collect();
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
        order.into_iter().map(|k| ids[k]).collect()
    }

    /// Puts `batch` in the first of `lanes` with room; gives it back when all are full.
    fn place(&mut self, mut batch: Batch<T>, lanes: &[LaneId]) -> Result<LaneId, Batch<T>> {
        for &i in lanes {
            let Some(tx) = &self.lanes[i].tx else {
                continue;
            };
            match tx.try_send(batch) {
                Ok(()) => {
                    self.lanes[i].unfinished += 1;
                    return Ok(i);
                }
                Err(TrySendError::Full(b) | TrySendError::Disconnected(b)) => batch = b,
            }
        }
        Err(batch)
    }

    fn close_if_done(&mut self) {
        if self.producers == 0 && self.unfinished == 0 && !self.closed {
            self.close();
        }
    }

    fn close(&mut self) {
        self.closed = true;
        for slot in &mut self.lanes {
            slot.tx = None;
        }
        self.closing = None;
    }
}

impl<T> Dispatcher<T> {
    /// A dispatcher with no lanes yet, reporting to `lane_set`; the receiver sees the end of
    /// dispatching (disconnects when the queues close).
    pub fn new(lane_set: Arc<LaneSet>) -> (Self, Receiver<()>) {
        let (closing, closed) = crossbeam_channel::bounded(0);
        let state = State {
            lanes: Vec::new(),
            producers: 0,
            unfinished: 0,
            closed: false,
            closing: Some(closing),
        };
        let dispatcher = Dispatcher {
            state: Mutex::new(state),
            room: Condvar::new(),
            lane_set,
        };
        (dispatcher, closed)
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // a panic elsewhere while holding the lock leaves counts that are still consistent
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a lane with a queue of `queue` batches; it takes batches from now on. `prepare` gets
    /// its id before any producer can choose it (to give it its buffer homes). None when
    /// dispatching has ended (a lane that arrives too late).
    pub fn add_lane(
        &self,
        lane: Arc<Lane>,
        speed: LaneSpeed,
        queue: usize,
        prepare: impl FnOnce(LaneId),
    ) -> Option<(LaneId, Receiver<Batch<T>>)> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        prepare(state.lanes.len());
        let (tx, rx) = crossbeam_channel::bounded(queue.max(1));
        self.lane_set.join(&lane);
        state.lanes.push(LaneSlot {
            lane,
            tx: Some(tx),
            speed,
            unfinished: 0,
        });
        self.room.notify_all();
        Some((state.lanes.len() - 1, rx))
    }

    /// Sets the speed of the CPU lanes (known once a device's calibration is loaded).
    pub fn set_cpu_speed(&self, speed: LaneSpeed) {
        let mut state = self.lock();
        for slot in state.lanes.iter_mut().filter(|s| s.lane.is_cpu) {
            slot.speed = speed.clone();
        }
    }

    /// A producer's guard: the queues stay open while one is alive. Take every producer's
    /// guard before any producer starts.
    pub fn producer(&self) -> Producer<'_, T> {
        self.lock().producers += 1;
        Producer(self)
    }

    /// The lane a new batch of `frames` frames of `spec` is meant for (take its buffer from
    /// that lane's home); lane 0 when there is none yet.
    pub fn choose(&self, spec: &TransformSpec, frames: usize) -> LaneId {
        let state = self.lock();
        let order = state.by_score(spec.n, frames, None);
        let has_room = |i: &&LaneId| {
            let slot = &state.lanes[**i];
            slot.tx.as_ref().is_some_and(|tx| !tx.is_full())
        };
        let pick = order.iter().find(has_room).or(order.first());
        pick.copied().unwrap_or(0)
    }

    /// Sends `batch` to lane `meant` if it takes batches and has room, else to the lane with
    /// room and the best score, else waits for room anywhere (the wait is added to `waited`).
    /// False when dispatching has ended (nothing takes batches any more).
    pub fn send(&self, batch: Batch<T>, meant: LaneId, waited: &AtomicU64) -> bool {
        let (n, frames) = (batch.spec.n, batch.frames.len());
        let mut batch = batch;
        let mut waiting_since: Option<Instant> = None;
        let mut state = self.lock();
        loop {
            let mut order = state.by_score(n, frames, None);
            if order.is_empty() {
                return false;
            }
            if let Some(k) = order.iter().position(|&i| i == meant) {
                order[..=k].rotate_right(1); // the meant lane first
            }
            match state.place(batch, &order) {
                Ok(_) => {
                    state.unfinished += 1;
                    if let Some(since) = waiting_since {
                        Counters::add_since(waited, since);
                    }
                    return true;
                }
                Err(b) => batch = b,
            }
            waiting_since.get_or_insert_with(Instant::now);
            state = match self.room.wait_timeout(state, ROOM_POLL) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// A worker took a batch from a queue: there is room.
    pub fn received(&self) {
        let _state = self.lock();
        self.room.notify_all();
    }

    /// A worker of lane `lane` finished a batch (written on, or discarded after an error).
    pub fn finished(&self, lane: LaneId) {
        let mut state = self.lock();
        if let Some(slot) = state.lanes.get_mut(lane) {
            slot.unfinished = slot.unfinished.saturating_sub(1);
        }
        state.unfinished = state.unfinished.saturating_sub(1);
        state.close_if_done();
        self.room.notify_all();
    }

    /// Hands a batch of failed lane `from` to the live lane with the best score (waiting for
    /// room in its queue when all are full). Gives the batch back when no other lane is live:
    /// the caller then computes it itself.
    pub fn hand_off(&self, batch: Batch<T>, from: LaneId) -> Result<(), Batch<T>> {
        let (n, frames) = (batch.spec.n, batch.frames.len());
        let mut state = self.lock();
        let order = state.by_score(n, frames, Some(from));
        let target = match state.place(batch, &order) {
            Ok(to) => to,
            Err(batch) => {
                let Some((&to, tx)) = order
                    .first()
                    .and_then(|to| Some((to, state.lanes[*to].tx.clone()?)))
                else {
                    return Err(batch);
                };
                state.lanes[to].unfinished += 1;
                drop(state);
                // the lane's workers drain its queue whatever this one does: no cycle
                if let Err(e) = tx.send(batch) {
                    self.lock().lanes[to].unfinished -= 1;
                    return Err(e.into_inner());
                }
                state = self.lock();
                to
            }
        };
        let to = state.lanes[target].lane.label.clone();
        let source = &mut state.lanes[from];
        source.unfinished = source.unfinished.saturating_sub(1);
        let counters = &source.lane.counters;
        counters.handed_off.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(from = %source.lane.label, to = %to, "batch handed off");
        Ok(())
    }

    /// Ends dispatching at once (a worker panicked): the queues close, producers stop.
    pub fn abandon(&self) {
        let mut state = self.lock();
        state.close();
        self.room.notify_all();
    }
}

/// Keeps the queues open while alive (see `Dispatcher::producer`).
pub struct Producer<'a, T>(&'a Dispatcher<T>);

impl<T> Drop for Producer<'_, T> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.producers = state.producers.saturating_sub(1);
        state.close_if_done();
        self.0.room.notify_all();
    }
}

/// Abandons dispatching if the thread holding it unwinds (a worker that panics would otherwise
/// leave its batch unfinished and every other stage waiting).
pub struct AbandonOnPanic<'a, T>(pub &'a Dispatcher<T>);

impl<T> Drop for AbandonOnPanic<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fft::calibrate::{CalPoint, Calibration, CalibrationKey};
    use crate::fft::lanes::SpeedSide;
    use crate::fft::{EngineError, HostBuf, InputKind, Scale};
    use crate::window::WindowKind;

    fn batch(id: u64) -> Batch<f32> {
        Batch {
            id,
            spec: TransformSpec {
                n: 1024,
                kind: InputKind::Real,
                window: WindowKind::Hann,
                scale: Scale::Magnitude,
                rate: 1.0,
            },
            frames: Vec::new(),
            data: HostBuf::heap(0),
        }
    }

    /// A lane whose device takes `seconds` per batch (from a one-point calibration).
    fn measured(seconds: f64) -> LaneSpeed {
        let key = CalibrationKey {
            device: "dev".into(),
            platform: "p".into(),
            driver: "d".into(),
            fftd_version: "v".into(),
            precision: "f32".into(),
        };
        let points = vec![CalPoint {
            n: 1024,
            frames: 1,
            cpu_s: 1.0,
            gpu_s: seconds,
        }];
        let cal = Arc::new(Calibration { key, points });
        LaneSpeed::Measured(cal, SpeedSide::OpenCl { routed: false })
    }

    fn lane(label: &str) -> Arc<Lane> {
        Lane::new(label.into(), "dev".into(), false, 1)
    }

    /// Sends `count` batches, each to the lane `choose` names; how many each lane got.
    fn spread(d: &Dispatcher<f32>, count: u64, lanes: usize) -> Vec<usize> {
        let waited = AtomicU64::new(0);
        let mut got = vec![0; lanes];
        for id in 0..count {
            let b = batch(id);
            let meant = d.choose(&b.spec, 1);
            assert!(d.send(b, meant, &waited));
            got[meant] += 1;
        }
        got
    }

    #[test]
    fn batches_go_in_proportion_to_measured_speed() {
        let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
        let _producer = d.producer();
        let fast = d.add_lane(lane("fast"), measured(1.0), 100, |_| {});
        let slow = d.add_lane(lane("slow"), measured(3.0), 100, |_| {});
        assert!(fast.is_some() && slow.is_some());
        assert_eq!(spread(&d, 40, 2), vec![30, 10]);
    }

    #[test]
    fn a_full_queue_is_skipped_and_a_failed_lane_hands_off() {
        let lane_set = LaneSet::new(true);
        let (d, ended) = Dispatcher::<f32>::new(lane_set.clone());
        let producer = d.producer();
        let (a, b) = (lane("a"), lane("b"));
        let (ia, rx_a) = d
            .add_lane(a.clone(), LaneSpeed::Even, 1, |_| {})
            .expect("a");
        let (ib, rx_b) = d
            .add_lane(b.clone(), LaneSpeed::Even, 1, |_| {})
            .expect("b");
        let waited = AtomicU64::new(0);
        assert!(d.send(batch(0), ia, &waited));
        // a's queue is full: the batch meant for a goes to b
        assert!(d.send(batch(1), ia, &waited));
        assert_eq!(rx_b.try_recv().map(|b| b.id).ok(), Some(1));
        d.finished(ib);
        // a fails: its batch goes to b, new batches skip a
        let lost = EngineError::Device {
            engine: "opencl",
            what: "lost".into(),
        };
        lane_set.fail(&a, &lost);
        let held = rx_a.try_recv().expect("a's batch");
        assert!(d.hand_off(held, ia).is_ok());
        assert_eq!(a.counters.handed_off.load(Ordering::Relaxed), 1);
        assert_eq!(d.choose(&batch(2).spec, 1), ib);
        assert_eq!(rx_b.try_recv().map(|b| b.id).ok(), Some(0));
        // b fails too: nobody takes a's batches any more
        lane_set.fail(&b, &lost);
        assert!(d.hand_off(batch(3), ia).is_err());
        // the queues close once the producer has ended and every batch is finished
        drop(producer);
        assert!(
            matches!(
                ended.try_recv(),
                Err(crossbeam_channel::TryRecvError::Empty)
            ),
            "batch 0 is not finished yet"
        );
        d.finished(ib);
        assert!(matches!(
            ended.recv_timeout(Duration::from_secs(1)),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        ));
        assert!(rx_a.recv().is_err() && rx_b.recv().is_err());
        assert!(d
            .add_lane(lane("late"), LaneSpeed::Even, 1, |_| {})
            .is_none());
    }
}
