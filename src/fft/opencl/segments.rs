//! Segment reduction on the device (`--average` fused with the FFT): a batch's runs of
//! consecutive rows (`fft::Segments`, cut by the pipeline so a run never straddles a group of the
//! average) reduced to one row each by the `reduce_segments` kernel (kernels/segments.cl), right
//! after the FFT (and the bands), so only one row per run is copied back. Chunks of the batch are
//! cut at run boundaries (`chunk_spans`), so every run is reduced within one chunk.

use super::device::SharedDevice;
use super::launch::{Enqueue, Items};
use crate::fft::{SegmentOp, Segments};
use crate::types::Sample;
use opencl3::command_queue::CommandQueue;
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;
use std::sync::Arc;

const SRC_SEGMENTS: &str = include_str!("../../../kernels/segments.cl");

/// Work-items per group along the columns.
const COLUMN_WG: usize = 64;

/// A chunk of a batch: frames `f0..f0 + fc`, whose output rows are `r0..r0 + rc` (runs when the
/// batch is reduced, else the frames themselves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ChunkSpan {
    pub f0: usize,
    pub fc: usize,
    pub r0: usize,
    pub rc: usize,
}

/// Chunks of about `chunk` frames each; with runs, cut only between runs (a run longer than
/// `chunk` is a chunk of its own).
pub(super) fn chunk_spans(frames: usize, chunk: usize, runs: Option<&[u32]>) -> Vec<ChunkSpan> {
    let chunk = chunk.max(1);
    let Some(runs) = runs else {
        return (0..frames.div_ceil(chunk))
            .map(|c| {
                let f0 = c * chunk;
                let fc = chunk.min(frames - f0);
                ChunkSpan {
                    f0,
                    fc,
                    r0: f0,
                    rc: fc,
                }
            })
            .collect();
    };
    let mut spans: Vec<ChunkSpan> = Vec::new();
    let mut open: Option<ChunkSpan> = None;
    let (mut f0, mut r0) = (0usize, 0usize);
    for &len in runs {
        let len = len as usize;
        match open.as_mut() {
            Some(span) if span.fc + len <= chunk => {
                span.fc += len;
                span.rc += 1;
            }
            _ => {
                spans.extend(open.take());
                open = Some(ChunkSpan {
                    f0,
                    fc: len,
                    r0,
                    rc: 1,
                });
            }
        }
        f0 += len;
        r0 += 1;
    }
    spans.extend(open);
    spans
}

/// A batch's runs on the device, with the kernel.
pub(super) struct DeviceSegments<T> {
    /// The runs held (to reuse them for a batch with the same runs).
    lengths: Vec<u32>,
    op_held: SegmentOp,
    start: Buffer<u32>,
    len: Buffer<u32>,
    op: i32,
    kernel: Kernel,
    marker: std::marker::PhantomData<T>,
}

impl<T: Sample> DeviceSegments<T> {
    /// Uploads `segments` (first frame and length of each run) and builds the kernel.
    pub(super) fn new(
        dev: &Arc<SharedDevice>,
        queue: &CommandQueue,
        segments: &Segments<'_>,
    ) -> Result<Self, String> {
        let options = if T::NAME == "f64" {
            "-D USE_DOUBLE"
        } else {
            ""
        };
        let program = dev.program("segments", &[super::SRC_COMMON, SRC_SEGMENTS], options)?;
        let kernel = Kernel::create(&program, "reduce_segments")
            .map_err(|e| format!("kernel reduce_segments: {e}"))?;
        let mut starts = Vec::with_capacity(segments.lengths.len());
        let mut at = 0u32;
        for &len in segments.lengths {
            starts.push(at);
            at += len;
        }
        Ok(DeviceSegments {
            lengths: segments.lengths.to_vec(),
            op_held: segments.op,
            start: super::bands::upload(dev, queue, &starts)?,
            len: super::bands::upload(dev, queue, segments.lengths)?,
            op: match segments.op {
                SegmentOp::Mean => 0,
                SegmentOp::Max => 1,
                SegmentOp::Min => 2,
            },
            kernel,
            marker: std::marker::PhantomData,
        })
    }

    /// Whether these are `segments`' runs already.
    pub(super) fn holds(&self, segments: &Segments<'_>) -> bool {
        self.op_held == segments.op && self.lengths == segments.lengths
    }

    /// Enqueues the reduction of chunk `span`'s rows (`rows`: its `fc` rows of `width` values)
    /// into `out` (its `rc` runs) on `queue`, after what is queued there.
    pub(super) fn enqueue(
        &mut self,
        queue: &CommandQueue,
        rows: &Buffer<T>,
        out: &Buffer<T>,
        span: ChunkSpan,
        width: usize,
    ) -> Result<Event, String> {
        let (first_run, first_row) = (span.r0 as u32, span.f0 as u32);
        let (runs, columns) = (span.rc as u32, width as u32);
        // SAFETY: arguments in the order of segments.cl's `reduce_segments`; the runs of this
        // span lie inside its `fc` rows of `rows` (chunk_spans cuts between runs), `out` holds
        // `rc` rows of `width` (the caller sized it), and items past `width` or `rc` return early.
        unsafe {
            ExecuteKernel::new(&self.kernel)
                .set_arg(rows)
                .set_arg(out)
                .set_arg(&self.start)
                .set_arg(&self.len)
                .set_arg(&first_run)
                .set_arg(&first_row)
                .set_arg(&runs)
                .set_arg(&columns)
                .set_arg(&self.op)
                .launch(
                    Items::per_row(width, COLUMN_WG, span.rc),
                    queue,
                    "reduce_segments",
                )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_cut_between_runs() {
        let spans = chunk_spans(10, 4, Some(&[2, 1, 3, 1, 3]));
        let want = [
            ChunkSpan {
                f0: 0,
                fc: 3,
                r0: 0,
                rc: 2,
            },
            ChunkSpan {
                f0: 3,
                fc: 4,
                r0: 2,
                rc: 2,
            },
            ChunkSpan {
                f0: 7,
                fc: 3,
                r0: 4,
                rc: 1,
            },
        ];
        assert_eq!(spans, want);
        let long = chunk_spans(9, 4, Some(&[1, 7, 1]));
        assert_eq!(
            long.iter().map(|s| (s.fc, s.rc)).collect::<Vec<_>>(),
            [(1, 1), (7, 1), (1, 1)]
        );
        let plain = chunk_spans(10, 4, None);
        assert_eq!(plain.iter().map(|s| s.fc).collect::<Vec<_>>(), [4, 4, 2]);
    }
}
