//! fftd: a streaming spectrum analyser. Sources cut signals into frames, the FFT stage transforms
//! batches of frames on the CPU or an OpenCL device, sinks write spectra in formats other tools read.
//!
//! Data path: `source` → `frame::Framer` → `pipeline` (batching, workers, ordering) → `fft` → `sink`.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod alerts;
pub mod app;
pub mod bench;
pub mod check;
pub mod console;
pub mod devices;
pub mod error;
pub mod fft;
pub mod fleet;
pub mod frame;
pub mod heap;
pub mod knobs;
pub mod left_behind;
pub mod limits;
pub mod pipeline;
pub mod products;
pub mod progress;
pub mod record;
pub mod serve;
pub mod setup_log;
pub mod sink;
pub mod source;
pub mod stats;
pub mod timeline;
pub mod trace;
pub mod types;
pub mod window;
