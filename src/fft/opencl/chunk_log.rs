//! `--trace`: the device times of every chunk a slot drains (`Slot::drain` reads them where it
//! reads the batch's profiling totals), and the bounds they give on the device clock against the
//! host's (`ClockBounds`): after a chunk's download has been waited for, the host instant minus
//! its end is an upper bound on the offset; the slot's previous drain ended before the next
//! chunk's upload was enqueued into it, so that instant minus the upload's QUEUED time is a lower
//! bound. Nothing is recorded unless `device_trace::tracing()`.

use super::slots::Slot;
use crate::trace::device_trace::{self, ClockBounds, DeviceChunk, DeviceTrace};
use crate::types::Sample;
use opencl3::event::Event;
use std::time::Instant;

/// Chunks kept per slot at most until an engine's trace is taken (an engine whose trace nobody
/// takes, as a calibration's, forgets the oldest).
const MAX_CHUNKS: usize = 4096;

/// One slot's drained chunks and clock bounds.
#[derive(Default)]
pub(super) struct ChunkLog {
    chunks: Vec<DeviceChunk>,
    clock: ClockBounds,
    /// When the slot's last drain ended (before the next chunk is enqueued into it).
    drained_at: Option<Instant>,
}

fn times(e: &Event) -> Option<(u64, u64)> {
    Some((
        e.profiling_command_start().ok()?,
        e.profiling_command_end().ok()?,
    ))
}

impl ChunkLog {
    /// The host instant right after a download's wait, when tracing.
    pub(super) fn waited() -> Option<Instant> {
        device_trace::tracing().then(Instant::now)
    }

    /// The slot's drain has ended (the next chunk is enqueued after this).
    pub(super) fn drained(&mut self) {
        if device_trace::tracing() {
            self.drained_at = Some(Instant::now());
        }
    }

    /// Records a drained chunk's commands; `waited`: the instant its download's wait returned.
    pub(super) fn record(
        &mut self,
        write: &Event,
        kernels: &[Event],
        read: &Event,
        waited: Instant,
    ) {
        let (Some(upload), Some(download)) = (times(write), times(read)) else {
            return;
        };
        let kernels = match (kernels.first(), kernels.last()) {
            (Some(a), Some(b)) => a
                .profiling_command_start()
                .ok()
                .zip(b.profiling_command_end().ok()),
            _ => None,
        };
        self.clock
            .at_most(device_trace::host_ns(waited) - download.1 as i64);
        if let (Some(before), Ok(queued)) = (self.drained_at, write.profiling_command_queued()) {
            // a zero QUEUED time (a driver that does not set it) bounds nothing
            if queued > 0 {
                self.clock
                    .at_least(device_trace::host_ns(before) - queued as i64);
            }
        }
        if self.chunks.len() >= MAX_CHUNKS {
            self.chunks.clear();
        }
        self.chunks.push(DeviceChunk {
            upload,
            kernels,
            download,
        });
    }
}

/// The chunks drained since the last call from every slot of an engine on `device`, in upload
/// order, with the engine's clock bounds; None when there are none.
pub(super) fn take<T: Sample>(slots: &mut [Slot<T>], device: String) -> Option<DeviceTrace> {
    let mut trace = DeviceTrace {
        device,
        ..Default::default()
    };
    for slot in slots {
        trace.chunks.append(&mut slot.log.chunks);
        trace.clock.merge(&slot.log.clock);
    }
    trace.chunks.sort_by_key(|c| c.upload.0);
    (!trace.chunks.is_empty()).then_some(trace)
}
