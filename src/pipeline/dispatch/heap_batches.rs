//! Where a batch in heap memory may go: a batch filled for a CPU lane (its buffer from the CPU
//! lanes' home, heap memory) stays with the CPU lanes while one of them works, retired or not,
//! and waits for their room rather than go to a device's lane. On a device it would cross
//! through the engine's pinned staging blocks, which its first such batches pin while the
//! device works, and then be copied on the host both ways. At a device's hand-over on a big
//! host every reader holds such a batch: on 32 cores of an H200 host the device ran at part
//! rate for ~80 ms while its workers pinned staging memory for them (issue 41, session 31).
//! A retired CPU lane (it bridged the device's start-up) still computes what it is sent.

use super::{Batch, LaneId, State};

impl<T> State<T> {
    /// The lanes a batch meant for `meant` may go to when its memory decides it: the CPU lanes
    /// that work (`meant` first) for a batch in heap memory meant for one of them; None
    /// otherwise (every lane, by rank), or when no CPU lane works.
    pub(super) fn heap_batch_lanes(&self, batch: &Batch<T>, meant: LaneId) -> Option<Vec<LaneId>> {
        let meant_cpu = self.lanes.get(meant).is_some_and(|slot| slot.lane.is_cpu);
        if batch.data.is_pinned() || !meant_cpu {
            return None;
        }
        let works = |i: &LaneId| {
            let slot = &self.lanes[*i];
            slot.lane.is_cpu && !slot.lane.failed() && slot.tx.is_some()
        };
        let mut cpu: Vec<LaneId> = (0..self.lanes.len()).filter(works).collect();
        if let Some(k) = cpu.iter().position(|&i| i == meant) {
            cpu[..=k].rotate_right(1);
        }
        (!cpu.is_empty()).then_some(cpu)
    }
}
