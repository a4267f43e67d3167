//! fftd: a streaming spectrum analyser. Sources cut signals into frames, the FFT stage transforms
//! batches of frames on the CPU or an OpenCL device, sinks write spectra in formats other tools read.
//!
//! Data path: `source` → `frame::Framer` → `pipeline` (batching, workers, ordering) → `fft` → `sink`.

pub mod bench;
pub mod error;
pub mod fft;
pub mod window;
