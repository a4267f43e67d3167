//! Hand-offs between lanes (a failed device's batches go to a working lane) and the end of
//! dispatching after a worker's panic.

use super::{Batch, Dispatcher, LaneId, ROOM_POLL};
use crossbeam_channel::{SendTimeoutError, Sender};
use std::sync::atomic::Ordering;

impl<T> Dispatcher<T> {
    /// Hands a batch of failed lane `from` to the working lane with the best score (waiting for
    /// room in its queue when all are full). Gives the batch back when no other lane works
    /// (or dispatching ends while it waits): the caller then computes it itself.
    pub(crate) fn hand_off(&self, batch: Batch<T>, from: LaneId) -> Result<(), Batch<T>> {
        let (id, n, frames) = (batch.id, batch.spec.n, batch.frames.len());
        let mut state = self.lock();
        let order = state.ranked(n, frames, Some(from));
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
    pub(crate) fn abandon(&self) {
        let mut state = self.lock();
        state.close();
        state.abandoning = None;
        state.panicked = true;
        self.room.notify_all();
    }

    /// Whether a worker panicked (`abandon`): its batch never finishes, and a worker stuck on a
    /// hung device may be left behind at the end.
    pub(crate) fn was_abandoned(&self) -> bool {
        self.lock().panicked
    }
}
