//! What takes from a device's pinned home found when it had no spare block, for `--stats`
//! (`fftd device blocks:`): how many waited for one and how long in all, and how many took heap
//! memory instead (which the device's engine then copies through its own pinned buffers). Where
//! the takes wait shows where a device's blocks are held: by the readers' batches in front of
//! its queue (samples), or by the stages after the workers, the sink holding rows for order
//! (spectra).

use crate::stats::Counters;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Default)]
pub(super) struct Misses {
    waited: AtomicU64,
    waited_ns: AtomicU64,
    heap: AtomicU64,
}

impl Misses {
    /// A take waited for a spare from `since`.
    pub(super) fn waited_since(&self, since: Instant) {
        self.waited.fetch_add(1, Ordering::Relaxed);
        Counters::add_since(&self.waited_ns, since);
    }

    /// A take got heap memory (after a wait, or below its home's most).
    pub(super) fn took_heap(&self) {
        self.heap.fetch_add(1, Ordering::Relaxed);
    }

    /// (takes that waited, takes that got heap memory)
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.waited.load(Ordering::Relaxed),
            self.heap.load(Ordering::Relaxed),
        )
    }

    /// One pool's part of the line; None when every take found a spare (or none was pinned).
    pub(super) fn report(&self) -> Option<String> {
        let (waited, heap) = self.counts();
        let seconds = self.waited_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        (waited + heap > 0).then(|| {
            format!("{waited} takes waited for a spare ({seconds:.3} s in all), {heap} took heap memory")
        })
    }
}

/// `--stats`' line from the samples' and the spectra's parts; None when neither has one.
pub(super) fn line(samples: Option<String>, spectra: Option<String>) -> Option<String> {
    if samples.is_none() && spectra.is_none() {
        return None;
    }
    let none = || "every take found a spare".to_string();
    Some(format!(
        "fftd device blocks: samples: {}; spectra: {}",
        samples.unwrap_or_else(none),
        spectra.unwrap_or_else(none)
    ))
}
