//! Encode stage: several threads between the FFT workers and the sink. Each takes a transformed
//! batch (`Done`), applies `--fftshift`, encodes every frame with the format's `Encoder` into one
//! byte buffer per batch, grouped by output (a batch can hold frames of several `--output-dir`
//! files; each output's frames keep their order), gives the spectra buffer back to the workers'
//! pool and passes `Encoded` on. The sink only puts batches back in order and writes.
//! Rows of a placed output (`sink::placed`) are written straight into its file here instead, and
//! their part carries no bytes.
//! With `--serve` every row is also folded into the live view's display rows, and encoded as
//! NDJSON for `/spectra` while someone reads it (`LiveTap`).

use super::batcher::FrameMeta;
use super::pool::{BufferPool, BytePool};
use super::worker::{Done, FinishedBatches};
use super::Control;
use crate::error::FftdError;
use crate::serve::display::Fold;
use crate::serve::hub::{LiveHub, LiveRow, LiveRows};
use crate::sink::placed::PlacedOutputs;
use crate::sink::{Encoder, RowMark, SpectrumRow};
use crate::stats::Counters;
use crate::timeline::{Kind, Phase};
use crate::types::StreamMeta;
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
pub(super) struct Encoded {
    pub id: u64,
    /// Frame size and frequency bins per frame of every frame of the batch (a row holds `bins`
    /// values, or `2 * bins` with `--scale complex`).
    pub n: usize,
    pub bins: usize,
    /// The batch's frames, grouped by output (in `parts` order), each output's in frame order.
    pub frames: Vec<FrameMeta>,
    pub parts: Vec<Part>,
    pub bytes: Vec<u8>,
    /// Every row, parallel to `frames`, when rows go out as messages (`--output nats://`).
    pub marks: Vec<RowMark>,
    /// The rows as NDJSON for `/spectra`, when someone reads it.
    pub live: Option<Arc<LiveRows>>,
    /// issue 27: with `--alert`, each row's stream and time (in `frames` order) and every rule's
    /// level (rules × rows), which the sink follows in order.
    pub alert_rows: Vec<(usize, f64)>,
    pub alert_levels: Vec<f64>,
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
    tx: Sender<Encoded>,
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
) -> Result<Encoded, String> {
    let Done {
        id,
        spec,
        frames,
        values,
        columns,
        .. // segments end in the averaging stage
    } = done;
    let bins = columns.unwrap_or(spec.bins());
    let per_bin = spec.scale.values_per_bin();
    let width = bins * per_bin;
    // issue 27: `--alert` rules' own values at the rows' end (with --bands), not written
    let hidden = stage.alerts.map_or(0, |l| l.hidden()).min(width);
    let (order, frames) = by_output(frames, stage.output_of);
    let mut rows = RowsEncoded::new(stage, frames.len());
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
    stage.values_pool.give(values);
    if let Some(tap) = &stage.live {
        tap.hub.merge_folds(&mut scratch.folds);
    }
    Ok(rows.finish(id, (spec.n, bins), frames))
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
}

impl<'s, 'a, T: Sample> RowsEncoded<'s, 'a, T> {
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
        let output = stage.output_of[frame.stream];
        match self.parts.last_mut() {
            Some(p) if p.output == output => {}
            _ => self.parts.push(Part {
                output,
                frames: k..k,
                bytes: self.bytes.len()..self.bytes.len(),
            }),
        }
        if let Some(levels) = stage.alerts {
            self.alert_rows.push((frame.stream, row.time_s));
            let values = if levels.hidden() > 0 {
                full
            } else {
                row.values
            };
            levels.measure(frame.stream, values, &mut self.alert_levels);
        }
        let row_start = self.bytes.len();
        match stage.placed.get(output) {
            Some(file) => file.write_row(frame.seq, |out| stage.encoder.encode_into(row, out))?,
            None => stage.encoder.encode(row, &mut self.bytes),
        }
        if stage.mark_rows {
            let part_start = self.parts.last().map_or(0, |p| p.bytes.start);
            self.marks.push(RowMark {
                stream: frame.stream,
                frame: row.frame,
                time_s: row.time_s,
                bytes: row_start - part_start..self.bytes.len() - part_start,
            });
        }
        if let Some(tap) = &stage.live {
            tap.fold(row, &mut scratch.folds);
            if let Some(live) = self.live_rows.as_mut() {
                tap.encode(row, live);
            }
        }
        if let Some(p) = self.parts.last_mut() {
            p.frames.end = k + 1;
            p.bytes.end = self.bytes.len();
        }
        Ok(())
    }

    fn finish(self, id: u64, (n, bins): (usize, usize), frames: Vec<FrameMeta>) -> Encoded {
        Encoded {
            id,
            n,
            bins,
            frames,
            parts: self.parts,
            bytes: self.bytes,
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
        let at = match folds.iter().rposition(|(s, _)| *s == stream) {
            Some(at) => at,
            None => {
                let columns = self.hub.level.columns(values.len());
                folds.push((stream, Fold::new(row.n, columns)));
                folds.len() - 1
            }
        };
        folds[at]
            .1
            .add(self.hub.level, row.frame, row.time_s, values);
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
