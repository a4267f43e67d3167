//! The arithmetic precision of a run (`--precision`).

use serde::Deserialize;

/// Arithmetic precision of the transform (`--precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    F32,
    F64,
}

impl Precision {
    /// "f32" or "f64".
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// Runs `job` with the sample type of this precision: the one place a run's precision
    /// becomes a type.
    pub fn dispatch<J: WithSample>(self, job: J) -> J::Output {
        match self {
            Precision::F32 => job.run::<f32>(),
            Precision::F64 => job.run::<f64>(),
        }
    }
}

/// Work generic over the sample type, started by `Precision::dispatch`.
pub trait WithSample {
    type Output;
    fn run<T: super::Sample>(self) -> Self::Output;
}
