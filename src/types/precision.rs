//! The arithmetic precision of a run (`--precision`).

use serde::Deserialize;

/// Arithmetic precision of the transform (`--precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    F32,
    F64,
}
