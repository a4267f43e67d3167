//! fftd: a streaming spectrum analyser. Sources cut signals into frames, the FFT stage transforms
//! batches of frames on the CPU or an OpenCL device, sinks write spectra in formats other tools read.
//!
//! Data path: `source` → `frame::Framer` → `pipeline` (batching, workers, ordering) → `fft` → `sink`.
//!
//! The library's API is what the `fftd` binary and the integration tests (tests/) use, and only
//! that is `pub`; everything else is `pub(crate)` (`unreachable_pub` warns of a `pub` item no
//! one outside can reach):
//! - for the binary: `app` (command line, options, config), `pipeline::run`, `check`, `bench`,
//!   `devices`, `fleet` (worker and publisher), `alerts::EventsNats`, `error` (messages and exit
//!   codes), `heap`, `left_behind`, `sink::stuck_write`;
//! - for the tests, the parts they check against references: `fft` (the CPU and OpenCL engines,
//!   their specs, the router, calibration, `compare`), `source` (the readers), `frame`, `window`,
//!   `products` (averaging, bands, measurements), `types`.

#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(unreachable_pub)]

pub mod alerts;
pub mod app;
pub mod bench;
pub mod check;
pub(crate) mod console;
pub mod devices;
pub mod error;
pub mod fft;
pub mod fleet;
pub mod frame;
pub mod heap;
pub(crate) mod knobs;
pub mod left_behind;
pub(crate) mod limits;
pub mod pipeline;
pub mod products;
pub(crate) mod progress;
pub(crate) mod record;
pub(crate) mod serve;
pub(crate) mod setup_log;
pub mod sink;
pub mod source;
pub(crate) mod stats;
pub mod stdio;
pub(crate) mod timeline;
pub(crate) mod trace;
pub mod types;
pub mod window;
