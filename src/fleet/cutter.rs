//! Cuts one stream's samples into frame-aligned blocks (`block`) for the work stream, so that
//! workers framing each block on its own get exactly the frames of a local run: same frame
//! numbers, starts and `time_s`, the same overlap, the same tail frame under `--tail pad|drop`
//! (the frame count is decided by `frame::expected_frames` once the stream has ended).
//! Memory: at most one block's samples plus one push.

use super::block::{BlockHeader, StreamShape, MAX_BLOCK_FRAMES};
use super::payloads::PayloadPool;
use crate::frame::expected_frames;
use bytes::Bytes;

/// A block ready to publish: its header and its payload, the samples as little-endian float32
/// (`kind.width()` values each), encoded straight from the cutter's buffer into a buffer used
/// again once the payload is dropped (`payloads`).
pub(crate) struct CutBlock {
    pub header: BlockHeader,
    pub payload: Bytes,
    /// The block's place among its stream's blocks (0, 1, …): the same for the same cut, so a
    /// resumed publish sends each block to the shard it went to before (`shards::shard_of`).
    pub index: u64,
}

pub(crate) struct BlockCutter {
    shape: StreamShape,
    /// Frames per block (the last blocks may hold fewer).
    block_frames: usize,
    width: usize,
    /// Values from sample index `base` on.
    buf: Vec<f64>,
    base: u64,
    /// Samples still to discard before `buf` starts (hop > n leaves gaps between frames).
    discard: u64,
    /// Samples pushed.
    total: u64,
    /// The next frame to put in a block.
    next_frame: u64,
    /// The block being emitted is the stream's last.
    last: bool,
    /// Blocks emitted so far.
    emitted: u64,
    /// Payload buffers the client has dropped, for the next blocks.
    pool: PayloadPool,
}

impl BlockCutter {
    pub(crate) fn new(shape: StreamShape, block_frames: usize) -> Self {
        let width = shape.kind.width();
        BlockCutter {
            shape,
            block_frames: block_frames.max(1),
            width,
            buf: Vec::new(),
            base: 0,
            discard: 0,
            total: 0,
            next_frame: 0,
            last: false,
            emitted: 0,
            pool: PayloadPool::default(),
        }
    }

    /// Samples a block of `frames` frames from `first` spans when none is missing.
    fn span(&self, first: u64, frames: usize) -> (u64, u64) {
        let (n, hop) = (self.shape.n as u64, self.shape.hop as u64);
        let start = first * hop;
        (start, start + (frames as u64 - 1) * hop + n)
    }

    /// Adds samples (`width` values each); emits every whole block they complete.
    pub(crate) fn push(
        &mut self,
        mut values: &[f64],
        emit: &mut dyn FnMut(CutBlock) -> bool,
    ) -> bool {
        let w = self.width;
        self.total += (values.len() / w) as u64;
        if self.discard > 0 {
            let skipped = (self.discard as usize).min(values.len() / w);
            values = &values[skipped * w..];
            self.discard -= skipped as u64;
            self.base += skipped as u64;
        }
        self.buf.extend_from_slice(values);
        let m = self.block_frames;
        while self.span(self.next_frame, m).1 <= self.total {
            if !self.emit(m, emit) {
                return false;
            }
        }
        true
    }

    /// Emits every whole frame received and not yet in a block, as one block (fewer frames than
    /// a full one): a live stream's bound on how long a frame waits for its block. Whether any.
    pub(crate) fn flush_whole(&mut self, emit: &mut dyn FnMut(CutBlock) -> bool) -> bool {
        let (n, hop) = (self.shape.n as u64, self.shape.hop as u64);
        let whole = match self.total >= n {
            true => (self.total - n) / hop + 1,
            false => 0,
        };
        if whole <= self.next_frame {
            return false;
        }
        let m = ((whole - self.next_frame) as usize).min(self.block_frames);
        self.emit(m, emit);
        true
    }

    /// Ends the stream: the frames left (the tail rule decides how many) in blocks of at most
    /// `block_frames`, samples past the end left for the worker to zero-pad.
    pub(crate) fn finish(&mut self, emit: &mut dyn FnMut(CutBlock) -> bool) {
        self.finish_by(self.shape.tail, emit);
    }

    /// Ends the stream early (a stop, not the end of the input): nothing more is cut. The whole
    /// blocks read so far are out; the frames after them are left for a publish resumed with the
    /// same run id, which cuts the same blocks, so a worker never gets a short block and a whole
    /// one holding the same frames (their batched rows would be other messages, stored twice).
    /// Returns how many whole frames were read but not sent.
    pub(crate) fn cut_short(&mut self) -> u64 {
        let s = &self.shape;
        let frames = expected_frames(
            self.total,
            s.n as u64,
            s.hop as u64,
            crate::frame::Tail::Drop,
        );
        frames.saturating_sub(self.next_frame)
    }

    fn finish_by(&mut self, tail: crate::frame::Tail, emit: &mut dyn FnMut(CutBlock) -> bool) {
        let s = &self.shape;
        let frames = expected_frames(self.total, s.n as u64, s.hop as u64, tail);
        while self.next_frame < frames {
            let m = ((frames - self.next_frame) as usize).min(self.block_frames);
            self.last = self.next_frame + m as u64 == frames;
            if !self.emit(m, emit) {
                return;
            }
        }
    }

    /// Emits frames `next_frame .. next_frame + m` and lets go of the samples no later frame needs.
    fn emit(&mut self, m: usize, emit: &mut dyn FnMut(CutBlock) -> bool) -> bool {
        let w = self.width;
        let first = self.next_frame;
        let (start, end) = self.span(first, m);
        // a tail frame can start past the end (hop > n): it is all padding
        let end = end.min(self.total).max(start);
        let held = self.buf.len() / w;
        let from = ((start - self.base) as usize).min(held) * w;
        let to = ((end - self.base) as usize).min(held) * w;
        let mut payload = self.pool.take();
        super::block::encode_samples(&self.buf[from..to], &mut payload);
        let payload = self.pool.payload(payload);
        let block = CutBlock {
            header: BlockHeader {
                shape: self.shape.clone(),
                first_frame: first,
                frames: m,
                samples: (to - from) / w,
                last: self.last,
            },
            payload,
            index: self.emitted,
        };
        self.emitted += 1;
        self.next_frame += m as u64;
        let next_start = self.next_frame * self.shape.hop as u64;
        let held_end = self.base + (self.buf.len() / w) as u64;
        let drop_to = next_start.min(held_end);
        self.buf.drain(..(drop_to - self.base) as usize * w);
        self.base = drop_to;
        self.discard = next_start - drop_to;
        emit(block)
    }
}

/// Bytes a block holds at most unless `--block-frames` asks for more: large messages carry the
/// samples at the broker's byte rate (few per-message costs), small enough that a recording of
/// a few seconds still makes blocks for several workers.
pub(crate) const BLOCK_BYTES: usize = 1 << 20;

/// Frames per block when `--block-frames` is not given: the largest power of two whose block
/// fits `max_bytes` and `BLOCK_BYTES` (a power of two keeps blocks on the groups of `--average`
/// counts that are powers of two), within the frames a worker frames at once. None when one
/// frame alone does not fit `max_bytes`.
pub(crate) fn default_block_frames(
    n: usize,
    hop: usize,
    width: usize,
    max_bytes: usize,
) -> Option<usize> {
    frames_per_block(n, hop, width, max_bytes, 1)?;
    let most = frames_per_block(n, hop, width, max_bytes.min(BLOCK_BYTES), MAX_BLOCK_FRAMES)
        .unwrap_or(1)
        .min((crate::limits::MAX_BATCH_SAMPLES / n.max(1)).max(1));
    Some(1 << most.ilog2())
}

/// Frames per block so that a block's payload stays within `max_bytes`: as many as fit, at most
/// `wanted` (≥ 1). None when one frame alone does not fit.
pub(crate) fn frames_per_block(
    n: usize,
    hop: usize,
    width: usize,
    max_bytes: usize,
    wanted: usize,
) -> Option<usize> {
    let max_samples = max_bytes / (4 * width);
    if n > max_samples {
        return None;
    }
    Some(((max_samples - n) / hop + 1).min(wanted).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameSize, Framer, Tail};
    use crate::types::InputKind;

    /// Frames of a local run: (seq, start, data).
    fn local(samples: &[f64], n: usize, hop: usize, tail: Tail) -> Vec<(u64, u64, Vec<f64>)> {
        let mut framer =
            Framer::<f64>::new(0, FrameSize::Fixed(n), hop, tail, InputKind::Real, 1.0)
                .expect("framer");
        let mut out = Vec::new();
        framer
            .push(samples, &mut |f| {
                out.push((f.seq, f.start, f.data));
                true
            })
            .expect("push");
        framer
            .finish(&mut |f| {
                out.push((f.seq, f.start, f.data));
                true
            })
            .expect("finish");
        out
    }

    /// A block's samples, as the worker decodes them (the tests' samples are whole numbers: f32
    /// holds them exactly).
    fn values_of(b: &CutBlock) -> Vec<f64> {
        crate::fleet::block::decode_samples(&b.header, &b.payload)
            .expect("payload as the header says")
            .into_iter()
            .map(f64::from)
            .collect()
    }

    /// Frames a worker cuts from blocks (the worker's rule: zero-pad past the block's samples).
    fn via_blocks(
        samples: &[f64],
        n: usize,
        hop: usize,
        tail: Tail,
        m: usize,
        chunk: usize,
    ) -> Vec<(u64, u64, Vec<f64>)> {
        let shape = StreamShape {
            source: "s".into(),
            run: "r".into(),
            stream: 0,
            channel: None,
            rate: 1.0,
            kind: InputKind::Real,
            n,
            hop,
            tail,
        };
        let mut cutter = BlockCutter::new(shape, m);
        let mut blocks = Vec::new();
        for c in samples.chunks(chunk.max(1)) {
            cutter.push(c, &mut |b| {
                blocks.push(b);
                true
            });
        }
        cutter.finish(&mut |b| {
            blocks.push(b);
            true
        });
        let mut out = Vec::new();
        for b in blocks {
            let h = &b.header;
            let values = values_of(&b);
            assert_eq!(values.len(), h.samples);
            for j in 0..h.frames {
                let at = j * hop;
                let mut data: Vec<f64> = values.iter().skip(at).take(n).copied().collect();
                data.resize(n, 0.0);
                let seq = h.first_frame + j as u64;
                out.push((seq, seq * hop as u64, data));
            }
        }
        out
    }

    #[test]
    fn blocks_frame_exactly_as_a_local_run() {
        for l in 0..45usize {
            let samples: Vec<f64> = (1..=l).map(|v| v as f64).collect();
            for n in [2usize, 3, 4, 8] {
                for hop in [1usize, 2, 3, 4, 9] {
                    for tail in [Tail::Pad, Tail::Drop] {
                        for m in [1usize, 2, 5] {
                            for chunk in [1usize, 7, 64] {
                                assert_eq!(
                                    via_blocks(&samples, n, hop, tail, m, chunk),
                                    local(&samples, n, hop, tail),
                                    "L={l} N={n} H={hop} {tail:?} m={m} chunk={chunk}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn flushing_whole_frames_early_keeps_the_frames() {
        let samples: Vec<f64> = (1..=100).map(|v| v as f64).collect();
        let shape = StreamShape {
            source: "s".into(),
            run: "r".into(),
            stream: 0,
            channel: None,
            rate: 1.0,
            kind: InputKind::Real,
            n: 8,
            hop: 3,
            tail: Tail::Pad,
        };
        let mut cutter = BlockCutter::new(shape, 5);
        let mut blocks = Vec::new();
        for c in samples.chunks(7) {
            cutter.push(c, &mut |b| {
                blocks.push(b);
                true
            });
            cutter.flush_whole(&mut |b| {
                blocks.push(b);
                true
            });
        }
        cutter.finish(&mut |b| {
            blocks.push(b);
            true
        });
        let mut frames = Vec::new();
        for b in &blocks {
            for j in 0..b.header.frames {
                let mut data: Vec<f64> = values_of(b).into_iter().skip(j * 3).take(8).collect();
                data.resize(8, 0.0);
                frames.push((b.header.first_frame + j as u64, data));
            }
        }
        let want: Vec<(u64, Vec<f64>)> = local(&samples, 8, 3, Tail::Pad)
            .into_iter()
            .map(|(seq, _, data)| (seq, data))
            .collect();
        assert_eq!(frames, want);
        assert!(
            blocks.iter().any(|b| b.header.frames < 5),
            "some blocks cut early"
        );
    }

    #[test]
    fn block_size_follows_the_payload_limit() {
        // 1 MiB of f32: 262144 samples; n 4096 hop 1024: (262144-4096)/1024+1 = 253
        assert_eq!(frames_per_block(4096, 1024, 1, 1 << 20, 1000), Some(253));
        assert_eq!(frames_per_block(4096, 1024, 1, 1 << 20, 128), Some(128));
        assert_eq!(frames_per_block(1 << 20, 1024, 1, 1 << 20, 128), None);
        // the default: a power of two within 1 MiB (and max_payload less header room)
        let budget = (1 << 20) - 4096;
        assert_eq!(default_block_frames(1024, 512, 1, budget), Some(256));
        assert_eq!(default_block_frames(4096, 2048, 1, budget), Some(64));
        assert_eq!(default_block_frames(64, 64, 2, budget), Some(1024));
        assert_eq!(default_block_frames(4096, 1024, 1, 64 << 20), Some(128));
        assert_eq!(default_block_frames(1 << 18, 1 << 18, 1, budget), None);
        assert_eq!(default_block_frames(1 << 17, 1 << 17, 1, budget), Some(1));
    }
}
