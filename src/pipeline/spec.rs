//! A run as the pipeline is given it: each stage's own spec, built by `app` from the command
//! line and config file. The pipeline hands each stage its part; no stage sees the options.

use crate::fft::spec::EngineSpec;
use crate::fleet::output::NatsOutput;
use crate::serve::options::ServeSettings;
use crate::sink::analysis::Analysis;
use crate::sink::spec::OutputSpec;
use crate::source::spec::SourceSpec;
use std::path::PathBuf;

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
