//! One lane as the dispatcher sees it (`LaneSlot`): its queue's sender, its measured speed, and
//! every batch sent to it and not finished yet with where that batch is (`Held`: queued, on the
//! device, computed); what the stall watch reads.

use super::Batch;
use crate::fft::lanes::Lane;
use crate::fft::route::LaneSpeed;
use crossbeam_channel::Sender;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Where a batch a lane holds is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Held {
    /// In the lane's queue.
    Queued,
    /// On its device since then (a worker took it).
    Running(Instant),
    /// Computed, on its way to the stage after the workers (which may be slow to take it: a
    /// slow disk, a paused stdout): no longer the device's time, but not finished either.
    Computed,
}

pub(super) struct LaneSlot<T> {
    pub(super) lane: Arc<Lane>,
    pub(super) tx: Option<Sender<Batch<T>>>,
    pub(super) speed: LaneSpeed,
    /// Batches it holds at most: its queue's and its workers'.
    pub(super) holds: u64,
    /// The batches sent to this lane and not finished yet, by number, and where each is.
    pub(super) batches: BTreeMap<u64, Held>,
    /// The batch a stall warning named, and when a worker took it.
    pub(super) warned: Option<(u64, Instant)>,
}

impl<T> LaneSlot<T> {
    pub(super) fn unfinished(&self) -> u64 {
        self.batches.len() as u64
    }

    /// The lane no longer holds batch `id` (finished, or handed to another lane); says so when
    /// a stall warning named it.
    pub(super) fn release(&mut self, id: u64) {
        self.batches.remove(&id);
        self.done_with(id);
    }

    /// Its device is done with batch `id` (computed, finished or handed on): says so when a
    /// stall warning named it.
    pub(super) fn done_with(&mut self, id: u64) {
        if let Some((batch, taken)) = self.warned.filter(|(batch, _)| *batch == id) {
            let secs = taken.elapsed().as_secs_f64();
            let title = self.lane.title();
            tracing::info!("{title} is done with batch {batch} after {secs:.1} s");
            self.warned = None;
        }
    }

    /// The lowest-numbered batch it holds.
    pub(super) fn oldest(&self) -> Option<u64> {
        self.batches.keys().next().copied()
    }

    /// The batch its workers have been on the longest (on the device: not a computed batch
    /// waiting for the stage after the workers), and when they took it.
    pub(super) fn longest_running(&self) -> Option<(u64, Instant)> {
        let running = self.batches.iter().filter_map(|(id, held)| match held {
            Held::Running(taken) => Some((*id, *taken)),
            Held::Queued | Held::Computed => None,
        });
        running.min_by_key(|(_, taken)| *taken)
    }
}
