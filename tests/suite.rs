//! The integration tests in one binary: one build and one link for ~50 files of tests instead of
//! one each (issue 39: the suite's build was most of its time), and the harness keeps both cores
//! busy across files instead of waiting for each file's slowest test. Each file below is a
//! module; they share the helpers in `common` and `fleet_common`. Run one file's tests with
//! `cargo test --release --test suite FILE::` (e.g. `fleet::`). Tests that change or measure the
//! whole process (environment variables, `getrusage` of all children) stay binaries of their own
//! (Cargo.toml lists every test binary; `autotests = false`).
mod common;
mod fleet_common;

mod alerts;
mod alerts_browser;
mod audio_inputs;
mod audio_prop;
mod average_scipy;
mod bands_librosa;
mod cli;
mod complex_scale;
mod cross_scipy;
mod daemon;
mod flags;
mod fleet;
mod fleet_auth;
mod fleet_connections;
mod fleet_retry;
mod hardening;
mod honest_numbers;
mod knobs;
mod layers;
mod many_outputs;
mod measure;
mod mic;
mod nats_output;
mod numerics;
mod opencl_builder;
mod opencl_cli;
mod opencl_sizes_cli;
mod output_bytes;
mod outputs_on_failure;
mod pipes;
mod placed_output;
mod png_output;
mod products;
mod progress;
mod radio;
mod range_reader;
mod record;
mod retry;
mod rotate;
mod rtl_tcp;
mod serve;
mod serve_browser;
mod serve_safe;
mod soapy;
mod sweep;
mod trace_stats;
