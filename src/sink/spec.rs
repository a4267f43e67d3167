//! What the output stage is given: where rows go and what else is written (built by `app` from
//! the command line and config file; what the rows hold is the run's `Analysis`).

use super::png::PngOptions;
use std::path::PathBuf;

/// Destinations.
#[derive(Clone, Debug)]
pub struct OutputSpec {
    /// `--output` (None: stdout).
    pub output: Option<PathBuf>,
    /// `--output-dir`: one file per stream.
    pub output_dir: Option<PathBuf>,
    /// `--meta`: the JSON sidecar.
    pub meta: Option<PathBuf>,
    /// Image size and colour range of `--format png`.
    pub png: PngOptions,
    /// The config file the options were read from (an input: never overwritten).
    pub config: Option<PathBuf>,
    /// Other files the run reads, by flag (`--calibration-file`, `--serve-token-file`,
    /// `--serve-tls-cert`, `--serve-tls-key`): inputs too.
    pub also_read: Vec<(&'static str, PathBuf)>,
    /// `--rotate`: when each output file ends (`sink::rotate`).
    pub rotate: Option<super::rotate::RotateSpec>,
}
