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
//! - **Window.** The sink writes batches in number order, so every batch finished after an
//!   unfinished one waits in its re-order buffer. `send` holds a batch back while its number is
//!   a window or more ahead of the oldest unfinished batch (`State::window`: 4 × what the lanes'
//!   queues and workers and the producers hold at once), so a device that hangs without an
//!   error stops the run after at most a window of batches instead of letting the others run on
//!   while the sink buffers everything they finish.
//! - **Stalls.** `watch` warns, naming the device, when one of its workers has been on a batch
//!   for 10 s (`FFTD_STALL_SECONDS`), and says when it is done with it. Only the device's time
//!   counts: a computed batch waiting for a slow stage after the workers (a slow disk, a paused
//!   stdout) is no stall (`computed`), though it stays unfinished, and in the window, until it is
//!   passed on. Nothing is killed: the run waits. After a stop (SIGINT/SIGTERM: after 1 s more
//!   without that batch; any other stop: after the stall time) the stalled lanes are given up:
//!   the queues close, the workers' threads stuck on them are left behind, and once every
//!   earlier batch is finished the stage after the workers stops waiting (`abandoned`), so the
//!   output ends cleanly before the first batch the given-up lanes hold, or before a lower one a
//!   producer still held and dropped when the queues closed (the cut, reported once final).
//!   A worker's panic (`abandon`) ends dispatching and that wait at once.
//! - **End.** A batch is unfinished from `send` until a worker has finished it; the queues close
//!   when every producer has ended and no batch is unfinished, so a hand-off always has a queue
//!   to go to, and lanes that join late (`auto`'s GPUs) take batches until then.

use super::batcher::Batch;
use crate::fft::lanes::{Lane, LaneSet, LaneSpeed};
use crate::fft::TransformSpec;
use crate::stats::Counters;
use crate::trace::Tracer;
use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A lane's index in the dispatcher (also its home in the buffer pools).
pub type LaneId = usize;

/// How long a producer waits for room before it looks again (a wake-up normally comes first).
const ROOM_POLL: Duration = Duration::from_millis(100);

/// The window is this many times the batches a healthy run has in flight at once (`window`).
const WINDOW_FACTOR: u64 = 4;

/// How long a worker may be on one batch before its lane is reported stalled (tuning knob for
/// tests: `FFTD_STALL_SECONDS`).
const STALL_AFTER: Duration = Duration::from_secs(10);

/// After SIGINT/SIGTERM, how long a lane that finishes nothing is waited for before the run
/// gives it up (at most the stall time).
const INTERRUPT_GRACE: Duration = Duration::from_secs(1);

/// How often the watch (`Dispatcher::watch`) looks at the lanes.
const WATCH_POLL: Duration = Duration::from_millis(200);

/// Where a batch a lane holds is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// In the lane's queue.
    Queued,
    /// On its device since then (a worker took it).
    Running(Instant),
    /// Computed, on its way to the stage after the workers (which may be slow to take it: a
    /// slow disk, a paused stdout): no longer the device's time, but not finished either.
    Computed,
}

struct LaneSlot<T> {
    lane: Arc<Lane>,
    tx: Option<Sender<Batch<T>>>,
    speed: LaneSpeed,
    /// Batches it holds at most: its queue's and its workers'.
    holds: u64,
    /// The batches sent to this lane and not finished yet, by number, and where each is.
    batches: BTreeMap<u64, Held>,
    /// The batch a stall warning named, and when a worker took it.
    warned: Option<(u64, Instant)>,
}

impl<T> LaneSlot<T> {
    fn unfinished(&self) -> u64 {
        self.batches.len() as u64
    }

    /// The lane no longer holds batch `id` (finished, or handed to another lane); says so when
    /// a stall warning named it.
    fn release(&mut self, id: u64) {
        self.batches.remove(&id);
        self.done_with(id);
    }

    /// Its device is done with batch `id` (computed, finished or handed on): says so when a
    /// stall warning named it.
    fn done_with(&mut self, id: u64) {
        if let Some((batch, taken)) = self.warned.filter(|(batch, _)| *batch == id) {
            let secs = taken.elapsed().as_secs_f64();
            let title = self.lane.title();
            tracing::info!("{title} is done with batch {batch} after {secs:.1} s");
            self.warned = None;
        }
    }

    /// The lowest-numbered batch it holds.
    fn oldest(&self) -> Option<u64> {
        self.batches.keys().next().copied()
    }

    /// The batch its workers have been on the longest (on the device: not a computed batch
    /// waiting for the stage after the workers), and when they took it.
    fn longest_running(&self) -> Option<(u64, Instant)> {
        let running = self.batches.iter().filter_map(|(id, held)| match held {
            Held::Running(taken) => Some((*id, *taken)),
            Held::Queued | Held::Computed => None,
        });
        running.min_by_key(|(_, taken)| *taken)
    }
}

/// What the run gave up (`Dispatcher::watch`): stalled lanes after a stop.
struct GivenUp {
    /// Each given-up lane, its title and the batch it was stuck on.
    lanes: Vec<(LaneId, String, u64)>,
    /// The lowest batch those lanes hold, or a lower one a producer dropped at the stop (its
    /// queues closed): the output ends before it.
    cut: u64,
}

struct State<T> {
    lanes: Vec<LaneSlot<T>>,
    /// Producers still running (`Producer` guards alive).
    producers: usize,
    /// Producers taken in all (`window` counts the batch each may be filling).
    producers_started: usize,
    /// Batches sent and not finished, over all lanes.
    unfinished: u64,
    /// The lowest batch number not finished yet (sent or not): every lower one is finished.
    oldest: u64,
    /// Numbers above `oldest` already finished.
    finished_above: BTreeSet<u64>,
    closed: bool,
    /// Dropped at close: its receivers see the end of dispatching.
    closing: Option<Sender<()>>,
    given_up: Option<GivenUp>,
    /// Dropped once every batch before the given-up ones has finished: the stage after the
    /// workers stops waiting for the given-up batches (`Dispatcher::abandoned`).
    abandoning: Option<Sender<()>>,
    /// A worker panicked (`Dispatcher::abandon`).
    panicked: bool,
}

pub struct Dispatcher<T> {
    state: Mutex<State<T>>,
    /// Signalled when a worker takes a batch from a queue (room) or finishes one.
    room: Condvar,
    lane_set: Arc<LaneSet>,
    /// Disconnects when the run gives up stalled lanes and the batches before theirs are done.
    abandoned: Receiver<()>,
    /// No progress for this long: a lane is stalled.
    stall_after: Duration,
}

/// The stop requests the watch honours: `stop` (any stop) and `interrupted` (SIGINT/SIGTERM).
pub struct StopFlags<'a> {
    pub stop: &'a AtomicBool,
    pub interrupted: &'a AtomicBool,
}

impl<T> State<T> {
    /// Seconds lane `i` is predicted to need for its unfinished batches and one more of
    /// `frames` frames of size `n`.
    fn score(&self, i: LaneId, n: usize, frames: usize) -> f64 {
        let slot = &self.lanes[i];
        let measured = self.lanes.iter().all(|l| l.speed.comparable(&slot.speed));
        let speed = match measured {
            true => &slot.speed,
            false => &LaneSpeed::Even,
        };
        (slot.unfinished() + 1) as f64 * speed.seconds(n, frames)
    }

    /// Lanes that take new batches (not failed; every lane when all have failed: their workers
    /// then compute on their CPU engines), best score first, `except` left out.
    fn by_score(&self, n: usize, frames: usize, except: Option<LaneId>) -> Vec<LaneId> {
        let open = |i: &LaneId| Some(*i) != except && self.lanes[*i].tx.is_some();
        let mut ids: Vec<LaneId> = (0..self.lanes.len())
            .filter(open)
            .filter(|i| self.lanes[*i].lane.takes_batches())
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
        let id = batch.id;
        for &i in lanes {
            let Some(tx) = &self.lanes[i].tx else {
                continue;
            };
            match tx.try_send(batch) {
                Ok(()) => {
                    self.hold(i, id);
                    return Ok(i);
                }
                Err(TrySendError::Full(b) | TrySendError::Disconnected(b)) => batch = b,
            }
        }
        Err(batch)
    }

    /// Lane `i` holds batch `id` from now on (in its queue).
    fn hold(&mut self, i: LaneId, id: u64) {
        self.lanes[i].batches.insert(id, Held::Queued);
    }

    /// The batches that may be unfinished at once, counted from the oldest unfinished one; a
    /// batch further ahead waits (`Dispatcher::send`). A healthy run has at most the lanes'
    /// queues and workers plus one batch per producer (being filled) in flight; the factor is
    /// slack for lanes of different speeds (a slower device holds its batches while a faster
    /// one goes on), so the window binds only when a lane falls far behind. The batches the
    /// sink and the averaging stage hold to put in order are bounded by it: without it a
    /// stalled device lets the others run on and the sink buffer every later batch.
    fn window(&self) -> u64 {
        let in_flight: u64 =
            self.lanes.iter().map(|l| l.holds).sum::<u64>() + self.producers_started as u64;
        WINDOW_FACTOR * in_flight.max(1)
    }

    /// Whether batch `id` is within the window (the oldest unfinished batch always is).
    fn within_window(&self, id: u64) -> bool {
        id < self.oldest.saturating_add(self.window())
    }

    /// Batch `id` is done with (finished, or dropped at the end of dispatching).
    fn settle(&mut self, id: u64) {
        if id < self.oldest {
            return;
        }
        if id > self.oldest {
            self.finished_above.insert(id);
            return;
        }
        self.oldest += 1;
        while self.finished_above.remove(&self.oldest) {
            self.oldest += 1;
        }
        self.release_if_cut();
    }

    /// After a give-up: once every batch before the cut is finished, the stage after the
    /// workers stops waiting (`Dispatcher::abandoned`). The cut is final then: only a batch
    /// below it, not settled yet, could lower it (`Dispatcher::send`'s drop at the end).
    fn release_if_cut(&mut self) {
        let Some(given_up) = &self.given_up else {
            return;
        };
        if self.oldest >= given_up.cut && self.abandoning.is_some() {
            tracing::warn!("the output ends before batch {}", given_up.cut);
            self.abandoning = None;
        }
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

    /// Whether the watch has nothing left to do: dispatching ended, and a give-up (if any)
    /// has been passed on.
    fn watch_over(&self) -> bool {
        self.closed && (self.given_up.is_none() || self.abandoning.is_none())
    }

    /// Warns once per stalled batch: one a lane's worker has been on for `stall_after`
    /// (`LaneSlot::release` says when the lane is done with it).
    fn warn_stalls(&mut self, now: Instant, stall_after: Duration) {
        let window = self.window();
        // a CPU lane is working, however long a huge frame takes: no stall to warn of
        for slot in self.lanes.iter_mut().filter(|s| !s.lane.is_cpu) {
            let Some((batch, taken)) = slot.longest_running() else {
                continue;
            };
            let running = now.duration_since(taken);
            if slot.warned.is_none() && running >= stall_after {
                tracing::warn!(
                    "{} has not finished batch {batch} for {} s; batches more than {window} \
                     ahead of it wait for it; a stop (SIGINT) gives it up",
                    slot.lane.title(),
                    running.as_secs()
                );
                slot.warned = Some((batch, taken));
            }
        }
    }

    /// Gives up the lanes whose workers have been on a batch for `grace` since `since` (the
    /// stop): no batch goes to any lane any more, and the output ends before the oldest batch
    /// they hold.
    fn give_up_stalled(&mut self, now: Instant, since: Instant, grace: Duration) {
        let stalled: Vec<(LaneId, u64, Instant)> = (0..self.lanes.len())
            .filter(|i| self.given_up.as_ref().is_none_or(|g| !g.gave_up(*i)))
            .filter_map(|i| {
                let (batch, taken) = self.lanes[i].longest_running()?;
                let waited = now.saturating_duration_since(taken.max(since));
                (waited >= grace).then_some((i, batch, taken))
            })
            .collect();
        for (i, batch, taken) in stalled {
            let slot = &self.lanes[i];
            let (title, oldest) = (slot.lane.title(), slot.oldest().unwrap_or(batch));
            tracing::warn!(
                "{title} still has not finished batch {batch} ({} s) after the stop: given up",
                now.duration_since(taken).as_secs()
            );
            let given_up = self.given_up.get_or_insert(GivenUp {
                lanes: Vec::new(),
                cut: oldest,
            });
            given_up.cut = given_up.cut.min(oldest);
            given_up.lanes.push((i, title, batch));
        }
        if self.given_up.is_some() {
            self.close();
            self.release_if_cut();
        }
    }
}

impl GivenUp {
    fn gave_up(&self, lane: LaneId) -> bool {
        self.lanes.iter().any(|(i, _, _)| *i == lane)
    }
}

impl<T> Dispatcher<T> {
    /// A dispatcher with no lanes yet, reporting to `lane_set`; the receiver sees the end of
    /// dispatching (disconnects when the queues close).
    pub fn new(lane_set: Arc<LaneSet>) -> (Self, Receiver<()>) {
        let (closing, closed) = crossbeam_channel::bounded(0);
        let (abandoning, abandoned) = crossbeam_channel::bounded(0);
        let state = State {
            lanes: Vec::new(),
            producers: 0,
            producers_started: 0,
            unfinished: 0,
            oldest: 0,
            finished_above: BTreeSet::new(),
            closed: false,
            closing: Some(closing),
            given_up: None,
            abandoning: Some(abandoning),
            panicked: false,
        };
        let dispatcher = Dispatcher {
            state: Mutex::new(state),
            room: Condvar::new(),
            lane_set,
            abandoned,
            stall_after: stall_after(),
        };
        (dispatcher, closed)
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // a panic elsewhere while holding the lock leaves counts that are still consistent
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits on `room` for at most `timeout`.
    fn wait<'a>(
        &self,
        state: MutexGuard<'a, State<T>>,
        timeout: Duration,
    ) -> MutexGuard<'a, State<T>> {
        match self.room.wait_timeout(state, timeout) {
            Ok((s, _)) => s,
            Err(e) => e.into_inner().0,
        }
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
        let queue = queue.max(1);
        let (tx, rx) = crossbeam_channel::bounded(queue);
        self.lane_set.join(&lane);
        let holds = (queue + lane.workers.max(1)) as u64;
        state.lanes.push(LaneSlot {
            lane,
            tx: Some(tx),
            speed,
            holds,
            batches: BTreeMap::new(),
            warned: None,
        });
        self.room.notify_all();
        Some((state.lanes.len() - 1, rx))
    }

    /// Whether dispatching has ended (every queue closed).
    pub fn closed(&self) -> bool {
        self.lock().closed
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
        let mut state = self.lock();
        state.producers += 1;
        state.producers_started += 1;
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
    /// room and the best score, else waits for room anywhere; a batch more than the window
    /// ahead of the oldest unfinished one waits for that one first (`State::window`). The wait
    /// is added to `waited`. False when dispatching has ended (nothing takes batches any more).
    pub fn send(&self, batch: Batch<T>, meant: LaneId, waited: &AtomicU64) -> bool {
        let (id, n, frames) = (batch.id, batch.spec.n, batch.frames.len());
        let mut batch = batch;
        let mut waiting_since: Option<Instant> = None;
        let mut state = self.lock();
        loop {
            let mut order = state.by_score(n, frames, None);
            if order.is_empty() {
                // never to be finished: nothing waits for it; after a give-up the output ends
                // before it at the latest
                if let Some(given_up) = &mut state.given_up {
                    given_up.cut = given_up.cut.min(id);
                }
                state.settle(id);
                return false;
            }
            if let Some(k) = order.iter().position(|&i| i == meant) {
                order[..=k].rotate_right(1); // the meant lane first
            }
            if state.within_window(id) {
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
            }
            waiting_since.get_or_insert_with(Instant::now);
            state = self.wait(state, ROOM_POLL);
        }
    }

    /// A producer gave up batch `id` before sending it (a read error): later batches need not
    /// wait for it.
    pub fn skip(&self, id: u64) {
        let mut state = self.lock();
        state.settle(id);
        self.room.notify_all();
    }

    /// A worker of lane `lane` took batch `id` from its queue: there is room.
    pub fn received(&self, lane: LaneId, id: u64) {
        let mut state = self.lock();
        if let Some(taken) = state
            .lanes
            .get_mut(lane)
            .and_then(|l| l.batches.get_mut(&id))
        {
            *taken = Held::Running(Instant::now());
        }
        self.room.notify_all();
    }

    /// A worker of lane `lane` has computed batch `id` and passes it on: its device is done
    /// with it (the stall watch and the give-up count only the time on the device, not the wait
    /// for a slow stage after the workers), but it stays unfinished, and in the window, until
    /// `finished`.
    pub fn computed(&self, lane: LaneId, id: u64) {
        let mut state = self.lock();
        if let Some(slot) = state.lanes.get_mut(lane) {
            if let Some(held) = slot.batches.get_mut(&id) {
                *held = Held::Computed;
            }
            slot.done_with(id);
        }
    }

    /// A worker of lane `lane` finished batch `id` (written on, or discarded after an error).
    pub fn finished(&self, lane: LaneId, id: u64) {
        let mut state = self.lock();
        if let Some(slot) = state.lanes.get_mut(lane) {
            slot.release(id);
        }
        state.unfinished = state.unfinished.saturating_sub(1);
        state.settle(id);
        state.close_if_done();
        self.room.notify_all();
    }

    /// Hands a batch of failed lane `from` to the live lane with the best score (waiting for
    /// room in its queue when all are full). Gives the batch back when no other lane is live
    /// (or dispatching ends while it waits): the caller then computes it itself.
    pub fn hand_off(&self, batch: Batch<T>, from: LaneId) -> Result<(), Batch<T>> {
        let (id, n, frames) = (batch.id, batch.spec.n, batch.frames.len());
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
                state.hold(to, id);
                drop(state);
                // the lane's workers drain its queue whatever this one does: no cycle
                if let Err(batch) = self.send_waiting(&tx, batch) {
                    self.lock().lanes[to].batches.remove(&id);
                    return Err(batch);
                }
                state = self.lock();
                to
            }
        };
        let to = state.lanes[target].lane.label.clone();
        let source = &mut state.lanes[from];
        source.release(id);
        let counters = &source.lane.counters;
        counters.handed_off.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(from = %source.lane.label, to = %to, "batch handed off");
        Ok(())
    }

    /// Sends `batch` on `tx`, waiting for room, until dispatching ends (a stalled lane's queue
    /// never has room again: the run gives it up and closes).
    fn send_waiting(&self, tx: &Sender<Batch<T>>, mut batch: Batch<T>) -> Result<(), Batch<T>> {
        loop {
            match tx.send_timeout(batch, ROOM_POLL) {
                Ok(()) => return Ok(()),
                Err(SendTimeoutError::Disconnected(b)) => return Err(b),
                Err(SendTimeoutError::Timeout(b)) if self.lock().closed => return Err(b),
                Err(SendTimeoutError::Timeout(b)) => batch = b,
            }
        }
    }

    /// Ends dispatching at once (a worker panicked): the queues close, producers stop, and the
    /// stage after the workers stops waiting for batches (a worker stuck on a hung device
    /// never ends, nor closes its channel; nothing watches for it once dispatching has ended).
    pub fn abandon(&self) {
        let mut state = self.lock();
        state.close();
        state.abandoning = None;
        state.panicked = true;
        self.room.notify_all();
    }

    /// Whether a worker panicked (`abandon`): its batch never finishes, and a worker stuck on a
    /// hung device may be left behind at the end.
    pub fn was_abandoned(&self) -> bool {
        self.lock().panicked
    }

    /// Watches the lanes until dispatching has ended: warns about a lane that has finished
    /// nothing for the stall time (`FFTD_STALL_SECONDS`, 10 s), and after a stop gives up a
    /// lane that still finishes nothing (after the stall time; after 1 s for SIGINT/SIGTERM),
    /// so a hung device cannot keep the run from ending. `ended` disconnects when dispatching
    /// ends (`new`'s receiver). With `--trace`, each check is a span on a `stall watcher` track.
    pub fn watch_traced(&self, ended: &Receiver<()>, stop: StopFlags<'_>, tracer: Option<&Tracer>) {
        let mut stop_seen: Option<Instant> = None;
        let mut track = crate::trace::Track::new(tracer, "stall watcher");
        loop {
            let ended_now = matches!(
                ended.recv_timeout(WATCH_POLL),
                Err(RecvTimeoutError::Disconnected)
            );
            let checking = Instant::now();
            let mut state = self.lock();
            if state.watch_over() {
                return;
            }
            let now = Instant::now();
            state.warn_stalls(now, self.stall_after);
            if stop.stop.load(Ordering::Relaxed) {
                let since = *stop_seen.get_or_insert(now);
                let grace = match stop.interrupted.load(Ordering::Relaxed) {
                    true => INTERRUPT_GRACE.min(self.stall_after),
                    false => self.stall_after,
                };
                state.give_up_stalled(now, since, grace);
                self.room.notify_all();
            }
            drop(state);
            if let Some(track) = &mut track {
                track.span_since("watch", checking, (None, None));
            }
            if ended_now {
                // only a give-up waiting for earlier batches is left to watch
                std::thread::sleep(WATCH_POLL);
            }
        }
    }

    /// `watch_traced` without a trace.
    #[cfg(test)]
    pub fn watch(&self, ended: &Receiver<()>, stop: StopFlags<'_>) {
        self.watch_traced(ended, stop, None)
    }

    /// Disconnects once the run has given up stalled lanes and every batch before theirs has
    /// finished: the stage after the workers then takes what is already there and ends.
    pub fn abandoned(&self) -> Receiver<()> {
        self.abandoned.clone()
    }

    /// The lanes given up (`watch`), each with its oldest unfinished batch, for the run's end.
    pub fn given_up(&self) -> Vec<(LaneId, String, u64)> {
        let state = self.lock();
        state
            .given_up
            .as_ref()
            .map(|g| g.lanes.clone())
            .unwrap_or_default()
    }

    /// After a give-up: the output ends before this batch (the lowest batch the given-up lanes
    /// held, or a lower one dropped at the stop).
    pub fn cut(&self) -> Option<u64> {
        self.lock().given_up.as_ref().map(|g| g.cut)
    }

    /// The window as it stands (`State::window`).
    pub fn window(&self) -> u64 {
        self.lock().window()
    }
}

/// The stall time: `FFTD_STALL_SECONDS` (a tuning knob for tests), else 10 s.
fn stall_after() -> Duration {
    std::env::var("FFTD_STALL_SECONDS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(STALL_AFTER)
}

/// Keeps the queues open while alive (see `Dispatcher::producer`).
pub struct Producer<'a, T>(&'a Dispatcher<T>);

impl<T> Drop for Producer<'_, T> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        if std::thread::panicking() {
            // its batch number would never finish, and later batches wait for it
            state.close();
        }
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
    use crossbeam_channel::TryRecvError;

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
            step: 1024,
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
    fn a_retired_lane_takes_no_new_batches() {
        let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
        let _producer = d.producer();
        let cpu = lane("cpu");
        // the queues' receivers kept: a dropped one would leave a lane that takes nothing
        let on_cpu = d.add_lane(cpu.clone(), LaneSpeed::Even, 100, |_| {});
        let on_gpu = d.add_lane(lane("gpu"), LaneSpeed::Even, 100, |_| {});
        assert!(on_cpu.is_some() && on_gpu.is_some());
        cpu.retire();
        assert_eq!(spread(&d, 10, 2), vec![0, 10]);
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
        d.finished(ib, 1);
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
        d.finished(ib, 0);
        assert!(matches!(
            ended.recv_timeout(Duration::from_secs(1)),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        ));
        assert!(rx_a.recv().is_err() && rx_b.recv().is_err());
        assert!(d
            .add_lane(lane("late"), LaneSpeed::Even, 1, |_| {})
            .is_none());
    }

    /// Two lanes of one worker and a queue of one; `a` takes batch 0 and never finishes it, `b`
    /// finishes everything it gets at once (on a thread of its own until its queue closes).
    fn one_stuck_lane(
        d: &Arc<Dispatcher<f32>>,
    ) -> (LaneId, Receiver<Batch<f32>>, std::thread::JoinHandle<()>) {
        let (ia, rx_a) = d
            .add_lane(lane("a"), LaneSpeed::Even, 1, |_| {})
            .expect("a");
        let (ib, rx_b) = d
            .add_lane(lane("b"), LaneSpeed::Even, 1, |_| {})
            .expect("b");
        let waited = AtomicU64::new(0);
        assert!(d.send(batch(0), ia, &waited));
        let stuck = rx_a.try_recv().expect("batch 0");
        d.received(ia, stuck.id);
        let worker = d.clone();
        let b = std::thread::spawn(move || {
            for got in rx_b.iter() {
                worker.received(ib, got.id);
                worker.finished(ib, got.id);
            }
        });
        (ia, rx_a, b)
    }

    #[test]
    fn a_batch_a_window_ahead_of_a_stuck_one_waits_for_it() {
        let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
        let d = Arc::new(d);
        let producer = d.producer();
        let (ia, _rx_a, b) = one_stuck_lane(&d);
        // 2 lanes holding 2 each, 1 producer: 4 x 5
        let window = d.window();
        assert_eq!(window, 20);
        let waited = AtomicU64::new(0);
        // a's queue is full (it holds batch 0 and has one more queued): the rest go to b
        for id in 1..window {
            assert!(d.send(batch(id), ia, &waited), "batch {id}");
        }
        let (sent_tx, sent_rx) = crossbeam_channel::bounded(1);
        let sender = d.clone();
        let late = std::thread::spawn(move || {
            let waited = AtomicU64::new(0);
            let _ = sent_tx.send(sender.send(batch(window), 0, &waited));
        });
        assert!(
            sent_rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "batch {window} is a window ahead of batch 0: it waits"
        );
        d.finished(ia, 0);
        assert_eq!(
            sent_rx.recv_timeout(Duration::from_secs(5)).ok(),
            Some(true)
        );
        let _ = late.join();
        d.abandon();
        drop(producer);
        let _ = b.join();
    }

    #[test]
    fn batch_numbers_settle_in_any_order_and_a_skipped_one_holds_nobody_back() {
        let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
        let _producer = d.producer();
        assert!(d.add_lane(lane("a"), LaneSpeed::Even, 1, |_| {}).is_some());
        let window = d.window();
        assert!(!d.lock().within_window(window));
        // batch 0 is never sent (its producer failed): it is skipped
        d.skip(0);
        assert!(d.lock().within_window(window));
        let mut state = d.lock();
        state.settle(2);
        assert_eq!(state.oldest, 1, "batch 1 is not finished");
        state.settle(1);
        assert_eq!(state.oldest, 3);
        assert!(state.finished_above.is_empty());
    }

    #[test]
    fn a_stalled_lane_is_given_up_after_an_interrupt_and_its_followers_released() {
        let (d, ended) = Dispatcher::<f32>::new(LaneSet::new(true));
        let mut d = d;
        d.stall_after = Duration::from_millis(50);
        let d = Arc::new(d);
        let producer = d.producer();
        let (ia, _rx_a, b) = one_stuck_lane(&d);
        let waited = AtomicU64::new(0);
        for id in 1..5 {
            assert!(d.send(batch(id), 1, &waited));
        }
        let abandoned = d.abandoned();
        let (stop, interrupted) = (AtomicBool::new(true), AtomicBool::new(true));
        let watcher = d.clone();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let flags = StopFlags {
                    stop: &stop,
                    interrupted: &interrupted,
                };
                watcher.watch(&ended, flags)
            });
            // batch 0 is the oldest: the stage after the workers stops waiting at once
            assert!(matches!(
                abandoned.recv_timeout(Duration::from_secs(5)),
                Err(RecvTimeoutError::Disconnected)
            ));
        });
        let given_up = d.given_up();
        assert_eq!(given_up.len(), 1);
        assert_eq!((given_up[0].0, given_up[0].2), (ia, 0));
        assert!(
            !d.send(batch(5), 1, &waited),
            "no lane takes batches any more"
        );
        drop(producer);
        let _ = b.join();
    }
    #[test]
    fn a_computed_batch_waiting_for_the_output_is_no_stall_but_stays_in_the_window() {
        let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
        let _producer = d.producer();
        let (ia, rx_a) = d
            .add_lane(lane("a"), LaneSpeed::Even, 1, |_| {})
            .expect("a");
        let waited = AtomicU64::new(0);
        assert!(d.send(batch(0), ia, &waited));
        let got = rx_a.try_recv().expect("batch 0");
        d.received(ia, got.id);
        // computed, then blocked on a slow stage after the workers
        d.computed(ia, got.id);
        let window = d.window();
        let mut state = d.lock();
        let (now, long_ago) = (Instant::now(), Instant::now() - Duration::from_secs(60));
        state.warn_stalls(now + Duration::from_secs(60), Duration::from_millis(1));
        assert!(state.lanes[ia].warned.is_none(), "no stall warning");
        state.give_up_stalled(now + Duration::from_secs(60), long_ago, Duration::ZERO);
        assert!(state.given_up.is_none() && !state.closed, "not given up");
        assert_eq!(state.oldest, 0, "still unfinished");
        assert!(!state.within_window(window), "and still holds the window");
        drop(state);
        d.finished(ia, got.id);
        assert!(d.lock().within_window(window));
    }

    #[test]
    fn a_batch_dropped_when_a_give_up_closes_the_queues_lowers_the_cut() {
        let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
        let producer = d.producer();
        let (ia, rx_a) = d
            .add_lane(lane("a"), LaneSpeed::Even, 1, |_| {})
            .expect("a");
        let waited = AtomicU64::new(0);
        // a producer still fills batch 0 while batch 1 hangs on the device
        assert!(d.send(batch(1), ia, &waited));
        let stuck = rx_a.try_recv().expect("batch 1");
        d.received(ia, stuck.id);
        let abandoned = d.abandoned();
        let now = Instant::now();
        d.lock().give_up_stalled(now, now, Duration::ZERO);
        assert_eq!(d.cut(), Some(1));
        assert!(
            matches!(abandoned.try_recv(), Err(TryRecvError::Empty)),
            "batch 0 is not settled yet"
        );
        // the queues are closed: batch 0 is dropped, and the output ends before it
        assert!(!d.send(batch(0), ia, &waited));
        assert_eq!(d.cut(), Some(0));
        assert!(matches!(
            abandoned.try_recv(),
            Err(TryRecvError::Disconnected)
        ));
        drop(producer);
    }

    #[test]
    fn a_panic_while_a_lane_hangs_releases_the_stage_after_the_workers() {
        let (d, ended) = Dispatcher::<f32>::new(LaneSet::new(true));
        let d = Arc::new(d);
        let producer = d.producer();
        let (_ia, _rx_a, b) = one_stuck_lane(&d);
        let abandoned = d.abandoned();
        assert!(matches!(abandoned.try_recv(), Err(TryRecvError::Empty)));
        // another worker panics (`AbandonOnPanic`): nothing gave lane a up
        d.abandon();
        assert!(d.was_abandoned() && d.given_up().is_empty());
        assert!(matches!(
            abandoned.try_recv(),
            Err(TryRecvError::Disconnected)
        ));
        assert!(matches!(ended.try_recv(), Err(TryRecvError::Disconnected)));
        // the watch ends too
        let (stop, interrupted) = (AtomicBool::new(false), AtomicBool::new(false));
        let flags = StopFlags {
            stop: &stop,
            interrupted: &interrupted,
        };
        d.watch(&ended, flags);
        drop(producer);
        let _ = b.join();
    }
}
