//! fftd's error type and the one place errors become a message and an exit code:
//! 0 ok, 1 runtime error, 2 usage error.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum FftdError {
    /// Bad command line or config: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Bad input data: names the file, and the line or offset where it applies.
    #[error("{path}: {what}")]
    Input { path: String, what: String },
    /// An I/O failure on a named path.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Anything else that went wrong while running: exit 1.
    #[error("{0}")]
    Runtime(String),
    /// SIGINT/SIGTERM ended a run before it could start (a FIFO waiting for its other end):
    /// said on stderr, exit 0 as for any interrupted run.
    #[error("{0}")]
    Stopped(String),
}

impl FftdError {
    pub fn exit_code(&self) -> i32 {
        match self {
            FftdError::Usage(_) => 2,
            FftdError::Stopped(_) => 0,
            _ => 1,
        }
    }

    pub fn input(path: impl Into<String>, what: impl Into<String>) -> Self {
        FftdError::Input {
            path: path.into(),
            what: what.into(),
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FftdError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = FftdError> = std::result::Result<T, E>;
