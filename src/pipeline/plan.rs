//! Stream planning: numbers the streams of every input (one per input, or per channel with
//! `--channel all`) and decides how each input is read:
//!
//! - seekable raw and WAV files with fixed-size frames go to the range readers
//!   (`range_reader`): many threads per stream, no file held open between jobs;
//! - other files (text, `--frame whole`, files the range readers leave alone) are probed for their
//!   header here, closed, and opened again by a reader-pool thread when their turn comes, so
//!   thousands of inputs never hold thousands of descriptors;
//! - streams (stdin, FIFOs, process substitution's `/dev/fd/N`, devices, sockets: anything not a
//!   regular file) and the microphone are opened once and stay open from the start: they cannot
//!   be read twice. Every stream's pump starts before any header is read, so writers that feed
//!   several of them in turn (`tee`) are never kept waiting, and each gets its own reader thread.
//!   An `rtl_tcp://` receiver is connected to and tuned here too, and read live.
//!
//! `FFTD_RANGE_READ=0` sends every input the sequential way (for comparisons and benchmarks).
//!
//! `Planned` is a run's inputs as planned (with the products' shaping and the recorder), and
//! the reader threads they need (`ReaderThreads`).

use super::range_reader::{Framing, RangeJobs, RangeStream};
use super::{planned_rows, tap_sources};
use crate::error::{FftdError, Result};
use crate::fft::TransformSpec;
use crate::frame::FrameSize;
use crate::limits;
use crate::pipeline::spec::RunSpec;
use crate::products::{Segmenting, Shaping};
use crate::source::channels::ChannelSplitter;
use crate::source::input::InputReader;
use crate::source::retry;
use crate::source::rtl_tcp;
use crate::source::seekable::SeekableLayout;
use crate::source::soapy;
use crate::source::spec::Input;
use crate::source::sweep::SweepSource;
use crate::source::{
    is_stream, open_file, open_reader, open_with_reader, FileOptions, InputFormat, SampleSource,
    SourceInfo,
};
use crate::types::tuning::Tuning;
use crate::types::StreamMeta;
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// One source and the streams it feeds.
pub(crate) struct SourcePlan {
    pub source: Box<dyn SampleSource>,
    pub splitter: ChannelSplitter,
    /// Id of the first stream; the source's streams are consecutive.
    pub first_stream: usize,
}

/// An input read from start to end by one reader thread.
pub(crate) enum SequentialInput {
    /// Kept open since planning (stdin, the microphone).
    Open(SourcePlan),
    /// Opened again when a reader takes it.
    Deferred { path: String, first_stream: usize },
}

/// What `plan_streams` decided.
pub(crate) struct StreamPlan {
    pub sequential: Vec<SequentialInput>,
    pub ranged: Vec<RangeStream>,
    pub streams: Vec<StreamMeta>,
    /// The framing the range streams were planned with (their jobs' too).
    pub framing: Framing,
}

/// How the planner may read inputs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Range readers where they apply (an analysis run).
    Fastest,
    /// Every input sequentially, opened at once (`fftd check`).
    Sequential,
}

/// File options from the run's spec.
pub(crate) fn file_options(run_spec: &RunSpec, stop: &Arc<AtomicBool>) -> FileOptions {
    FileOptions {
        format: run_spec.source.input_format,
        rate: run_spec.source.rate.unwrap_or(1.0),
        channels: run_spec.source.channels.unwrap_or(1),
        stop: stop.clone(),
        precision: run_spec.analysis.precision,
    }
}

/// Plans every input of the run's spec (see the module comment).
pub(crate) fn plan_streams(
    run_spec: &RunSpec,
    stop: &Arc<AtomicBool>,
    reading: Reading,
) -> Result<StreamPlan> {
    let mut plan = StreamPlan {
        sequential: Vec::new(),
        ranged: Vec::new(),
        streams: Vec::new(),
        framing: framing(run_spec),
    };
    let paths = match &run_spec.source.input {
        Input::Files(paths) => paths,
        Input::Nats(url) => {
            return Err(FftdError::Usage(format!(
                "{url}: a work stream is read by a fleet worker, not planned as a file"
            )))
        }
        Input::Mic(device) => {
            let source = crate::source::mic::open(device, &run_spec.source, stop.clone())?;
            let reopen = retry::reopen_mic(device, &run_spec.source);
            plan.add_open(run_spec, source, None, Some((reopen, stop)))?;
            return Ok(plan);
        }
    };
    let stdin = |p: &&String| p.as_str() == "-" || crate::stdio::names_stdin(p);
    if paths.iter().filter(stdin).count() > 1 {
        return Err(FftdError::Usage(
            "stdin (-, /dev/stdin) can be given only once: one reader takes its bytes".into(),
        ));
    }
    // --realtime paces each input in its own reader: no range reading; nor --dc-remove of
    // overlapping frames, which the range readers hold once in a batch (each frame must lose
    // its own mean: the batcher's back-to-back frames)
    let overlapping_dc = run_spec.analysis.dc_remove && plan.framing.hop < plan.framing.n;
    let files = FilePlanner {
        run_spec,
        stop,
        reading,
        opts: file_options(run_spec, stop),
        ranges_allowed: reading == Reading::Fastest
            && range_reading_enabled()
            && !run_spec.source.realtime
            && !overlapping_dc,
    };
    // every stream's pump starts (and opens it) before any header is read
    let mut streams_open = Vec::new();
    for path in paths {
        streams_open.push(
            (is_stream(path) && !rtl_tcp::is_rtl_tcp(path) && !soapy::is_soapy(path))
                .then(|| open_reader(path, stop))
                .transpose()?,
        );
    }
    for (path, stream) in paths.iter().zip(streams_open) {
        files.add(&mut plan, path, stream)?;
    }
    Ok(plan)
}

/// How the named inputs (files, streams, rtl_tcp:// receivers) are planned.
struct FilePlanner<'a> {
    run_spec: &'a RunSpec,
    stop: &'a Arc<AtomicBool>,
    reading: Reading,
    opts: FileOptions,
    /// Seekable files may go to the range readers.
    ranges_allowed: bool,
}

impl FilePlanner<'_> {
    /// Plans `path`; `stream`: its reader when it is a stream, opened already.
    fn add(&self, plan: &mut StreamPlan, path: &str, stream: Option<InputReader>) -> Result<()> {
        let run_spec = self.run_spec;
        if rtl_tcp::is_rtl_tcp(path) {
            let source = Box::new(rtl_tcp::open(
                path,
                rtl_tuning(run_spec),
                self.stop.clone(),
            )?);
            // a live receiver's centre is --center-freq, as for every stream (`add_streams`)
            let reopen = retry::reopen_rtl_tcp(path, rtl_tuning(run_spec));
            return plan.add_open(run_spec, source, None, Some((reopen, self.stop)));
        }
        if soapy::is_soapy(path) {
            let request = soapy_request(run_spec);
            let source = Box::new(soapy::open(path, request, self.stop.clone())?);
            let reopen = retry::reopen_soapy(path, request);
            return plan.add_open(run_spec, source, None, Some((reopen, self.stop)));
        }
        if let Some(reader) = stream {
            let source = open_with_reader(path, reader, &self.opts)?;
            let tuning = source.tuning();
            let fifo = run_spec.source.retry.and_then(|_| retry::reopenable(path));
            let reopen = fifo.map(|fifo| (retry::reopen_stream(path, fifo, &self.opts), self.stop));
            return plan.add_open(run_spec, source, tuning, reopen);
        }
        if self.ranges_allowed && self.add_ranged(plan, path)? {
            return Ok(());
        }
        let source = open_file(path, &self.opts)?;
        let (splitter, first_stream) =
            plan.add_streams(run_spec, source.info(), source.tuning())?;
        plan.sequential
            .push(match self.reading == Reading::Sequential {
                true => SequentialInput::Open(SourcePlan {
                    source,
                    splitter,
                    first_stream,
                }),
                false => SequentialInput::Deferred {
                    path: path.to_string(),
                    first_stream,
                },
            });
        Ok(())
    }

    /// Gives `path` to the range readers when they can take it; whether they did.
    fn add_ranged(&self, plan: &mut StreamPlan, path: &str) -> Result<bool> {
        let run_spec = self.run_spec;
        let layout = seekable_layout(path, run_spec, &self.opts)?;
        // `--channel all` of a many-channel file: each stream's jobs would decode every
        // channel; the sequential reader decodes each block once for all of them
        let each_channel_apart = |l: &SeekableLayout| {
            l.channels > 1 && run_spec.source.channel == crate::source::channels::ChannelSelect::All
        };
        let fits = |l: &SeekableLayout| plan.framing.fits(l);
        match layout.filter(|l| fits(l) && !each_channel_apart(l)) {
            Some(layout) => plan.add_ranged(run_spec, Arc::new(layout)).map(|()| true),
            None => Ok(false),
        }
    }
}

/// What an rtl_tcp:// input is asked for: `--rate` (rtl_tcp's 2.048 MS/s by default),
/// `--center-freq`, `--gain`.
fn rtl_tuning(run_spec: &RunSpec) -> rtl_tcp::Tuning {
    rtl_tcp::Tuning {
        rate: run_spec.source.rate.unwrap_or(rtl_tcp::DEFAULT_RATE),
        center: run_spec.source.center_freq,
        gain: run_spec.source.gain,
    }
}

/// What a soapy:// device is asked for: `--rate` (2.048 MS/s by default), `--center-freq`,
/// `--gain`, `--channel`.
fn soapy_request(run_spec: &RunSpec) -> soapy::Request {
    soapy::Request {
        rate: run_spec.source.rate.unwrap_or(soapy::DEFAULT_RATE),
        center: run_spec.source.center_freq,
        gain: run_spec.source.gain,
        channel: run_spec.source.receiver_channel,
    }
}

fn range_reading_enabled() -> bool {
    crate::knobs::range_read()
}

/// The layout of `path` when the range readers can take it.
fn seekable_layout(
    path: &str,
    run_spec: &RunSpec,
    opts: &FileOptions,
) -> Result<Option<SeekableLayout>> {
    if run_spec.analysis.frame == FrameSize::Whole {
        return Ok(None);
    }
    let format = opts
        .format
        .unwrap_or_else(|| InputFormat::from_extension(path));
    SeekableLayout::probe(path, format, opts.rate, opts.channels, opts.precision)
}

impl StreamPlan {
    /// Adds a source kept open from now on (a stream, the microphone, a receiver).
    fn add_open(
        &mut self,
        run_spec: &RunSpec,
        source: Box<dyn SampleSource>,
        tuning: Option<Arc<Tuning>>,
        retried: Option<(retry::Reopen, &Arc<AtomicBool>)>,
    ) -> Result<()> {
        // issue 42: a sweep's receiver, retuned hop after hop, labels each row with its hop
        let sweep = run_spec.source.sweep.as_ref();
        let tuning = sweep.map(|s| s.tuning()).or(tuning);
        let (splitter, first_stream) = self.add_streams(run_spec, source.info(), tuning)?;
        // issue 27: reopened when it fails, under `--retry` (`source::retry`)
        let source = match retried {
            Some((reopen, stop)) => {
                let streams = first_stream..first_stream + splitter.streams();
                retry::wrap(source, run_spec.source.retry, streams, stop, reopen)
            }
            None => source,
        };
        let source = match sweep {
            Some(schedule) => Box::new(SweepSource::new(source, schedule.clone())),
            None => source,
        };
        self.sequential.push(SequentialInput::Open(SourcePlan {
            source,
            splitter,
            first_stream,
        }));
        Ok(())
    }

    /// Numbers the streams of a source described by `info`; returns its splitter and first id.
    fn add_streams(
        &mut self,
        run_spec: &RunSpec,
        info: &SourceInfo,
        tuning: Option<Arc<Tuning>>,
    ) -> Result<(ChannelSplitter, usize)> {
        let splitter = ChannelSplitter::for_source(info, run_spec.source.channel)?;
        if splitter.streams() > limits::MAX_CHANNEL_STREAMS {
            return Err(FftdError::input(
                &info.name,
                format!(
                    "{} channels: --channel all makes a stream of each, at most {} (give --channel N for one)",
                    info.channels,
                    limits::MAX_CHANNEL_STREAMS
                ),
            ));
        }
        // --center-freq says where the radio was, over what the input says (whose captures'
        // datetimes still time the rows)
        let tuning = match (run_spec.source.center_freq, tuning) {
            (Some(centre), Some(tuning)) => Some(tuning.at_centre(centre)),
            (Some(centre), None) => Some(Tuning::fixed(centre)),
            (None, tuning) => tuning,
        };
        let first_stream = self.streams.len();
        for k in 0..splitter.streams() {
            self.streams.push(StreamMeta {
                id: self.streams.len(),
                input: info.name.clone(),
                channel: (info.channels > 1)
                    .then(|| splitter.channel_of(k))
                    .flatten(),
                rate: info.rate,
                kind: info.kind,
                fftshift: run_spec.analysis.fftshift,
                columns: None,
                tuning: tuning.clone(),
            });
        }
        Ok((splitter, first_stream))
    }

    /// Adds the streams of a seekable input for the range readers.
    fn add_ranged(&mut self, run_spec: &RunSpec, layout: Arc<SeekableLayout>) -> Result<()> {
        let info = SourceInfo {
            name: layout.name.clone(),
            rate: layout.rate,
            channels: layout.channels,
            kind: layout.kind,
            live: false,
        };
        let (splitter, first_stream) = self.add_streams(run_spec, &info, layout.tuning.clone())?;
        let splitter = Arc::new(splitter);
        for part in 0..splitter.streams() {
            self.ranged.push(RangeStream::new(
                first_stream + part,
                layout.clone(),
                splitter.clone(),
                part,
                &self.framing,
            ));
        }
        Ok(())
    }
}

/// The range readers' framing: frame size, hop, tail, limits and batch length.
fn framing(run_spec: &RunSpec) -> Framing {
    let n = match run_spec.analysis.frame {
        FrameSize::Fixed(n) => n,
        FrameSize::Whole => 2, // never range-read (see `seekable_layout`)
    };
    Framing {
        n,
        hop: run_spec.analysis.hop_for(n),
        tail: run_spec.analysis.tail,
        max_frames: run_spec.source.max_frames.unwrap_or(u64::MAX),
        duration: run_spec.source.duration,
        batch: run_spec.engine.batch_frames(n),
        cpu_batch: run_spec.engine.cpu_batch_frames(n),
        dc_remove: run_spec.analysis.dc_remove,
    }
}

/// The sequential inputs, taken one at a time by the reader pool.
pub(crate) struct SequentialQueue {
    inputs: Mutex<VecDeque<SequentialInput>>,
    opts: FileOptions,
    channel: crate::source::channels::ChannelSelect,
}

impl SequentialQueue {
    /// The inputs kept open (streams, the microphone) go first: each gets a reader of its own
    /// (`readers_wanted`), so no stream waits for another input to end.
    pub(crate) fn new(
        inputs: Vec<SequentialInput>,
        run_spec: &RunSpec,
        stop: &Arc<AtomicBool>,
    ) -> Self {
        let (open, deferred): (Vec<_>, Vec<_>) = inputs
            .into_iter()
            .partition(|i| matches!(i, SequentialInput::Open(_)));
        let queue: VecDeque<_> = open.into_iter().chain(deferred).collect();
        SequentialQueue {
            inputs: Mutex::new(queue),
            opts: file_options(run_spec, stop),
            channel: run_spec.source.channel,
        }
    }

    /// Inputs not yet taken.
    pub(crate) fn remaining(&self) -> usize {
        self.inputs.lock().map_or(0, |q| q.len())
    }

    /// Reader threads for these inputs: one per open input, and up to `pool` for the files
    /// opened in turn.
    pub(crate) fn readers_wanted(&self, pool: usize) -> usize {
        let Ok(queue) = self.inputs.lock() else {
            return 0;
        };
        let open = queue
            .iter()
            .filter(|i| matches!(i, SequentialInput::Open(_)))
            .count();
        open + (queue.len() - open).min(pool)
    }

    /// The next input, opened; None when all have been taken.
    pub(crate) fn next(&self) -> Option<Result<SourcePlan>> {
        let input = self.inputs.lock().ok()?.pop_front()?;
        Some(match input {
            SequentialInput::Open(plan) => Ok(plan),
            SequentialInput::Deferred { path, first_stream } => open_file(&path, &self.opts)
                .and_then(|source| {
                    let splitter = ChannelSplitter::for_source(source.info(), self.channel)?;
                    Ok(SourcePlan {
                        source,
                        splitter,
                        first_stream,
                    })
                }),
        })
    }
}

/// The inputs planned, before any is read: their streams, how each is read, the products'
/// per-frame shaping and the recorder tapping them.
pub(super) struct Planned {
    pub streams: Vec<StreamMeta>,
    pub sequential: SequentialQueue,
    /// The range-read streams' jobs.
    pub range_jobs: RangeJobs,
    /// Frame size and hop the range streams were planned with (every fixed-frame stream's).
    frame: (usize, usize),
    pub recorder: Option<crate::record::Recorder>,
    pub shaping: Option<Shaping>,
}

impl Planned {
    pub(super) fn plan(run_spec: &RunSpec, stop: &Arc<AtomicBool>) -> Result<Planned> {
        // recordings tap every input's samples, so inputs are then read in order
        let reading = match run_spec.record {
            Some(_) => Reading::Sequential,
            None => Reading::Fastest,
        };
        let StreamPlan {
            mut sequential,
            ranged,
            mut streams,
            framing,
        } = plan_streams(run_spec, stop, reading)?;
        let recorder = tap_sources(run_spec, &mut sequential)?;
        let products = &run_spec.analysis.products;
        let look = (run_spec.analysis.scale, run_spec.analysis.window);
        let shaping =
            Shaping::new(&mut streams, framing.n, products, look).map_err(FftdError::Usage)?;
        Ok(Planned {
            streams,
            sequential: SequentialQueue::new(sequential, run_spec, stop),
            frame: (framing.n, framing.hop),
            range_jobs: RangeJobs::new(ranged, framing),
            recorder,
            shaping,
        })
    }

    /// What taps the frames before the engines: the recorder and the products' shaping (each
    /// taken once, by the stages).
    pub(super) fn take_taps(&mut self) -> Taps {
        Taps {
            recorder: self.recorder.take(),
            shaping: self.shaping.take(),
        }
    }

    /// Frame size and hop of the range-read streams (every stream's with fixed frames).
    pub(super) fn frame(&self) -> (usize, usize) {
        self.frame
    }

    /// The first stream's transform (None with no streams): what a device engine runs once
    /// before its lane takes batches (`worker::warm_up`).
    pub(super) fn first_spec(&self, run_spec: &RunSpec) -> Option<TransformSpec> {
        let first = self.streams.first()?;
        Some(run_spec.transform(self.frame.0, first.kind, first.rate))
    }

    /// The products reduced in the engine (`--average` segments), unless `FFTD_ENGINE_AVERAGING=0`.
    pub(super) fn segmenting(&self, run_spec: &RunSpec, live: bool) -> Result<Option<Segmenting>> {
        let products = &run_spec.analysis.products;
        match crate::knobs::engine_averaging() {
            false => Ok(None), // every frame to the averaging stage (for comparisons)
            true => Segmenting::new(products, &self.streams, self.frame.1, live)
                .map_err(FftdError::Usage),
        }
    }

    /// Rows each stream will have when known up front (not with `--average`: rows per interval
    /// are known only as they come).
    pub(super) fn rows(&self, averaging: bool) -> Vec<Option<u64>> {
        match averaging {
            false => planned_rows(self.range_jobs.streams(), &self.streams, &self.sequential),
            true => vec![None; self.streams.len()],
        }
    }

    /// Reader threads: a fixed pool for the sequential inputs (`--realtime`: one per input,
    /// each paced), and one range reader per core when there are range jobs.
    pub(super) fn readers(&self, realtime: bool) -> ReaderThreads {
        let sequential = match realtime {
            true => self.sequential.readers_wanted(limits::MAX_PACED_READERS),
            false => self.sequential.readers_wanted(limits::cores()),
        };
        let ranged = match self.range_jobs.streams().is_empty() {
            true => 0,
            false => limits::cores(),
        };
        ReaderThreads { sequential, ranged }
    }
}

/// What taps the frames before the engines (`Planned::take_taps`).
pub(super) struct Taps {
    pub recorder: Option<crate::record::Recorder>,
    pub shaping: Option<Shaping>,
}

/// Reader threads of a run.
#[derive(Clone, Copy, Debug)]
pub(super) struct ReaderThreads {
    /// The pool reading the sequential inputs, whose frames go to the batcher.
    pub sequential: usize,
    /// Range readers: each reads parts of the range-read inputs straight into batches.
    pub ranged: usize,
}

impl ReaderThreads {
    pub(super) fn total(&self) -> usize {
        self.sequential + self.ranged
    }
}
