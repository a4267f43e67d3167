//! The dispatcher's stall watch: warns of a device lane that finishes nothing for the stall
//! time, and after a stop gives such a lane up so a hung device cannot keep the run from ending.

use super::{Dispatcher, GivenUp, LaneId, State, StopFlags, INTERRUPT_GRACE, WATCH_POLL};
use crate::trace::Tracer;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl<T> State<T> {
    /// Warns once per stalled batch: one a lane's worker has been on for `stall_after`
    /// (`LaneSlot::release` says when the lane is done with it).
    pub(super) fn warn_stalls(&mut self, now: Instant, stall_after: Duration) {
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
    pub(super) fn give_up_stalled(&mut self, now: Instant, since: Instant, grace: Duration) {
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
    /// Watches the lanes until dispatching has ended: warns about a lane that has finished
    /// nothing for the stall time (`FFTD_STALL_SECONDS`, 10 s), and after a stop gives up a
    /// lane that still finishes nothing (after the stall time; after 1 s for SIGINT/SIGTERM),
    /// so a hung device cannot keep the run from ending. `ended` disconnects when dispatching
    /// ends (`new`'s receiver). With `--trace`, each check is a span on a `stall watcher` track.
    pub(crate) fn watch_traced(
        &self,
        ended: &Receiver<()>,
        stop: StopFlags<'_>,
        tracer: Option<&Tracer>,
    ) {
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
                // a batch a failure dropped on its way to the sink is never taken in order:
                // from the stop on, the window counts from the oldest unfinished batch alone
                state.ordered = None;
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
    pub(crate) fn watch(&self, ended: &Receiver<()>, stop: StopFlags<'_>) {
        self.watch_traced(ended, stop, None)
    }
}
