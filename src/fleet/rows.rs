//! What a fleet worker does to one block: frames it exactly as a local run would (zero-padding
//! past its samples), transforms the frames with the worker's engine, and encodes its rows in the
//! run's `--format`, batched into messages (`batch`) or one message per row, with headers saying what the row is and a `Nats-Msg-Id` naming
//! it by source, run, stream, frame and analysis (`ids`): a redelivered block's rows are then
//! recognised as duplicates, while another analysis of the same blocks makes new rows.

use super::batch::{Packing, Row, RowsOf};
use super::block::{decode_samples, BlockHeader};
use super::ids::Origin;
use super::publish_acked::Outgoing;
use crate::error::{FftdError, Result};
use crate::fft::{Engine, TransformSpec};
use crate::products::Shaping;
use crate::sink::analysis::Analysis;
use crate::sink::{Encoder, SpectrumRow};
use crate::types::fingerprint;
use crate::types::StreamMeta;
use crate::types::{InputKind, Sample};
use async_nats::jetstream::Message;
use async_nats::HeaderMap;
use std::sync::Arc;

/// What becomes of a message from the work stream.
pub(crate) enum Taken {
    /// The block's rows and its sample count.
    /// The block's messages, its sample count and its row count.
    Rows(Vec<Outgoing>, u64, u64),
    /// A message that is no fftd block (no `fftd-` headers): terminated, with a warning.
    NotABlock(String),
    /// A block from fftd that cannot be read (bad headers, a damaged payload): it would fail
    /// every worker alike, so it is terminated, and the worker fails at exit naming it.
    Unreadable(String),
}

/// Whether a message carries fftd block headers at all.
fn is_from_fftd(message: &Message) -> bool {
    message.headers.as_ref().is_some_and(|h| {
        h.iter()
            .any(|(name, _)| AsRef::<str>::as_ref(name).starts_with("fftd-"))
    })
}

/// What makes two workers' rows of one frame different: everything but the engine that made
/// them (any engine's rows are the same spectrum). Workers sharing a consumer agree on it.
/// Products (`--bands`, `--fmin`/`--fmax`, and a local run's `--average`) make other rows too.
pub(crate) fn analysis_of(analysis: &Analysis, n: usize, hop: usize) -> String {
    fingerprint(&analysis.description(n, hop))
}

/// A worker's transform state: the engine, the encoder, the per-frame products and scratch
/// buffers.
pub(crate) struct Work<'a, T: Sample> {
    analysis_spec: &'a Analysis,
    n: usize,
    hop: usize,
    engine: &'a mut dyn Engine<T>,
    encoder: &'a dyn Encoder<T>,
    /// `analysis_of` the worker's settings, the last part of its rows' ids.
    analysis: String,
    /// `--bands`, `--fmin`/`--fmax`: planned for each kind and rate of the blocks met.
    products: Vec<BlockProducts>,
    input: Vec<T>,
    spectra: Vec<T>,
    /// Product rows of a block (`--bands`, `--fmin`/`--fmax`).
    shaped: Vec<T>,
    shifted: Vec<T>,
    /// How rows become messages (`batch`).
    packing: Packing,
}

/// What `Work::encode_rows` encodes: the products' columns (None: the spectra's bins), each row's
/// (frame, time_s, frames), and the rows' values when they are not the block's own (`--average`).
type RowsIn<'r, T> = (
    Option<Arc<Vec<f64>>>,
    &'r [(u64, f64, u32)],
    Option<&'r [T]>,
);

/// The per-frame products for the blocks of one kind and rate (as a local run plans them per
/// stream: `products::Shaping`), and the frequency of each column they make.
struct BlockProducts {
    kind: InputKind,
    rate: f64,
    shaping: Shaping,
    columns: Arc<Vec<f64>>,
}

impl<'a, T: Sample> Work<'a, T> {
    pub(crate) fn new(
        analysis_spec: &'a Analysis,
        (n, hop): (usize, usize),
        engine: &'a mut dyn Engine<T>,
        encoder: &'a dyn Encoder<T>,
        packing: Packing,
    ) -> Self {
        Work {
            analysis_spec,
            n,
            hop,
            engine,
            encoder,
            analysis: analysis_of(analysis_spec, n, hop),
            products: Vec::new(),
            input: Vec::new(),
            spectra: Vec::new(),
            shaped: Vec::new(),
            shifted: Vec::new(),
            packing,
        }
    }

    /// What to do with one message from the work stream: its rows, ready to publish, and its
    /// sample count; or why it is not taken. A block cut with another framing is an error (the
    /// block goes back to the queue for a worker that matches).
    pub(crate) fn rows_of(&mut self, message: &Message, subject: &str) -> Result<Taken> {
        let header = match BlockHeader::from_headers(message.headers.as_ref()) {
            Ok(h) => h,
            Err(e) if is_from_fftd(message) => {
                return Ok(Taken::Unreadable(format!(
                    "a block on '{}' with bad headers: {e}",
                    message.subject
                )))
            }
            Err(e) => return Ok(Taken::NotABlock(e)),
        };
        let shape = &header.shape;
        if shape.n != self.n || shape.hop != self.hop {
            return Err(FftdError::Usage(format!(
                "{} was cut with --frame {} --hop {}; this worker runs --frame {} --hop {}: start workers with the publisher's framing",
                header.describe(),
                shape.n,
                shape.hop,
                self.n,
                self.hop
            )));
        }
        let samples = match decode_samples(&header, &message.payload) {
            Ok(samples) => samples,
            // a damaged block would fail every worker the same way
            Err(e) => return Ok(Taken::Unreadable(e)),
        };
        self.frame_block(&header, &samples);
        let spec = TransformSpec {
            n: self.n,
            kind: shape.kind,
            window: self.analysis_spec.window,
            scale: (self.analysis_spec.products).engine_scale(self.analysis_spec.scale),
            rate: shape.rate,
        };
        self.engine
            .process(&spec, &self.input, header.frames, &mut self.spectra)
            .map_err(|e| FftdError::Runtime(format!("FFT engine {}: {e}", self.engine.name())))?;
        let columns = self.shape(&header, &spec)?;
        let mut count = header.frames as u64;
        let rows = match self.analysis_spec.products.average {
            Some(average) => {
                let (messages, rows) = self.average(&header, &spec, (columns, average), subject)?;
                count = rows;
                messages
            }
            None => {
                let frames = (0..header.frames as u64).map(|j| {
                    let frame = header.first_frame + j;
                    (frame, (frame * self.hop as u64) as f64 / shape.rate, 1)
                });
                let rows = frames.collect::<Vec<_>>();
                self.encode_rows(&header, &spec, (columns, &rows, None), subject)
            }
        };
        Ok(Taken::Rows(rows, header.samples as u64, count))
    }

    /// `--average`: the block's groups reduced (`super::average`), then encoded; a block not cut
    /// on group boundaries is a usage error (it goes back to the queue).
    fn average(
        &mut self,
        header: &BlockHeader,
        spec: &TransformSpec,
        (columns, average): (Option<Arc<Vec<f64>>>, crate::products::average::AverageSpec),
        subject: &str,
    ) -> Result<(Vec<Outgoing>, u64)> {
        let bins = columns.as_ref().map_or(spec.bins(), |c| c.len());
        let width = bins * spec.scale.values_per_bin();
        let power = if columns.is_some() {
            &self.shaped
        } else {
            &self.spectra
        };
        let products = &self.analysis_spec.products;
        let finish = crate::products::finish_for_scale(self.analysis_spec.scale, products, spec.n);
        let averaged =
            super::average::average_block((average, products.mode, finish), header, power, width)
                .map_err(FftdError::Usage)?;
        let messages = self.encode_rows(
            header,
            spec,
            (columns, &averaged.rows, Some(&averaged.values)),
            subject,
        );
        Ok((messages, averaged.rows.len() as u64))
    }

    /// The block's product rows in `shaped` (`--bands`, `--fmin`/`--fmax`), and the frequency of
    /// each of their columns; None without products. Products that cannot be made for the
    /// block's stream (a range above its Nyquist, bands of complex input) are a usage error:
    /// the block goes back to the queue.
    fn shape(
        &mut self,
        header: &BlockHeader,
        spec: &TransformSpec,
    ) -> Result<Option<Arc<Vec<f64>>>> {
        if self.analysis_spec.products.is_plain() {
            return Ok(None);
        }
        let shape = &header.shape;
        let planned = self
            .products
            .iter()
            .position(|p| p.kind == shape.kind && p.rate == shape.rate);
        let at = match planned {
            Some(at) => at,
            None => {
                let mut meta = [self.stream_meta(header)];
                let products = &self.analysis_spec.products;
                let made = Shaping::new(
                    &mut meta,
                    self.n,
                    products,
                    (self.analysis_spec.scale, self.analysis_spec.window),
                )
                .map_err(|e| FftdError::Usage(format!("{}: {e}", header.describe())))?;
                let (Some(shaping), Some(columns)) = (made, meta[0].columns.take()) else {
                    return Ok(None); // no products
                };
                self.products.push(BlockProducts {
                    kind: shape.kind,
                    rate: shape.rate,
                    shaping,
                    columns,
                });
                self.products.len() - 1
            }
        };
        let products = &self.products[at];
        let width = products.columns.len() * spec.scale.values_per_bin();
        self.shaped.clear();
        self.shaped.resize(header.frames * width, T::zero());
        let frames = header.frames;
        products
            .shaping
            .shape(spec, frames, &self.spectra, &mut self.shaped);
        Ok(Some(products.columns.clone()))
    }

    /// What the encoder needs to know of the block's stream.
    fn stream_meta(&self, header: &BlockHeader) -> StreamMeta {
        let shape = &header.shape;
        StreamMeta {
            id: shape.stream,
            input: shape.source.clone(),
            channel: shape.channel,
            rate: shape.rate,
            kind: shape.kind,
            fftshift: self.analysis_spec.fftshift,
            columns: None,
            tuning: None,
        }
    }

    /// Frame j of the block: samples `j·hop .. j·hop + n` of the block, zero-padded past its end.
    fn frame_block(&mut self, header: &BlockHeader, samples: &[f32]) {
        let w = header.shape.kind.width();
        let frame_values = self.n * w;
        self.input.clear();
        self.input.resize(header.frames * frame_values, T::zero());
        for j in 0..header.frames {
            let from = (j * self.hop * w).min(samples.len());
            let to = (from + frame_values).min(samples.len());
            let dest = &mut self.input[j * frame_values..];
            for (d, s) in dest.iter_mut().zip(&samples[from..to]) {
                *d = T::of_f64(f64::from(*s));
            }
        }
    }

    /// The block's rows in the run's format, in messages as `packing` says (batches of rows, or
    /// one message per row), with headers saying what they are. `columns`: the products'
    /// columns, whose rows are in `shaped`; else the spectra are the rows.
    /// `rows`: (frame, time_s, frames) of each row; `averaged`: their values when they are not
    /// the block's frames (`--average`).
    fn encode_rows(
        &mut self,
        header: &BlockHeader,
        spec: &TransformSpec,
        (columns, rows_in, averaged): RowsIn<'_, T>,
        subject: &str,
    ) -> Vec<Outgoing> {
        let shape = &header.shape;
        let shaped = columns.is_some();
        let stream = StreamMeta {
            columns,
            ..self.stream_meta(header)
        };
        let bins = match &stream.columns {
            Some(columns) => columns.len(),
            None => spec.bins(),
        };
        let width = bins * spec.scale.values_per_bin();
        let rows_of = match averaged {
            Some(values) => values,
            None if shaped => &self.shaped,
            None => &self.spectra,
        };
        let mut bytes = Vec::with_capacity(rows_in.len() * (width * 4 + 8));
        let mut rows = Vec::with_capacity(rows_in.len());
        for (j, &(frame, time_s, frames)) in rows_in.iter().enumerate() {
            let mut values = &rows_of[j * width..(j + 1) * width];
            // products place their columns (shifted included) themselves
            if stream.fftshift && stream.kind == InputKind::Complex && !shaped {
                self.shifted.clear();
                self.shifted.extend_from_slice(values);
                self.shifted
                    .rotate_left(bins.div_ceil(2) * spec.scale.values_per_bin());
                values = &self.shifted;
            }
            let row = SpectrumRow {
                stream: &stream,
                frame,
                time_s,
                n: self.n,
                frames,
                values,
            };
            let from = bytes.len();
            self.encoder.encode(&row, &mut bytes);
            rows.push(Row {
                frame,
                time_s,
                bytes: from..bytes.len(),
            });
        }
        let of = RowsOf {
            origin: shape.origin(subject),
            scale: self.analysis_spec.scale.name(),
            bins,
            n: shape.n,
            hop: shape.hop,
            analysis: &self.analysis,
        };
        let mut messages = Vec::new();
        self.packing.messages(&of, &rows, &bytes, &mut messages);
        messages
    }
}

/// What a row's headers say: where it belongs (`Origin`: subject, source, run, stream), which
/// frame it is and how it was made. A fleet worker's rows and a local run's (`sink::nats`) carry
/// the same headers.
pub(crate) struct RowHeaders<'a> {
    pub origin: Origin<'a>,
    pub frame: u64,
    pub time_s: f64,
    pub scale: &'a str,
    pub bins: usize,
    pub n: usize,
    pub hop: usize,
}

impl RowHeaders<'_> {
    /// `source`, `run`, `stream`, `frame`, `time_s`, `scale`, `bins`, `n`, `hop`, and the
    /// `Nats-Msg-Id` of the row under `analysis`.
    pub(crate) fn to_headers(&self, analysis: &str) -> HeaderMap {
        let origin = &self.origin;
        let mut h = HeaderMap::new();
        h.insert("source", origin.source);
        h.insert("run", origin.run);
        h.insert("stream", origin.stream.to_string().as_str());
        h.insert("frame", self.frame.to_string().as_str());
        let time_s = crate::types::number::text(self.time_s, crate::types::number::Syntax::Text);
        h.insert("time_s", time_s.as_str());
        h.insert("scale", self.scale);
        h.insert("bins", self.bins.to_string().as_str());
        h.insert("n", self.n.to_string().as_str());
        h.insert("hop", self.hop.to_string().as_str());
        let id = origin.row_id(self.frame, analysis);
        h.insert("Nats-Msg-Id", id.as_str());
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::config::Options;

    fn settings_analysis(extra: impl FnOnce(&mut Options)) -> Analysis {
        let mut o = Options {
            file: vec!["x.f32".into()],
            ..Options::default()
        };
        extra(&mut o);
        crate::app::config::Settings::from_options(o)
            .expect("settings")
            .run
            .analysis
    }

    #[test]
    fn the_analysis_names_what_changes_the_rows_and_not_the_engine() {
        let plain = analysis_of(&settings_analysis(|_| {}), 512, 128);
        assert_eq!(plain, analysis_of(&settings_analysis(|_| {}), 512, 128));
        assert_ne!(plain, analysis_of(&settings_analysis(|_| {}), 512, 256));
        let db = settings_analysis(|o| o.scale = Some(crate::fft::Scale::Db));
        assert_ne!(plain, analysis_of(&db, 512, 128));
        let f64 = settings_analysis(|o| o.precision = Some(crate::types::Precision::F64));
        assert_ne!(plain, analysis_of(&f64, 512, 128));
        let cpu = settings_analysis(|o| o.device = Some(crate::fft::router::DeviceChoice::Cpu));
        assert_eq!(plain, analysis_of(&cpu, 512, 128));
    }
}
