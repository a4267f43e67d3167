//! Hand-offs between lanes (a failed device's batches go to a working lane) and the end of
//! dispatching after a worker's panic.

use super::{Batch, Dispatcher, LaneId};
use std::sync::atomic::Ordering;

impl<T> Dispatcher<T> {
    /// Hands a batch of failed lane `from` to the working lane with the best score, waiting
    /// for room when every queue is full, in line with the producers (`State::may_place`:
    /// a handed-off batch is among the run's oldest). Gives the batch back when no other lane
    /// works (or dispatching ends while it waits): the caller then computes it itself.
    pub(crate) fn hand_off(&self, batch: Batch<T>, from: LaneId) -> Result<(), Batch<T>> {
        let (id, n, frames) = (batch.id, batch.spec.n, batch.frames.len());
        let mut batch = batch;
        let mut state = self.lock();
        let target = loop {
            let order = state.ranked(n, frames, Some(from));
            if order.is_empty() || state.closed {
                self.leave_line(&mut state, id);
                return Err(batch);
            }
            if state.may_place(id, &order) {
                match state.place(batch, &order) {
                    Ok(to) => break to,
                    Err(b) => batch = b,
                }
            }
            // the other lanes' workers drain their queues whatever this one does: no cycle
            state = self.wait_in_line(state, id);
        };
        self.leave_line(&mut state, id);
        let to = state.lanes[target].lane.label.clone();
        let source = &mut state.lanes[from];
        source.release(id);
        let counters = &source.lane.counters;
        counters.handed_off.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(from = %source.lane.label, to = %to, "batch handed off");
        Ok(())
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
