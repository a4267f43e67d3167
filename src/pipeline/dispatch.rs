//! Dispatch stage: spreads batches over the lanes of the FFT stage — one lane per device instance
//! (the CPU engines, or one OpenCL device), each with its own bounded queue, FFT workers and
//! buffer home in `pool` (pinned memory of its device). Producers (the batcher, the range
//! readers) ask `choose` which lane a new batch is for *before* they fill it, take its buffer
//! from that lane's home, and `send` it when full:
//!
//! - **Proportional.** The lanes are ranked for each batch by `fft::route::rank`, the one
//!   place that decides which lane takes a batch: by the time each is predicted to need for
//!   its unfinished batches plus this one (`route::LaneSpeed`); under `gpu:all` and `auto` a
//!   GPU after the first only while the first's queue and workers are full (`route::rank`).
//! - **Never held up by one device.** `send` tries the chosen lane first, then the others by
//!   score, and only waits (for room in any queue) when every queue is full, so a slow or
//!   stalled device's full queue does not stop the others. A batch sent to another lane than
//!   its buffer's is correct, only staged through the engine's own pinned buffers; a batch in
//!   heap memory meant for a CPU lane stays with the CPU lanes (`heap_batches`).
//! - **In line.** When producers wait for room, a newer batch is placed only while the queues
//!   have room for it and for every older waiting one, so the oldest always gets a room
//!   (`State::may_place`): the sink writes in number order, so a batch passed over holds every
//!   later one there.
//! - **Failures.** A lane whose device fails is skipped for new batches; its workers hand the
//!   batches they get (`EngineError::HandOff`) to a working lane (`hand_off`), or, with none left,
//!   compute them on their CPU engines. Every batch keeps its number, and the sink writes batches
//!   in number order, so nothing is lost, duplicated or reordered.
//! - **Window.** The sink writes batches in number order, so every batch finished after an
//!   unfinished one waits in its re-order buffer. `send` holds a batch back while its number is
//!   a window or more ahead of the oldest unfinished batch (`State::window`: 4 × what the lanes'
//!   queues and workers and the producers hold at once), so a device that hangs without an
//!   error stops the run after at most a window of batches instead of letting the others run on
//!   while the sink buffers everything they finish. The window counts from the sink's next
//!   batch too, when that is older (`taken_in_order`): a finished batch still in an encoder's
//!   hands (a thread the machine has not run for a while) is passed by every later one the
//!   other encoders take, which the sink then holds for order as it would behind a hung device.
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
//! - **Carriage.** In an f64 run a batch for a device's lane holds its samples as f32 and asks
//!   for its rows as f32 where the run allows (`carriage`: the one decision).

use super::batcher::Batch;
use crate::fft::lanes::{Lane, LaneSet};
use crate::fft::route::{self, LaneLoad, LaneSpeed};
use crate::fft::TransformSpec;
use crate::stats::Counters;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(crate) mod carriage;
mod handoff;
mod heap_batches;
mod lane_slot;
mod sink_order;
mod stalls;

use lane_slot::{Held, LaneSlot};

/// A lane's index in the dispatcher (also its home in the buffer pools).
pub(super) type LaneId = usize;

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
    /// The next batch the sink takes in order (every lower one it has written or gone past),
    /// while it reports it (`Dispatcher::follow_order`); None without, or after a stop (a batch
    /// dropped on its way to the sink then would never be taken).
    ordered: Option<u64>,
    /// Numbers above `oldest` already finished.
    finished_above: BTreeSet<u64>,
    /// Batches whose producers wait for room (`Dispatcher::send`): room goes to the oldest.
    waiting: BTreeSet<u64>,
    /// The widest window a batch was placed under (`Dispatcher::widest_window`).
    widest_window: u64,
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

pub(crate) struct Dispatcher<T> {
    state: Mutex<State<T>>,
    /// Signalled when a worker takes a batch from a queue (room) or finishes one.
    room: Condvar,
    lane_set: Arc<LaneSet>,
    /// Disconnects when the run gives up stalled lanes and the batches before theirs are done.
    abandoned: Receiver<()>,
    /// No progress for this long: a lane is stalled.
    stall_after: Duration,
    /// What the run's batches may carry as f32 (`carriage`).
    facts: carriage::RunFacts,
}

/// The stop requests the watch honours: `stop` (any stop) and `interrupted` (SIGINT/SIGTERM).
pub(crate) struct StopFlags<'a> {
    pub stop: &'a AtomicBool,
    pub interrupted: &'a AtomicBool,
}

impl<T> State<T> {
    /// Lanes that take new batches (not failed; every lane when all have failed: their workers
    /// then compute on their CPU engines), in `route::rank`'s order, `except` left out.
    fn ranked(&self, n: usize, frames: usize, except: Option<LaneId>) -> Vec<LaneId> {
        let open = |i: &LaneId| Some(*i) != except && self.lanes[*i].tx.is_some();
        let mut ids: Vec<LaneId> = (0..self.lanes.len())
            .filter(open)
            .filter(|i| self.lanes[*i].lane.takes_batches())
            .collect();
        if ids.is_empty() && except.is_none() {
            ids = (0..self.lanes.len()).filter(open).collect();
        }
        let loads: Vec<LaneLoad<'_>> = (self.lanes.iter())
            .map(|slot| LaneLoad {
                speed: &slot.speed,
                unfinished: slot.unfinished(),
                holds: slot.holds,
                device: !slot.lane.is_cpu,
                reserve: slot.lane.in_reserve(),
            })
            .collect();
        route::rank(&loads, &ids, n, frames)
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
    /// stalled device lets the others run on and the sink buffer every later batch. (The
    /// sink's hold is bounded only while it reports its place, `State::ordered`: the encoders
    /// between the workers and the sink pass batches on out of order.)
    fn window(&self) -> u64 {
        let in_flight: u64 =
            self.lanes.iter().map(|l| l.holds).sum::<u64>() + self.producers_started as u64;
        WINDOW_FACTOR * in_flight.max(1)
    }

    /// Whether batch `id` may try to place itself now: when no older batch waits for room, or
    /// while the queues have room for it and for every older waiting one, so room left for the
    /// oldest batch is not taken by whichever producer looks first. (Otherwise a producer that
    /// has just filled a batch takes the room its wake-up made before the woken one looks, and
    /// an old batch could wait a tenth of a second while the sink held every later one for
    /// order: seen on an H200 at 16 cores, session 20.) A newer batch does not wait behind
    /// older ones that have room: with one placement per wake-up of the oldest, 16 producers
    /// fed 16 CPU workers at half their rate (session 21).
    fn may_place(&self, id: u64, lanes: &[LaneId]) -> bool {
        let older = self.waiting.range(..id).count();
        older == 0 || older < self.free_rooms(lanes)
    }

    /// Batches the queues of `lanes` can take now.
    fn free_rooms(&self, lanes: &[LaneId]) -> usize {
        let queues = lanes.iter().filter_map(|&i| self.lanes[i].tx.as_ref());
        let room = |tx: &Sender<Batch<T>>| tx.capacity().map_or(usize::MAX, |c| c - tx.len());
        queues.map(room).fold(0, usize::saturating_add)
    }

    /// Whether batch `id` is within the window, counted from the oldest unfinished batch or the
    /// sink's next one, whichever is older (that one always is); records the widest window seen.
    fn within_window(&mut self, id: u64) -> bool {
        let window = self.window();
        self.widest_window = self.widest_window.max(window);
        let from = self
            .ordered
            .map_or(self.oldest, |next| next.min(self.oldest));
        id < from.saturating_add(window)
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
}

impl<T> Dispatcher<T> {
    /// A dispatcher with no lanes yet, reporting to `lane_set`; the receiver sees the end of
    /// dispatching (disconnects when the queues close).
    pub(crate) fn new(lane_set: Arc<LaneSet>) -> (Self, Receiver<()>) {
        let (closing, closed) = crossbeam_channel::bounded(0);
        let (abandoning, abandoned) = crossbeam_channel::bounded(0);
        let state = State {
            lanes: Vec::new(),
            producers: 0,
            producers_started: 0,
            unfinished: 0,
            oldest: 0,
            ordered: None,
            finished_above: BTreeSet::new(),
            waiting: BTreeSet::new(),
            widest_window: 0,
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
            facts: carriage::RunFacts::default(),
        };
        (dispatcher, closed)
    }

    /// Whether a device's lane has joined: batches are sized for devices from then on, for the
    /// CPU engines before.
    pub(crate) fn has_device(&self) -> bool {
        self.lane_set.has_device()
    }

    /// The lanes this dispatcher sends to.
    pub(crate) fn lane_set(&self) -> &LaneSet {
        &self.lane_set
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

    /// Batch `id` waits in line for room (`State::may_place`) until a wake-up or
    /// `ROOM_POLL`.
    fn wait_in_line<'a>(
        &self,
        mut state: MutexGuard<'a, State<T>>,
        id: u64,
    ) -> MutexGuard<'a, State<T>> {
        state.waiting.insert(id);
        self.wait(state, ROOM_POLL)
    }

    /// Batch `id` no longer waits (placed, or given back): the next in line may find room too.
    fn leave_line(&self, state: &mut State<T>, id: u64) {
        if state.waiting.remove(&id) {
            self.room.notify_all();
        }
    }

    /// Adds a lane with a queue of `queue` batches; it takes batches from now on. `prepare` gets
    /// its id before any producer can choose it (to give it its buffer homes). None when
    /// dispatching has ended (a lane that arrives too late).
    pub(crate) fn add_lane(
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
    pub(crate) fn closed(&self) -> bool {
        self.lock().closed
    }

    /// Sets the speed of the CPU lanes (known once a device's calibration is loaded).
    pub(crate) fn set_cpu_speed(&self, speed: LaneSpeed) {
        let mut state = self.lock();
        for slot in state.lanes.iter_mut().filter(|s| s.lane.is_cpu) {
            slot.speed = speed.clone();
        }
    }

    /// A producer's guard: the queues stay open while one is alive. Take every producer's
    /// guard before any producer starts.
    pub(crate) fn producer(&self) -> Producer<'_, T> {
        let mut state = self.lock();
        state.producers += 1;
        state.producers_started += 1;
        Producer(self)
    }

    /// The lane a new batch of `frames` frames of `spec` is meant for (take its buffer from
    /// that lane's home); lane 0 when there is none yet.
    pub(crate) fn choose(&self, spec: &TransformSpec, frames: usize) -> LaneId {
        let state = self.lock();
        let order = state.ranked(spec.n, frames, None);
        let has_room = |i: &&LaneId| {
            let slot = &state.lanes[**i];
            slot.tx.as_ref().is_some_and(|tx| !tx.is_full())
        };
        let pick = order.iter().find(has_room).or(order.first());
        pick.copied().unwrap_or(0)
    }

    /// Sends `batch` to lane `meant` if it takes batches and has room, else to the lane with
    /// room ranked first, else waits for room anywhere (a batch in heap memory meant for a CPU
    /// lane: the CPU lanes only, `State::heap_batch_lanes`); a batch more than the window
    /// ahead of the oldest unfinished one waits for that one first (`State::window`). The wait
    /// is added to `waited`. False when dispatching has ended (nothing takes batches any more).
    pub(crate) fn send(&self, batch: Batch<T>, meant: LaneId, waited: &AtomicU64) -> bool {
        let (id, n, frames) = (batch.id, batch.spec.n, batch.frames.len());
        let mut batch = batch;
        let mut waiting_since: Option<Instant> = None;
        let mut state = self.lock();
        loop {
            let mut order = state.ranked(n, frames, None);
            if order.is_empty() {
                self.leave_line(&mut state, id);
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
            if let Some(cpu) = state.heap_batch_lanes(&batch, meant) {
                order = cpu;
            }
            if state.may_place(id, &order) && state.within_window(id) {
                match state.place(batch, &order) {
                    Ok(_) => {
                        state.unfinished += 1;
                        if let Some(since) = waiting_since {
                            Counters::add_since(waited, since);
                        }
                        self.leave_line(&mut state, id);
                        return true;
                    }
                    Err(b) => batch = b,
                }
            }
            waiting_since.get_or_insert_with(Instant::now);
            state = self.wait_in_line(state, id);
        }
    }

    /// A producer gave up batch `id` before sending it (a read error): later batches need not
    /// wait for it.
    pub(crate) fn skip(&self, id: u64) {
        let mut state = self.lock();
        state.settle(id);
        self.room.notify_all();
    }

    /// A worker of lane `lane` took batch `id` from its queue: there is room.
    pub(crate) fn received(&self, lane: LaneId, id: u64) {
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
    pub(crate) fn computed(&self, lane: LaneId, id: u64) {
        let mut state = self.lock();
        if let Some(slot) = state.lanes.get_mut(lane) {
            if let Some(held) = slot.batches.get_mut(&id) {
                *held = Held::Computed;
            }
            slot.done_with(id);
        }
    }

    /// A worker of lane `lane` finished batch `id` (written on, or discarded after an error).
    pub(crate) fn finished(&self, lane: LaneId, id: u64) {
        let mut state = self.lock();
        if let Some(slot) = state.lanes.get_mut(lane) {
            slot.release(id);
        }
        state.unfinished = state.unfinished.saturating_sub(1);
        state.settle(id);
        state.close_if_done();
        self.room.notify_all();
    }

    /// Disconnects once the run has given up stalled lanes and every batch before theirs has
    /// finished: the stage after the workers then takes what is already there and ends.
    pub(crate) fn abandoned(&self) -> Receiver<()> {
        self.abandoned.clone()
    }

    /// The lanes given up (`watch`), each with its oldest unfinished batch, for the run's end.
    pub(crate) fn given_up(&self) -> Vec<(LaneId, String, u64)> {
        let state = self.lock();
        state
            .given_up
            .as_ref()
            .map(|g| g.lanes.clone())
            .unwrap_or_default()
    }

    /// After a give-up: the output ends before this batch (the lowest batch the given-up lanes
    /// held, or a lower one dropped at the stop).
    pub(crate) fn cut(&self) -> Option<u64> {
        self.lock().given_up.as_ref().map(|g| g.cut)
    }

    /// The widest window any batch was sent under (`State::window`; it narrows at the end, as
    /// lanes and producers leave): what bounds the batches held for order over the run.
    pub(crate) fn widest_window(&self) -> u64 {
        self.lock().widest_window
    }
}

/// The stall time: `FFTD_STALL_SECONDS` (a tuning knob for tests), else 10 s.
fn stall_after() -> Duration {
    crate::knobs::stall_seconds().unwrap_or(STALL_AFTER)
}

/// Keeps the queues open while alive (see `Dispatcher::producer`).
pub(crate) struct Producer<'a, T>(&'a Dispatcher<T>);

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
pub(super) struct AbandonOnPanic<'a, T>(pub &'a Dispatcher<T>);

impl<T> Drop for AbandonOnPanic<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandon();
        }
    }
}

#[cfg(test)]
mod tests;
