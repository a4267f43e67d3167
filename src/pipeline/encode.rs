//! Encode stage: several threads between the FFT workers and the sink. Each takes a transformed
//! batch (`Done`), applies `--fftshift`, encodes every frame with the format's `Encoder` into one
//! byte buffer per batch, grouped by output (a batch can hold frames of several `--output-dir`
//! files; each output's frames keep their order), gives the spectra buffer back to the workers'
//! pool and passes `Encoded` on. The sink only puts batches back in order and writes.
//! Rows of a placed output (`sink::placed`) are written straight into its file here instead, and
//! their part carries no bytes. Where a format's bytes of a row are the row's values as they lie
//! in memory (f32 rows of f32 spectra, npy), the batch's spectra buffer itself goes on to the
//! sink, which writes from it and gives it back to the workers' pool: no encoder copies a row
//! (`Encoded::values`, issue 41). So do f32 rows an f64 run's device narrowed (`Done::rows`,
//! `pass_narrowed`), or, where they cannot, they are copied as they are: nothing is encoded.
//! With `--serve` every row is also folded into the live view's display rows, and encoded as
//! NDJSON for `/spectra` while someone reads it (`LiveTap`).

use super::batcher::FrameMeta;
use super::pool::{BufferPool, BytePool};
use super::worker::{Done, FinishedBatches};
use super::Control;
use crate::error::FftdError;
use crate::fft::{Carry, HostBuf};
use crate::products::Finish;
use crate::serve::display::Fold;
use crate::serve::hub::{LiveHub, LiveRow, LiveRows};
use crate::sink::placed::PlacedOutputs;
use crate::sink::{Encoder, RowMark, SpectrumRow};
use crate::stats::Counters;
use crate::timeline::{Kind, Phase};
use crate::types::StreamMeta;
use crate::types::Tuning;
use crate::types::{InputKind, Sample};
use crossbeam_channel::Sender;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// One output's share of an encoded batch.
pub(super) struct Part {
    pub output: usize,
    /// Its frames: a range of `Encoded::frames`.
    pub frames: Range<usize>,
    /// Its bytes: a range of `Encoded::bytes`.
    pub bytes: Range<usize>,
}

/// A batch turned into bytes, ready to write.
pub(super) struct Encoded<T: Sample> {
    pub id: u64,
    /// Frame size and frequency bins per frame of every frame of the batch (a row holds `bins`
    /// values, or `2 * bins` with `--scale complex`).
    pub n: usize,
    pub bins: usize,
    /// The batch's frames, grouped by output (in `parts` order), each output's in frame order.
    pub frames: Vec<FrameMeta>,
    pub parts: Vec<Part>,
    pub bytes: Vec<u8>,
    /// The batch's spectra, when their memory is the rows' bytes (then `bytes` is empty and
    /// `parts` index these): the sink writes them and gives them back to the workers' pool.
    pub values: Option<HostBuf<T>>,
    /// Every row, parallel to `frames`, when rows go out as messages (`--output nats://`).
    pub marks: Vec<RowMark>,
    /// The rows as NDJSON for `/spectra`, when someone reads it.
    pub live: Option<Arc<LiveRows>>,
    /// issue 27: with `--alert`, each row's stream and time (in `frames` order) and every rule's
    /// level (rules × rows), which the sink follows in order.
    pub alert_rows: Vec<(usize, f64)>,
    pub alert_levels: Vec<f64>,
}

impl<T: Sample> Encoded<T> {
    /// The rows' bytes, which `parts` index.
    pub(super) fn row_bytes(&self) -> &[u8] {
        match &self.values {
            Some(values) => memory_bytes(values),
            None => &self.bytes,
        }
    }
}

/// `values` as the bytes they lie in memory (`Sample` is sealed to f32 and f64).
fn memory_bytes<T: Sample>(values: &[T]) -> &[u8] {
    // SAFETY: T is f32 or f64 (`Sample` is sealed): no padding and no invalid byte patterns;
    // u8 has alignment 1; the slice covers exactly the values' memory and borrows it for the
    // same lifetime.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// The encode stage's end of the live view (`--serve`).
pub(super) struct LiveTap<'a, T: Sample> {
    pub hub: &'a LiveHub,
    /// NDJSON, for `/spectra`.
    pub rows: &'a dyn Encoder<T>,
    /// Measurement values at the end of each row (`products::measure`), not drawn.
    pub extras: usize,
    /// `--cross`: the bins of its rows, whose |H1| in dB (`h1_db`) is drawn.
    pub cross_bins: Option<usize>,
}

/// An encode thread's scratch for the live view: one batch's folds, per stream.
#[derive(Default)]
struct LiveScratch {
    folds: Vec<(usize, Fold)>,
}

/// What the encode threads share.
pub(super) struct EncodeStage<'a, T: Sample> {
    pub encoder: &'a dyn Encoder<T>,
    pub streams: &'a [StreamMeta],
    /// Output index of each stream.
    pub output_of: &'a [usize],
    /// Where spent spectra buffers go back to the workers.
    pub values_pool: &'a BufferPool<T>,
    pub bytes_pool: &'a BytePool,
    /// Outputs whose rows are written in place by these threads.
    pub placed: &'a PlacedOutputs,
    pub live: Option<LiveTap<'a, T>>,
    /// Whether each row's place is marked (`Encoded::marks`), for outputs that send a message
    /// per row.
    pub mark_rows: bool,
    /// issue 27: `--alert`'s band levels, measured here.
    pub alerts: Option<&'a crate::alerts::level::BandLevels>,
}

pub(super) fn run_encoder<T: Sample>(
    rx: FinishedBatches<T>,
    tx: Sender<Encoded<T>>,
    stage: &EncodeStage<'_, T>,
    control: &Control,
) {
    let mut shifted: Vec<T> = Vec::new();
    let mut scratch = LiveScratch::default();
    let mut clock = control.clock(Kind::Encoder, Phase::EncodeInput);
    for done in rx.iter() {
        let (id, stream) = (done.id, done.frames.first().map(|f| f.stream));
        clock.lap(Phase::EncodeInput);
        let busy = Instant::now();
        let encoded = encode_batch(done, stage, &mut shifted, &mut scratch);
        Counters::add_since(&control.counters.encode_ns, busy);
        if let Some(e) = encoded.as_ref().ok().filter(|e| e.values.is_some()) {
            Counters::add(&control.counters.rows_uncopied, e.frames.len() as u64);
        }
        clock.lap_span(Phase::Encode, Some(id), stream);
        let encoded = match encoded {
            Ok(encoded) => encoded,
            Err(e) => {
                control.fail(FftdError::Runtime(format!("placing a row: {e}")));
                break;
            }
        };
        let sent = tx.send(encoded).is_ok();
        clock.lap_span(Phase::EncodeOutput, Some(id), stream);
        if !sent {
            break;
        }
    }
}

fn encode_batch<T: Sample>(
    done: Done<T>,
    stage: &EncodeStage<'_, T>,
    shifted: &mut Vec<T>,
    scratch: &mut LiveScratch,
) -> Result<Encoded<T>, String> {
    if done.rows == Carry::F32 {
        // rows as the engine gave them: an averaged batch is never narrowed (`rows_read`)
        debug_assert!(
            done.pending == Finish::AS_IS,
            "a scale pending on narrowed rows"
        );
        return pass_narrowed(done, stage);
    }
    let Done {
        id,
        spec,
        frames,
        mut values,
        columns,
        pending,
        .. // segments end in the averaging stage
    } = done;
    pending.finish_in_place(&mut values);
    let bins = columns.unwrap_or(spec.bins());
    let per_bin = spec.scale.values_per_bin();
    let width = bins * per_bin;
    // issue 27: `--alert` rules' own values at the rows' end (with --bands), not written
    let hidden = stage.alerts.map_or(0, |l| l.hidden()).min(width);
    let (order, frames) = by_output(frames, stage.output_of);
    let memory = width * std::mem::size_of::<T>();
    let in_place = hidden == 0
        && rows_in_memory(stage, (&order, &frames), (width, memory), columns.is_some())
        && stage.values_pool.can_spare(&values);
    let mut rows = RowsEncoded::new(stage, frames.len());
    rows.in_place = in_place.then_some(memory);
    for (k, (&i, frame)) in order.iter().zip(&frames).enumerate() {
        let stream = &stage.streams[frame.stream];
        let full = &values[i * width..(i + 1) * width];
        let mut row_values = &full[..width - hidden];
        if stream.fftshift && stream.kind == InputKind::Complex && columns.is_none() {
            shifted.clear();
            shifted.extend_from_slice(row_values);
            // whole bins: (re, im) pairs move together
            shifted.rotate_left(bins.div_ceil(2) * per_bin);
            row_values = shifted;
        }
        let row = SpectrumRow {
            stream,
            frame: frame.seq,
            time_s: frame.time_s.unwrap_or(frame.start as f64 / stream.rate),
            n: spec.n,
            frames: frame.frames,
            values: row_values,
        };
        rows.add(k, frame, (&row, full), scratch)?;
    }
    let values = match in_place {
        true => Some(values),
        false => {
            stage.values_pool.give(values);
            None
        }
    };
    if let Some(tap) = &stage.live {
        tap.hub.merge_folds(&mut scratch.folds);
    }
    // the bins written: npy's shape counts these, not the alert rules' values after them
    let written_bins = (width - hidden) / per_bin;
    Ok(rows.finish(id, (spec.n, written_bins), (frames, values)))
}

/// A batch whose rows came back narrowed to f32 (`Done::rows`: the output writes f32 values
/// and nothing before it reads them, `dispatch::carriage`): its rows are the format's bytes
/// already. They go on in the spectra's memory where `rows_in_memory` allows, else they are
/// copied as they are into their place (a placed file, the batch's bytes); nothing is encoded.
fn pass_narrowed<T: Sample>(
    done: Done<T>,
    stage: &EncodeStage<'_, T>,
) -> Result<Encoded<T>, String> {
    let (width, bins) = (done.width(), done.columns());
    let Done {
        id,
        spec,
        frames,
        values,
        columns,
        ..
    } = done;
    let (order, frames) = by_output(frames, stage.output_of);
    let row_bytes = width * 4;
    let in_place = rows_in_memory(
        stage,
        (&order, &frames),
        (width, row_bytes),
        columns.is_some(),
    ) && stage.values_pool.can_spare(&values);
    let mut rows = RowsEncoded::new(stage, frames.len());
    rows.in_place = in_place.then_some(row_bytes);
    let narrowed = &memory_bytes(&values)[..values.len() * 4];
    for (k, (&i, frame)) in order.iter().zip(&frames).enumerate() {
        let rate = stage.streams[frame.stream].rate;
        let time_s = frame.time_s.unwrap_or(frame.start as f64 / rate);
        rows.add_made(
            k,
            frame,
            time_s,
            &narrowed[i * row_bytes..(i + 1) * row_bytes],
        )?;
    }
    let values = match in_place {
        true => Some(values),
        false => {
            stage.values_pool.give(values);
            None
        }
    };
    Ok(rows.finish(id, (spec.n, bins), (frames, values)))
}

/// Whether a batch's rows, `width` values of `memory` bytes each, go to the sink as the
/// spectra's own memory: the format writes a row as those bytes (`row_bytes` is their size: f32
/// rows of f32 spectra or narrowed on a device, npy in the run's precision), on a little-endian
/// machine; every row whole and in batch order (one output, or the frames already grouped by
/// output); no row shifted (`--fftshift`), placed in a file or marked for messages. (And the
/// buffer can be spared while the sink holds it, `BufferPool::can_spare`: on an H100 with 16
/// cores, f32 rows of frame 4096 to /dev/null took 0.82x as fast when every pinned buffer
/// waited in the sink's window.)
fn rows_in_memory<T: Sample>(
    stage: &EncodeStage<'_, T>,
    (order, frames): (&[usize], &[FrameMeta]),
    (width, memory): (usize, usize),
    columns: bool,
) -> bool {
    let shifted = |f: &FrameMeta| {
        let s = &stage.streams[f.stream];
        s.fftshift && s.kind == InputKind::Complex && !columns
    };
    cfg!(target_endian = "little")
        && stage.encoder.row_bytes(width) == Some(memory)
        && !stage.mark_rows
        && order.iter().enumerate().all(|(k, &i)| k == i)
        && !frames
            .iter()
            .any(|f| shifted(f) || stage.placed.get(stage.output_of[f.stream]).is_some())
}

/// A batch's frames grouped by output, each output's in batch order (a stable sort; one output:
/// nothing to do), and for each the index of its values in the batch.
fn by_output(mut frames: Vec<FrameMeta>, output_of: &[usize]) -> (Vec<usize>, Vec<FrameMeta>) {
    let mut order: Vec<usize> = (0..frames.len()).collect();
    let output = |f: &FrameMeta| output_of[f.stream];
    if frames.windows(2).any(|w| output(&w[0]) != output(&w[1])) {
        order.sort_by_key(|&i| output(&frames[i]));
        frames = order.iter().map(|&i| frames[i]).collect();
    }
    (order, frames)
}

/// One batch's rows as they are encoded: the bytes and each output's part of them, the row
/// marks, the alert levels and the live view's rows.
struct RowsEncoded<'s, 'a, T: Sample> {
    stage: &'s EncodeStage<'a, T>,
    bytes: Vec<u8>,
    parts: Vec<Part>,
    marks: Vec<RowMark>,
    alert_rows: Vec<(usize, f64)>,
    alert_levels: Vec<f64>,
    live_rows: Option<LiveRows>,
    /// Bytes per row when the rows stay in the spectra's memory (`rows_in_memory`): nothing is
    /// encoded, the parts index that memory.
    in_place: Option<usize>,
    /// Bytes of the rows in place so far.
    in_place_len: usize,
}

impl<'s, 'a, T: Sample> RowsEncoded<'s, 'a, T> {
    /// Bytes of the batch's rows so far (encoded, or in place).
    fn len(&self) -> usize {
        self.bytes.len() + self.in_place_len
    }

    fn new(stage: &'s EncodeStage<'a, T>, frames: usize) -> Self {
        let live_rows = (stage.live.as_ref())
            .filter(|tap| tap.hub.rows_wanted())
            .map(|_| LiveRows {
                rows: Vec::with_capacity(frames),
                bytes: Vec::new(),
            });
        RowsEncoded {
            stage,
            bytes: stage.bytes_pool.take(),
            parts: Vec::new(),
            marks: Vec::with_capacity(if stage.mark_rows { frames } else { 0 }),
            alert_rows: Vec::new(),
            alert_levels: Vec::new(),
            live_rows,
            in_place: None,
            in_place_len: 0,
        }
    }

    /// Encodes row `k` of the batch (frame `frame`) into its output's part (or its placed file);
    /// `full`: the row with the alert rules' own values (`BandLevels::hidden`).
    fn add(
        &mut self,
        k: usize,
        frame: &FrameMeta,
        (row, full): (&SpectrumRow<'_, T>, &[T]),
        scratch: &mut LiveScratch,
    ) -> Result<(), String> {
        let stage = self.stage;
        let output = self.open_part(k, frame);
        if let Some(levels) = stage.alerts {
            self.alert_rows.push((frame.stream, row.time_s));
            let values = if levels.hidden() > 0 {
                full
            } else {
                row.values
            };
            levels.measure(frame.stream, values, &mut self.alert_levels);
        }
        let row_start = self.len();
        match (self.in_place, stage.placed.get(output)) {
            (Some(bytes), _) => self.in_place_len += bytes,
            (None, Some(file)) => {
                file.write_row(frame.seq, |out| stage.encoder.encode_into(row, out))?
            }
            (None, None) => stage.encoder.encode(row, &mut self.bytes),
        }
        if let Some(tap) = &stage.live {
            tap.fold(row, &mut scratch.folds);
            if let Some(live) = self.live_rows.as_mut() {
                tap.encode(row, live);
            }
        }
        self.close_row(k, frame, (row_start, row.time_s));
        Ok(())
    }

    /// Adds row `k` of the batch (frame `frame`, at `time_s`) whose bytes the device made
    /// (`pass_narrowed`): in place, or copied as they are.
    fn add_made(
        &mut self,
        k: usize,
        frame: &FrameMeta,
        time_s: f64,
        bytes: &[u8],
    ) -> Result<(), String> {
        let output = self.open_part(k, frame);
        let row_start = self.len();
        match (self.in_place, self.stage.placed.get(output)) {
            (Some(len), _) => self.in_place_len += len,
            (None, Some(file)) => file.write_row(frame.seq, |out| out.copy_from_slice(bytes))?,
            (None, None) => self.bytes.extend_from_slice(bytes),
        }
        self.close_row(k, frame, (row_start, time_s));
        Ok(())
    }

    /// The output of row `k` (frame `frame`), with a new part when it is not the last part's.
    fn open_part(&mut self, k: usize, frame: &FrameMeta) -> usize {
        let output = self.stage.output_of[frame.stream];
        match self.parts.last_mut() {
            Some(p) if p.output == output => {}
            _ => self.parts.push(Part {
                output,
                frames: k..k,
                bytes: self.len()..self.len(),
            }),
        }
        output
    }

    /// Row `k` (frame `frame`, its bytes from `row_start`, at `time_s`) is in: marked for
    /// messages, its part grown to it.
    fn close_row(&mut self, k: usize, frame: &FrameMeta, (row_start, time_s): (usize, f64)) {
        if self.stage.mark_rows {
            let part_start = self.parts.last().map_or(0, |p| p.bytes.start);
            self.marks.push(RowMark {
                stream: frame.stream,
                frame: frame.seq,
                time_s,
                bytes: row_start - part_start..self.len() - part_start,
            });
        }
        let end = self.len();
        if let Some(p) = self.parts.last_mut() {
            p.frames.end = k + 1;
            p.bytes.end = end;
        }
    }

    fn finish(
        self,
        id: u64,
        (n, bins): (usize, usize),
        (frames, values): (Vec<FrameMeta>, Option<HostBuf<T>>),
    ) -> Encoded<T> {
        Encoded {
            id,
            n,
            bins,
            frames,
            parts: self.parts,
            bytes: self.bytes,
            values,
            marks: self.marks,
            live: self.live_rows.map(Arc::new),
            alert_rows: self.alert_rows,
            alert_levels: self.alert_levels,
        }
    }
}

impl<T: Sample> LiveTap<'_, T> {
    /// Folds a row into this batch's fold of its stream.
    fn fold(&self, row: &SpectrumRow<'_, T>, folds: &mut Vec<(usize, Fold)>) {
        let stream = row.stream.id;
        let values = match self.cross_bins {
            Some(bins) => row.values.get(3 * bins..4 * bins).unwrap_or_default(),
            None => &row.values[..row.values.len().saturating_sub(self.extras)],
        };
        let band = row.stream.tuning.as_ref().and_then(|t| t.band);
        let at = match folds.iter().rposition(|(s, _)| *s == stream) {
            Some(at) => at,
            None => {
                let fold = match band {
                    Some(band) => Fold::new_band(row.n, band.bins),
                    None => Fold::new(row.n, self.hub.level.columns(values.len())),
                };
                folds.push((stream, fold));
                folds.len() - 1
            }
        };
        let level = self.hub.level;
        match band {
            // a sweep's hop: its bins' place in the band, from which hop the row is
            Some(band) => {
                let sample = Tuning::sample_at_time(row.time_s, row.stream.rate);
                let hop = (row.stream.tuning.as_ref()).map_or(0, |t| t.capture_index_at(sample));
                let first = band.first_bin_of(hop);
                folds[at]
                    .1
                    .add_at(level, (row.frame, row.time_s), values, first)
            }
            None => folds[at].1.add(level, row.frame, row.time_s, values),
        }
    }

    /// Appends a row's NDJSON line.
    fn encode(&self, row: &SpectrumRow<'_, T>, live: &mut LiveRows) {
        let start = live.bytes.len();
        self.rows.encode(row, &mut live.bytes);
        live.rows.push(LiveRow {
            stream: row.stream.id,
            frame: row.frame,
            bytes: start..live.bytes.len(),
        });
    }
}
