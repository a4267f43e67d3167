//! The top layer: the only part of fftd that sees the command line (`cli`) and the config file
//! (`config_file`). `config` merges and validates them into `Settings`, the run's spec for each
//! stage (`pipeline::spec::RunSpec`) and a fleet worker's addresses; every module below takes
//! its own spec and never the options. `bench_args` holds `fftd bench`'s flags, handed to `bench`
//! as a plain `BenchSpec`; `fleet_args` the `--nats-*` flags and `fftd fleet`'s, handed to
//! `fleet` as its plain `NatsArgs` and `SetupArgs`; `build_programs` the hidden `fftd
//! build-programs`' flags, handed to `fft::opencl::job_programs` as a plain `JobPrograms`.

pub(crate) mod applies;
pub(crate) mod bench_args;
pub mod build_programs;
pub mod cli;
pub mod config;
pub(crate) mod config_file;
pub mod fleet_args;
pub(crate) mod fleet_options;
mod merge;
pub(crate) mod options;
mod product_options;
pub mod publish;
pub(crate) mod serve_options;
pub(crate) mod sweep_options;
pub(crate) mod units;
mod unused_keys;
