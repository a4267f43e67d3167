//! Output planning, done before any input is read: which destination each stream writes to (one
//! per stream with `--output-dir`, else one shared; none of them an input: `destination_checks`),
//! and opening what must be opened now so an unusable destination (a missing folder, a full
//! device, a FIFO that needs a file's seek) is reported before any work starts.
//!
//! A destination that is not a regular file (a FIFO, `/dev/null`, a socket) is opened once, now,
//! and kept open to the end: a FIFO waits here for its reader, giving way to SIGINT/SIGTERM
//! (`sink::opening`). It is never placed (`sink::placed`) and never closed to make room.
//!
//! `Sinks::open` opens a run's outputs (sized by `RowsPlanned`); `write_run_meta` writes the
//! `--meta` sidecar at the end.

use super::destination_checks::{other_outputs, refuse_overwriting_inputs, run_inputs};
use super::run_report;
use crate::error::{FftdError, Result};
use crate::fleet::output::{NatsConnection, NatsRows};
use crate::frame::FrameSize;
use crate::pipeline::spec::RunSpec;
use crate::sink::destination::Destination;
use crate::sink::meta::{write_meta, RunEnd, StreamSummary};
use crate::sink::opening;
use crate::sink::output::open_files_budget;
use crate::sink::output::RowShape;
use crate::sink::overwrite_guard::GuardedFiles;
use crate::sink::placed::{self, PlacedFile, PlacedOutputs, PlacedShape};
use crate::sink::png::ImageFile;
use crate::sink::rotate::Rotation;
use crate::sink::{make_encoder, Encoder, OutputFormat};
use crate::source::seekable::SeekableLayout;
use crate::source::spec::Input;
use crate::source::InputFormat;
use crate::types::deferred_file::DeferredFile;
use crate::types::Sample;
use crate::types::StreamMeta;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// Where the spectra go: one destination per writer (a file, or stdout for None), and the writer
/// of each stream.
pub(super) struct OutputPlan {
    pub(super) files: Vec<Option<PathBuf>>,
    /// Files opened when their first rows arrive (`--output-dir`), not before the run.
    pub(super) lazy: bool,
    pub(super) writer_of: Vec<usize>,
}

/// Decides the outputs (nothing is opened yet): one file per stream with `--output-dir`, else one
/// output shared by every stream (which the format must be able to tell apart).
pub(super) fn plan_outputs(
    run_spec: &RunSpec,
    streams: &[StreamMeta],
    n: usize,
) -> Result<OutputPlan> {
    let format = run_spec.analysis.format;
    // the folder was checked (`check_destinations`) before any input was read
    if let Some(dir) = &run_spec.output.output_dir {
        let files = stream_file_names(streams, format)
            .into_iter()
            .map(|name| Some(dir.join(name)))
            .collect();
        return Ok(OutputPlan {
            files,
            lazy: true,
            writer_of: (0..streams.len()).collect(),
        });
    }
    // every message says its stream (`sink::nats`)
    let tagged = format.carries_stream_id() || run_spec.nats_output.is_some();
    // (with --cross only channel A's stream writes rows: docs/measure.md)
    let cross = run_spec.analysis.products.measure.cross;
    let writing: Vec<&StreamMeta> = (streams.iter())
        .filter(|s| cross.is_none_or(|c| s.channel == Some(c.a)))
        .collect();
    if writing.len() > 1 && !tagged {
        return Err(FftdError::Usage(format!(
            "{} streams into one output: --format {} cannot tell them apart; use --output-dir DIR or --format csv|ndjson",
            writing.len(),
            format.name()
        )));
    }
    // (NATS messages carry their own stream's header: `sink::nats`)
    if format == OutputFormat::Csv && run_spec.nats_output.is_none() {
        crate::sink::csv::check_one_header(&writing, n).map_err(FftdError::Usage)?;
        if run_spec.analysis.frame == FrameSize::Whole {
            check_whole_frames_agree(run_spec, &writing)?;
        }
    }
    Ok(OutputPlan {
        files: vec![run_spec.output.output.clone()],
        // issue 27: a --rotate pattern is no file to create before the run
        lazy: run_spec.output.rotate.is_some(),
        writer_of: vec![0; streams.len()],
    })
}

/// `--frame whole` into one csv: the inputs' frames (each input's length, up to a power of
/// two) must give one bin count, checked here for the regular files whose length their size or
/// header gives (raw, WAV, SigMF) before the output is touched; the others when their rows come
/// (`sink::csv`'s width error).
fn check_whole_frames_agree(run_spec: &RunSpec, writing: &[&StreamMeta]) -> Result<()> {
    let source = &run_spec.source;
    let mut first: Option<(&str, u64)> = None;
    for stream in writing {
        let path = stream.input.as_str();
        // (a name that does not give the format: its bytes do, when it is read)
        let Some(format) = source.input_format.or(InputFormat::by_extension(path)) else {
            continue;
        };
        let rate = source.rate.unwrap_or(1.0);
        let channels = source.channels.unwrap_or(1);
        let precision = run_spec.analysis.precision;
        let Ok(Some(layout)) = SeekableLayout::probe(path, format, rate, channels, precision)
        else {
            continue;
        };
        let samples = layout.frames;
        match first {
            None => first = Some((path, samples)),
            Some((other, seen)) if seen.next_power_of_two() != samples.next_power_of_two() => {
                return Err(FftdError::Usage(format!(
                    "--frame whole: one csv header cannot label the bins of {other} ({seen} samples: a frame of {}) and {path} ({samples}: a frame of {}): write them with --output-dir DIR",
                    seen.next_power_of_two(),
                    samples.next_power_of_two()
                )));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// A format that rewrites its header at the end (npy) needs a file it can seek: stdout or a
/// FIFO is refused.
fn refuse_npy_without_a_file<T: Sample>(encoder: &dyn Encoder<T>, plan: &OutputPlan) -> Result<()> {
    if encoder.final_header(0, 0).is_none() {
        return Ok(());
    }
    for file in &plan.files {
        match file {
            Some(path) if opening::is_pipe_path(path) => {
                return Err(FftdError::Usage(format!(
                    "{}: npy output rewrites its header at the end and needs a regular file, not a FIFO or socket (use --format f32 for a pipe)",
                    crate::types::shown_path(path)
                )))
            }
            // (a descriptor by name may be a file opened to append, where the header's
            // rewrite would land at the end: helper-51 found nine headers in one file)
            Some(path) if crate::stdio::names_a_descriptor(path) => {
                return Err(FftdError::Usage(format!(
                    "{}: npy output rewrites its header as it goes and needs the file's own path, not a descriptor's (use --format f32 for a stream)",
                    crate::types::shown_path(path)
                )))
            }
            Some(_) => {}
            None => {
                return Err(FftdError::Runtime(
                    "stdout: npy output needs a file, not stdout".into(),
                ))
            }
        }
    }
    Ok(())
}

/// One destination per planned output. Stdout, a single `--output` file and every stream path
/// (a FIFO, a device) are opened now, so an unusable one is reported before any work starts;
/// other `--output-dir` files are opened when their first rows arrive (`plan_outputs` checked
/// that the folder takes new files; `refuse_npy_without_a_file` the format's needs). A file
/// with bytes in it already is only checked now (`probe_output`) and emptied when its rows
/// come, so a run that fails before any leaves it as it was.
pub(super) fn open_destinations(
    plan: &OutputPlan,
    placed: &PlacedOutputs,
    stop: &AtomicBool,
) -> Result<Vec<Destination>> {
    let mut dests = Vec::new();
    for (i, file) in plan.files.iter().enumerate() {
        let dest = match file {
            Some(path) if placed.get(i).is_some() => Destination::file(path),
            Some(path) if plan.lazy && !opening::is_stream_path(path) => Destination::file(path),
            Some(path) => match probe_output(path, stop)? {
                Some(file) => Destination::opened(path, file),
                None => Destination::file(path),
            },
            // (a closed stdout: `run_steps::refuse_closed_streams`)
            None => Destination::stdout()
                .map_err(|e| FftdError::Runtime(format!("cannot write to stdout: {e}")))?,
        };
        dests.push(dest);
    }
    Ok(dests)
}

/// `create_output`, but a regular file with bytes in it is not emptied: it is opened for
/// writing (which checks that it may be written) and closed again (None), to be created when
/// its first rows come or the run ends well.
fn probe_output(path: &Path, stop: &AtomicBool) -> Result<Option<File>> {
    let holds_bytes = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0);
    if !holds_bytes || crate::stdio::names_stdout(path) {
        return create_output(path, stop).map(Some);
    }
    let file = std::fs::OpenOptions::new().write(true).open(path);
    file.map(|_| None).map_err(|e| FftdError::io(path, e))
}

/// A file written at the run's end (`--meta`, `--trace`): `probe_output`'s check now, and an
/// existing file with bytes in it created only when written.
pub(super) fn deferred_output(path: &Path, stop: &AtomicBool) -> Result<DeferredFile> {
    Ok(match probe_output(path, stop)? {
        Some(file) => DeferredFile::Open(file),
        None => DeferredFile::Later(path.to_path_buf()),
    })
}

/// Creates an output file now (a FIFO: waits for its reader, or for a stop), and checks that it
/// takes bytes (an empty write: `/dev/full` refuses even that).
pub(super) fn create_output(path: &Path, stop: &AtomicBool) -> Result<File> {
    let file = opening::create(path, stop).map_err(|e| match e.kind() {
        std::io::ErrorKind::Interrupted => FftdError::Stopped(format!(
            "{}: stopped while waiting for a reader; nothing was analysed",
            crate::types::shown_path(path)
        )),
        _ => FftdError::io(path, e),
    })?;
    opening::check_writable(&file).map_err(|e| FftdError::io(path, e))?;
    Ok(file)
}

/// `--format png`: one image per planned output, of the one stream it has (`plan_outputs` refuses
/// several streams in one output for it, and `RunSpec` refuses stdout). A single `--output` is
/// created now, so an unusable path is reported before any work starts.
pub(super) fn image_destinations(
    run_spec: &RunSpec,
    plan: &OutputPlan,
    streams: &[StreamMeta],
    stop: &AtomicBool,
) -> Result<Vec<Destination>> {
    let mut dests = Vec::new();
    for (i, file) in plan.files.iter().enumerate() {
        let stream = streams.iter().find(|s| plan.writer_of[s.id] == i);
        let (Some(path), Some(stream)) = (file, stream) else {
            return Err(FftdError::Usage(
                "--format png needs one stream per output file".into(),
            ));
        };
        let mut image = ImageFile::new(path, stream, &run_spec.output.png, &run_spec.analysis);
        if !plan.lazy || opening::is_stream_path(path) {
            if let Some(file) = probe_output(path, stop)? {
                image.create_with(file);
            }
        }
        dests.push(Destination::Image(Box::new(image)));
    }
    Ok(dests)
}

/// Maps the outputs that can take their rows in place (`sink::placed`): a file with one stream
/// whose rows are known, in a format of fixed-size rows, big enough to be worth it; at most
/// `MAX_OPEN_FILES` of them, created in parallel (reserving space is the slow part). An output
/// whose file cannot be mapped is written the ordinary way.
pub(super) fn place_outputs<T: Sample>(
    encoder: &dyn Encoder<T>,
    plan: &OutputPlan,
    streams: &[StreamMeta],
    planned_rows: &[Option<u64>],
    n: usize,
    values_of: impl Fn(&StreamMeta) -> usize,
) -> PlacedOutputs {
    if !placed::enabled() {
        return PlacedOutputs::default();
    }
    let mut wanted: Vec<(usize, &Path, PlacedShape, Vec<u8>)> = Vec::new();
    for (output, path) in plan.files.iter().enumerate() {
        let mut writers = streams.iter().filter(|s| plan.writer_of[s.id] == output);
        let (Some(stream), None) = (writers.next(), writers.next()) else {
            continue; // no stream, or several sharing the file
        };
        let (Some(path), Some(rows)) = (path, planned_rows[stream.id]) else {
            continue;
        };
        if opening::is_stream_path(path) {
            continue; // a FIFO or a device is written front to back
        }
        let Some(row_bytes) = encoder.row_bytes(values_of(stream)) else {
            return PlacedOutputs::default(); // the format has rows of varying size
        };
        let preamble = encoder.preamble(stream, n);
        let shape = PlacedShape {
            header: preamble.len(),
            row_bytes,
            rows,
        };
        if shape.total_bytes() >= placed::MIN_PLACED_BYTES {
            wanted.push((output, path, shape, preamble));
        }
    }
    // each keeps its descriptor for the run: half of the budget the ordinary outputs also get
    wanted.truncate((open_files_budget() / 2).max(1));
    let mut files: Vec<Option<PlacedFile>> = plan.files.iter().map(|_| None).collect();
    let created: Vec<(usize, Option<PlacedFile>)> = std::thread::scope(|scope| {
        let creating: Vec<_> = wanted
            .iter()
            .map(|(output, path, shape, preamble)| {
                (
                    *output,
                    scope.spawn(move || create_placed(path, *shape, preamble)),
                )
            })
            .collect();
        creating
            .into_iter()
            .map(|(output, thread)| (output, thread.join().ok().flatten()))
            .collect()
    });
    for (output, file) in created {
        files[output] = file;
    }
    PlacedOutputs::new(files)
}

/// One placed file, or None (with the reason in the debug log) to write it the ordinary way.
fn create_placed(path: &Path, shape: PlacedShape, preamble: &[u8]) -> Option<PlacedFile> {
    match PlacedFile::create(path, shape, preamble) {
        Ok(file) => {
            tracing::debug!(path = %crate::types::shown_path(path), rows = shape.rows, "rows placed by the encoders");
            Some(file)
        }
        Err(e) => {
            tracing::debug!(path = %crate::types::shown_path(path), error = %e, "written the ordinary way");
            None
        }
    }
}

/// File names for `--output-dir`: the input's stem, `-chK` for a picked channel; inputs whose
/// stems are the same (`a/x.wav`, `b/x.wav`) are told apart by the stream id (`x-0.csv`,
/// `x-1.csv`), the `stream` field of csv and ndjson rows.
fn stream_file_names(streams: &[StreamMeta], format: OutputFormat) -> Vec<PathBuf> {
    let stem_of = |s: &StreamMeta| {
        let stem = if s.input == "-" {
            "stdin".to_string()
        } else {
            Path::new(&s.input)
                .file_stem()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| format!("stream{}", s.id))
        };
        match s.channel {
            Some(c) => format!("{stem}-ch{c}"),
            None => stem,
        }
    };
    let stems: Vec<String> = streams.iter().map(stem_of).collect();
    let clashes = |stem: &String| stems.iter().filter(|s| *s == stem).count() > 1;
    // the stems that are unique are taken first; a shared one gets `-<stream id>`, and a `-2`,
    // `-3`, ... more where that is another input's stem (inputs x-1.wav, a/x.wav, b/x.wav)
    let mut taken: std::collections::HashSet<String> =
        stems.iter().filter(|s| !clashes(s)).cloned().collect();
    stems
        .iter()
        .enumerate()
        .map(|(i, stem)| {
            let name = match clashes(stem) {
                false => stem.clone(),
                true => (1..)
                    .map(|k| match k {
                        1 => format!("{stem}-{i}"),
                        k => format!("{stem}-{i}-{k}"),
                    })
                    .find(|name| !taken.contains(name))
                    .unwrap_or_default(),
            };
            taken.insert(name.clone());
            PathBuf::from(format!("{name}.{}", format.extension()))
        })
        .collect()
}

/// issue 27: the rotation of each output (`--rotate`, SIGHUP: `sink::rotate_outputs`).
pub(super) fn rotations(
    run_spec: &RunSpec,
    dests: &[Destination],
    placed: &PlacedOutputs,
    streams: &[StreamMeta],
    writer_of: &[usize],
) -> Vec<Option<crate::sink::rotate::Rotation>> {
    use crate::sink::rotate::{now_epoch, RotateOptions, RowClock};
    let live = match &run_spec.source.input {
        Input::Files(files) => files.iter().any(|f| f == "-" || f.contains("://")),
        Input::Mic(_) | Input::Nats(_) => true,
    };
    let options = RotateOptions {
        guarded: GuardedFiles::of(&run_inputs(run_spec), other_outputs(run_spec)),
        spec: run_spec.output.rotate,
        clock: match live && !run_spec.source.realtime {
            true => RowClock::Wall,
            false => RowClock::RunStart(now_epoch()),
        },
    };
    let image_of = |i: usize| {
        let stream = streams.iter().find(|s| writer_of[s.id] == i)?.clone();
        // the image's options and the caption's analysis, not the whole run's spec
        let (png, analysis) = (run_spec.output.png, run_spec.analysis.clone());
        Some(crate::sink::rotate_outputs::image_maker(move |path| {
            ImageFile::new(path, &stream, &png, &analysis)
        }))
    };
    crate::sink::rotate_outputs::rotations(dests, placed, &options, &image_of)
}

/// Where the rows go, opened before any input is read.
pub(super) struct Sinks<T: Sample> {
    pub encoder: Box<dyn Encoder<T>>,
    pub dests: Vec<Destination>,
    pub placed: PlacedOutputs,
    /// What each output is, for `--meta` and messages.
    pub outputs: Vec<String>,
    /// The output each stream's rows go to.
    pub writer_of: Vec<usize>,
    pub rotations: Vec<Option<Rotation>>,
    pub meta_file: Option<DeferredFile>,
    pub tracer: Option<Arc<crate::trace::Tracer>>,
    /// `--events nats://`, connected before any output was opened (`open_events`).
    pub nats_events: Option<crate::alerts::events::EventWriter>,
    /// The shape of each output's rows where it is known before any comes, for an output
    /// that gets none (its csv header, its npy array of no rows).
    pub shapes: Vec<Option<RowShape>>,
}

impl<T: Sample> Sinks<T> {
    /// The destinations and their rotations, for the sink stage.
    pub(super) fn take_outputs(&mut self) -> (Vec<Destination>, Vec<Option<Rotation>>) {
        (
            std::mem::take(&mut self.dests),
            std::mem::take(&mut self.rotations),
        )
    }

    pub(super) fn open(
        run_spec: &RunSpec,
        rows: RowsPlanned<'_>,
        nats: Option<NatsConnection>,
        stop: &Arc<AtomicBool>,
        started: Instant,
    ) -> Result<Sinks<T>> {
        let streams = rows.streams;
        let plan = plan_outputs(run_spec, streams, rows.frame.0)?;
        refuse_overwriting_inputs(run_spec, &plan.files)?;
        let layout = rows.layout;
        let (format, scale) = (run_spec.analysis.format, run_spec.analysis.scale);
        let encoder = make_encoder::<T>(format, scale);
        let encoder = crate::sink::measured::wrap(encoder, format, layout);
        // (before any file is opened: a refusal leaves the user's files as they were)
        refuse_npy_without_a_file(&*encoder, &plan)?;
        let nats_events = super::open_events(run_spec, true, stop)?;
        // --meta is written at the end, but a place that cannot take it is found now
        let meta_file = (run_spec.output.meta.as_ref())
            .map(|path| deferred_output(path, stop))
            .transpose()?;
        let tracer = run_report::open_trace(run_spec, stop, started)?;
        let placed = match run_spec.output.rotate {
            Some(_) => Default::default(), // rotated files take rows in order
            None => {
                let values_of = |s: &StreamMeta| values_per_row(run_spec, &rows, s);
                let n = rows.frame.0;
                place_outputs(&*encoder, &plan, streams, rows.planned, n, values_of)
            }
        };
        let dests = match (nats, format) {
            (Some(connection), _) => {
                let to = NatsRows::new(connection, &run_spec.analysis, streams, rows.frame);
                vec![Destination::Messages(Box::new(to))]
            }
            (None, OutputFormat::Png) => image_destinations(run_spec, &plan, streams, stop)?,
            (None, _) => open_destinations(&plan, &placed, stop)?,
        };
        let outputs: Vec<String> = dests.iter().map(Destination::describe).collect();
        let shapes = row_shapes(run_spec, &rows, &plan.writer_of, dests.len());
        let writer_of = plan.writer_of;
        let rotations = rotations(run_spec, &dests, &placed, streams, &writer_of);
        Ok(Sinks {
            encoder,
            dests,
            placed,
            outputs,
            writer_of,
            rotations,
            meta_file,
            tracer,
            nats_events,
            shapes,
        })
    }
}

/// Per output, the shape of its rows before any comes: the first stream it takes, with the
/// run's frame size and the row's bins (its values over values per bin). None where the frame
/// is found from the input (`--frame whole`) or nothing goes to it.
fn row_shapes(
    run_spec: &RunSpec,
    rows: &RowsPlanned<'_>,
    writer_of: &[usize],
    outputs: usize,
) -> Vec<Option<RowShape>> {
    let per_bin = run_spec.analysis.scale.values_per_bin();
    let shape = |output: usize| {
        let (n, _) = run_spec.analysis.fixed()?;
        let s = rows.streams.iter().find(|s| writer_of[s.id] == output)?;
        let bins = values_per_row(run_spec, rows, s) / per_bin;
        Some(RowShape {
            stream: s.id,
            n,
            bins,
        })
    };
    (0..outputs).map(shape).collect()
}

/// What the outputs are sized by: the streams, their frames, the rows known up front and the
/// measurements after each row's columns.
pub(super) struct RowsPlanned<'a> {
    pub streams: &'a [StreamMeta],
    pub frame: (usize, usize),
    pub planned: &'a [Option<u64>],
    pub layout: Option<&'a Arc<crate::products::measure::MeasureLayout>>,
}

/// Values in one row of stream `s`: its columns (or bins) times values per bin, plus the
/// measurements after them.
fn values_per_row(run_spec: &RunSpec, rows: &RowsPlanned<'_>, s: &StreamMeta) -> usize {
    let extras = rows.layout.map_or(0, |l| l.extras());
    match &s.columns {
        Some(_) if rows.layout.is_some_and(|l| l.cross_bins.is_some()) => extras,
        Some(columns) => columns.len() * run_spec.analysis.scale.values_per_bin() + extras,
        None => run_spec
            .transform(rows.frame.0, s.kind, s.rate)
            .values_out(),
    }
}

/// `--meta` at the end of a run: what each stream became, and the run's error if it failed or
/// whether a signal stopped it (`interrupted`).
pub(super) fn write_run_meta(
    run_spec: &RunSpec,
    file: Option<DeferredFile>,
    (streams, written): (&[StreamMeta], &[super::StreamWritten]),
    (outputs, writer_of): (&[String], &[usize]),
    (error, interrupted): (Option<&FftdError>, bool),
) -> Result<()> {
    let (Some(path), Some(file)) = (&run_spec.output.meta, file) else {
        return Ok(());
    };
    let file = file.create().map_err(|e| FftdError::io(path, e))?;
    let summaries: Vec<StreamSummary<'_>> = streams
        .iter()
        .zip(written)
        .map(|(meta, w)| StreamSummary {
            meta,
            // a stream that gave no frame used the run's frame (unknown with --frame whole)
            n: match w.n {
                0 => run_spec.analysis.fixed().map_or(0, |(n, _)| n),
                n => n,
            },
            hop: run_spec.analysis.fixed().map_or(w.n, |(_, hop)| hop),
            frames: w.frames,
            output: outputs[writer_of[meta.id]].clone(),
        })
        .collect();
    let failure = error.map(ToString::to_string);
    let analysis = &run_spec.analysis;
    let input_format = run_spec.source.input_format;
    write_meta(
        path,
        file,
        analysis,
        input_format,
        &summaries,
        RunEnd {
            error: failure.as_deref(),
            interrupted,
        },
    )
}
