//! One range reader thread's reading of a job into its batch buffer (`JobReader`): one
//! positioned read of the job's bytes, decoded by the input's coding and split into its
//! channels, the frames written straight into the batch; in an f64 run for a device, f32 samples
//! kept as f32 in the first half of the buffer's bytes (raw f32 read straight in, other codings
//! narrowed where exact), else widened in place.

use super::{Framing, Job, RangeStream};
use crate::error::{FftdError, Result};
use crate::fft::carry::f32s_mut;
use crate::fft::Carry;
use crate::source::seekable::SampleCoding;
use crate::source::seekable::SeekableLayout;
use crate::source::InputFormat;
use crate::timeline::Phase;
use crate::timeline::ThreadClock;
use crate::types::Sample;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A thread's reading state: the open file and scratch buffers, reused from job to job.
#[derive(Default)]
pub(super) struct JobReader {
    file: Option<(Arc<SeekableLayout>, File)>,
    bytes: Vec<u8>,
    values: Vec<f64>,
    parts: Vec<Vec<f64>>,
}

impl JobReader {
    /// `fill`, as f32 in the first half of `out`'s bytes when `carry_f32` and every sample is
    /// an f32 value (`dispatch::carriage`), else in the run's type; says which.
    pub(super) fn fill_batch<T: Sample>(
        &mut self,
        (stream, framing, job): (&RangeStream, &Framing, Job),
        out: &mut [T],
        carry_f32: bool,
        clock: &mut ThreadClock<'_>,
    ) -> Result<Carry> {
        if carry_f32 {
            let len = out.len();
            let f32s = &mut f32s_mut(out)[..len];
            if self.fill(stream, framing, job, f32s, clock)? {
                return Ok(Carry::F32);
            }
        }
        self.fill(stream, framing, job, out, clock)?;
        Ok(Carry::Run)
    }

    /// Writes the job's frames into `out`: back to back (`count` frames of `n` samples), or, when
    /// they overlap, the samples they cover, once (`Framing::batch_layout`). Whether every
    /// sample was exactly a `T` (decoded values converted to `T` may not be).
    fn fill<T: Sample>(
        &mut self,
        stream: &RangeStream,
        framing: &Framing,
        job: Job,
        out: &mut [T],
        clock: &mut ThreadClock<'_>,
    ) -> Result<bool> {
        let span = (Some(job.id), Some(stream.stream));
        let (n, hop) = (framing.n as u64, framing.hop as u64);
        if hop <= n {
            // adjacent or overlapping frames: the samples they cover, each once and in order
            // (`Framing::batch_layout`), mono raw f32 read straight into the batch
            let base = job.first * hop;
            let raw_mono_f32 = stream.layout.coding == SampleCoding::Raw(InputFormat::F32)
                && stream.layout.channels == 1;
            if raw_mono_f32 {
                if let Some(out) = T::as_f32_mut(out) {
                    return self
                        .read_f32_in_place(stream, base, out, clock, span)
                        .map(|()| true);
                }
                if let Some(out) = T::as_f64_mut(out) {
                    return self
                        .read_f32_widened(stream, base, out, clock, span)
                        .map(|()| true);
                }
            }
            let end = (job.first + job.count as u64 - 1) * hop + n;
            let samples = self.read(stream, base, end, clock, span)?;
            return Ok(copy_padded(samples, out));
        }
        // frames with gaps between them: read each frame alone
        let frame_values = framing.n * stream.layout.kind.width();
        let mut exact = true;
        for (i, frame) in out.chunks_exact_mut(frame_values).enumerate() {
            let start = (job.first + i as u64) * hop;
            let samples = self.read(stream, start, start + n, clock, span)?;
            exact &= copy_padded(samples, frame);
        }
        Ok(exact)
    }

    /// Mono raw f32 frames back to back (hop = frame) into f32 batches: the file's bytes are read
    /// straight into the batch buffer (no conversion pass), then checked for NaN/inf as
    /// `raw::decode` checks them; samples past the analysed length are zeros.
    fn read_f32_in_place(
        &mut self,
        stream: &RangeStream,
        first: u64,
        out: &mut [f32],
        clock: &mut ThreadClock<'_>,
        (batch, id): (Option<u64>, Option<usize>),
    ) -> Result<()> {
        let layout = &stream.layout;
        let present = (stream.samples.saturating_sub(first) as usize).min(out.len());
        let (values, padding) = out.split_at_mut(present);
        padding.fill(0.0);
        let byte_offset = first * 4; // raw files: the samples start at byte 0
        open_file_of(&mut self.file, layout)?
            .read_exact_at(f32_bytes(values), layout.data_offset + byte_offset)
            .map_err(|e| FftdError::io(&layout.name, e))?;
        clock.lap_span(Phase::Read, batch, id);
        let all_finite = values.iter().fold(true, |ok, v| ok & v.is_finite());
        clock.lap_span(Phase::Decode, batch, id);
        match (!all_finite)
            .then(|| values.iter().position(|v| !v.is_finite()))
            .flatten()
        {
            Some(i) => Err(not_finite(layout, byte_offset, i, values[i])),
            None => Ok(()),
        }
    }

    /// Mono raw f32 samples into f64 batches (`--precision f64`) in one pass: the file's bytes
    /// are read into the upper half of the batch buffer, then widened in place from the front
    /// (value i is written over bytes 8i..8i+8, its f32 read first from byte 4·len + 4i, and
    /// no later f32 lies below that), instead of decoding into a scratch buffer and copying.
    fn read_f32_widened(
        &mut self,
        stream: &RangeStream,
        first: u64,
        out: &mut [f64],
        clock: &mut ThreadClock<'_>,
        (batch, id): (Option<u64>, Option<usize>),
    ) -> Result<()> {
        let layout = &stream.layout;
        let len = out.len();
        let present = (stream.samples.saturating_sub(first) as usize).min(len);
        let byte_offset = first * 4; // raw files: the samples start at byte 0
        let upper = &mut f64_bytes(out)[4 * len..];
        open_file_of(&mut self.file, layout)?
            .read_exact_at(&mut upper[..4 * present], layout.data_offset + byte_offset)
            .map_err(|e| FftdError::io(&layout.name, e))?;
        clock.lap_span(Phase::Read, batch, id);
        let bad = widen_in_place(out, present);
        out[present..].fill(0.0);
        clock.lap_span(Phase::Decode, batch, id);
        match bad {
            Some((i, v)) => Err(not_finite(layout, byte_offset, i, v)),
            None => Ok(()),
        }
    }

    /// The stream's values (`width` per sample) for samples `first..last`, cut at the analysed
    /// length (what lies beyond reads as zeros in `copy_padded`).
    fn read(
        &mut self,
        stream: &RangeStream,
        first: u64,
        last: u64,
        clock: &mut ThreadClock<'_>,
        (batch, id): (Option<u64>, Option<usize>),
    ) -> Result<&[f64]> {
        let layout = &stream.layout;
        let last = last.min(stream.samples);
        self.values.clear();
        if first >= last {
            return Ok(&self.values);
        }
        let bytes = usize::try_from((last - first) * layout.frame_bytes as u64)
            .map_err(|_| FftdError::input(layout.name.clone(), "range too large to read"))?;
        self.bytes.resize(bytes, 0);
        let offset = layout.data_offset + first * layout.frame_bytes as u64;
        open_file_of(&mut self.file, layout)?
            .read_exact_at(&mut self.bytes, offset)
            .map_err(|e| FftdError::io(&layout.name, e))?;
        clock.lap_span(Phase::Read, batch, id);
        layout.decode(&self.bytes, first, &mut self.values)?;
        if layout.channels > 1 {
            // splitting channels counts with decoding here (the copy into frames is `frame`)
            self.parts.resize_with(stream.splitter.streams(), Vec::new);
            stream.splitter.split(&mut self.values, &mut self.parts);
        }
        clock.lap_span(Phase::Decode, batch, id);
        if layout.channels == 1 {
            return Ok(&self.values);
        }
        Ok(&self.parts[stream.part])
    }
}

/// The open file of `layout`, opening it (and closing the previous one) when it changes.
fn open_file_of<'a>(
    open: &'a mut Option<(Arc<SeekableLayout>, File)>,
    layout: &Arc<SeekableLayout>,
) -> Result<&'a File> {
    let same = matches!(open, Some((current, _)) if Arc::ptr_eq(current, layout));
    if !same {
        *open = None; // close first: a thread holds one input open at a time
        *open = Some((layout.clone(), layout.open()?));
    }
    match open {
        Some((_, file)) => Ok(file),
        None => Err(FftdError::Runtime("range reader lost its file".into())),
    }
}

// raw f32 files are little-endian, read in place as host f32 values
const _: () = assert!(
    cfg!(target_endian = "little"),
    "fftd reads f32 in place: little-endian hosts only"
);

/// The bytes of `values`, to read a file's f32 samples straight into them.
fn f32_bytes(values: &mut [f32]) -> &mut [u8] {
    let len = std::mem::size_of_val(values);
    // SAFETY: the byte slice covers exactly the memory of `values` (u8 needs no alignment), its
    // lifetime is the borrow of `values`, and every bit pattern written is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), len) }
}

/// Widens the `present` f32 values that lie in the upper half of `out`'s bytes (from byte
/// 4·len) into `out[..present]`, front to back in blocks; the first non-finite value and its
/// index, if any.
fn widen_in_place(out: &mut [f64], present: usize) -> Option<(usize, f32)> {
    const BLOCK: usize = 1024;
    let len = out.len();
    let present = present.min(len);
    let base = out.as_mut_ptr();
    let mut bad = None;
    let mut block = [0f32; BLOCK];
    let mut i = 0;
    while i < present {
        let k = BLOCK.min(present - i);
        // SAFETY: the f32s i..i+k lie at bytes 4·len + 4i .. 4·len + 4(i+k) of `out` (4-aligned:
        // `out` is 8-aligned), within it as i + k <= present <= len; they are copied out before
        // any write of this block, and the block's writes (bytes 8i .. 8(i+k)) end at or below
        // 4·len + 4(i+k) since i + k <= len: no f32 still to be read is overwritten.
        unsafe {
            let src = base.cast::<u8>().add(4 * len + 4 * i).cast::<f32>();
            std::ptr::copy_nonoverlapping(src, block.as_mut_ptr(), k);
        }
        let values = &block[..k];
        if bad.is_none() && !values.iter().fold(true, |ok, v| ok & v.is_finite()) {
            bad = values
                .iter()
                .position(|v| !v.is_finite())
                .map(|j| (i + j, values[j]));
        }
        // SAFETY: values i..i+k of `out` (through the same pointer as the reads above); the
        // f32s they overlap were copied into `block` already.
        let dst = unsafe { std::slice::from_raw_parts_mut(base.add(i), k) };
        for (d, v) in dst.iter_mut().zip(values) {
            *d = f64::from(*v);
        }
        i += k;
    }
    bad
}

/// The bytes of `values` (f64 values widened in place, `JobReader::read_f32_widened`).
fn f64_bytes(values: &mut [f64]) -> &mut [u8] {
    let len = std::mem::size_of_val(values);
    // SAFETY: the byte slice covers exactly the memory of `values` (u8 needs no alignment), its
    // lifetime is the borrow of `values`, and every bit pattern written is a valid f64.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), len) }
}

/// The error for raw f32 sample `i` of a read that starts `byte_offset` bytes into the data:
/// `value`, not a finite number (as `raw::decode` words it).
fn not_finite(layout: &SeekableLayout, byte_offset: u64, i: usize, value: f32) -> FftdError {
    let at = byte_offset + 4 * i as u64;
    let message = format!(
        "value at byte offset {at} is {}, not a finite number",
        value as f64
    );
    FftdError::input(layout.name.clone(), message)
}

/// Fills `frame` from `values` (converted to `T`), zeros past their end; whether every value
/// was exactly a `T`.
fn copy_padded<T: Sample>(values: &[f64], frame: &mut [T]) -> bool {
    let take = values.len().min(frame.len());
    let mut exact = true;
    for (d, v) in frame[..take].iter_mut().zip(values) {
        *d = T::of_f64(*v);
        exact &= d.into_f64() == *v;
    }
    frame[take..].fill(T::zero());
    exact
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f32s in the upper half of an f64 buffer's bytes, as `read_f32_widened` reads them.
    fn upper_half(values: &[f32], len: usize) -> Vec<f64> {
        let mut out = vec![f64::NAN; len];
        let bytes = f64_bytes(&mut out);
        for (i, v) in values.iter().enumerate() {
            bytes[4 * len + 4 * i..4 * len + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    #[test]
    fn f32_samples_widen_in_place_exactly() {
        for (len, present) in [
            (1, 1),
            (5, 5),
            (3000, 3000),
            (3000, 2049),
            (1024, 1),
            (4096, 0),
        ] {
            let values: Vec<f32> = (0..present)
                .map(|i| (i as f32 * 0.37).sin() * 1e3)
                .collect();
            let mut out = upper_half(&values, len);
            assert_eq!(widen_in_place(&mut out, present), None);
            let want: Vec<f64> = values.iter().map(|v| f64::from(*v)).collect();
            assert_eq!(&out[..present], &want[..], "len {len} present {present}");
        }
    }

    #[test]
    fn the_first_non_finite_sample_is_named() {
        let mut values = vec![1.0f32; 2500];
        values[1500] = f32::INFINITY;
        values[2000] = f32::NAN;
        let mut out = upper_half(&values, 2500);
        assert_eq!(widen_in_place(&mut out, 2500), Some((1500, f32::INFINITY)));
    }
}
