//! A run as the pipeline is given it: each stage's own spec, built by `app` from the command
//! line and config file. The pipeline hands each stage its part (`BatchSpec`, `ReadSpec`, built
//! from the `RunSpec` where the stages are wired); no stage sees the options.

use crate::fft::spec::EngineSpec;
use crate::fleet::output::NatsOutput;
use crate::frame::{FrameSize, Tail};
use crate::serve::options::ServeSettings;
use crate::sink::analysis::Analysis;
use crate::sink::spec::OutputSpec;
use crate::source::spec::SourceSpec;
use std::path::PathBuf;
use std::time::Duration;

/// What a run reports about itself.
#[derive(Clone, Debug, Default)]
pub struct ReportSpec {
    /// `--stats`: the run's figures on stderr at the end.
    pub stats: bool,
    /// `--trace`: where the run's timeline goes.
    pub trace: Option<PathBuf>,
    /// `--quiet`: no progress line.
    pub quiet: bool,
}

/// One run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// What is computed and how it is written (framing, window, scale, products, format).
    pub analysis: Analysis,
    pub source: SourceSpec,
    pub engine: EngineSpec,
    pub output: OutputSpec,
    pub report: ReportSpec,
    /// `--serve` and its `--serve-*` options: where the live view listens, who may look.
    pub serve: Option<ServeSettings>,
    /// A local run publishing its rows to NATS (`--output nats://...`).
    pub nats_output: Option<NatsOutput>,
    /// `--alert`, `--events` (`alerts`).
    pub alerts: crate::alerts::AlertOptions,
    /// `--record-on-alert`, `--pre`, `--post` (`record`).
    pub record: Option<crate::record::RecordOptions>,
}

impl RunSpec {
    /// The transform every batch of frames of `n` samples of `kind` at `rate` Hz gets.
    pub(crate) fn transform(
        &self,
        n: usize,
        kind: crate::types::InputKind,
        rate: f64,
    ) -> crate::fft::TransformSpec {
        let analysis = &self.analysis;
        crate::fft::TransformSpec {
            n,
            kind,
            window: analysis.window,
            scale: analysis.products.engine_scale(analysis.scale),
            rate,
        }
    }
}

/// What the batcher is given (`batcher`): how many frames make a batch, how long a batch's
/// oldest frame may wait, and whether each frame loses its mean first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchSpec {
    /// `--batch` (0: auto).
    batch: usize,
    /// Default batches sized for OpenCL devices (`EngineSpec::device_batches`).
    device_batches: bool,
    /// `--max-latency`.
    pub max_wait: Duration,
    /// `--dc-remove`.
    pub dc_remove: bool,
}

impl BatchSpec {
    pub(crate) fn of(run: &RunSpec) -> BatchSpec {
        BatchSpec {
            batch: run.engine.batch,
            device_batches: run.engine.device_batches,
            max_wait: Duration::from_secs_f64(run.engine.max_latency_ms / 1000.0),
            dc_remove: run.analysis.dc_remove,
        }
    }

    /// Frames per batch for frames of `n` samples (as `EngineSpec::batch_frames`).
    pub(crate) fn frames(&self, n: usize) -> usize {
        crate::fft::spec::batch_frames_for(self.batch, self.device_batches, n)
    }
}

/// What a reader is given (`reader`): how each stream of an input is framed and where it stops.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadSpec {
    pub frame: FrameSize,
    /// The hop of fixed-size frames (1 with `--frame whole`, where it only counts lost frames).
    pub hop: usize,
    pub tail: Tail,
    /// `--duration`, in seconds of each stream.
    pub duration: Option<f64>,
    /// `--max-frames` per stream (`u64::MAX`: none).
    pub max_frames: u64,
    /// `--realtime`: each input held to its sample rate.
    pub realtime: bool,
}

impl ReadSpec {
    pub(crate) fn of(run: &RunSpec) -> ReadSpec {
        ReadSpec {
            frame: run.analysis.frame,
            hop: run.analysis.fixed().map_or(1, |(_, hop)| hop),
            tail: run.analysis.tail,
            duration: run.source.duration,
            max_frames: run.source.max_frames.unwrap_or(u64::MAX),
            realtime: run.source.realtime,
        }
    }
}
