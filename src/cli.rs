//! The command line: `fftd [OPTIONS]` runs the analysis; `devices`, `check` and `bench` are
//! subcommands. Options are defined once in `config::Options` (also the config-file keys).

use crate::config::Options;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "fftd",
    version,
    about = "Streaming spectrum analyser: files, stdin or a microphone in; magnitude spectra out",
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  fftd --file examples/input.txt --frame whole --rate 8000\n  fftd --file examples/tones.wav --frame 1024 --hop 256 --scale db --format csv\n  fftd --file rec.wav --frame 4096 --hop 1024 --format f32 > spectra.f32\n  fftd --mic --scale db --format ndjson"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Read options from a TOML file (see config/fftd.toml); command-line flags win.
    #[arg(long, value_name = "PATH", global = true)]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub options: Options,

    /// NATS credentials and TLS for fleet workers (`--file nats://...`) and for a run publishing
    /// its rows (`--output nats://...`).
    #[command(flatten)]
    pub nats: crate::fleet::connect::NatsArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List OpenCL platforms/devices and audio inputs.
    Devices,
    /// Run the same frames on the CPU and on OpenCL and compare (exit 1 on any mismatch).
    Check(Box<CheckArgs>),
    /// Time the CPU and OpenCL engines per frame size; find the break-even; calibrate `auto`.
    Bench(Box<crate::bench::BenchArgs>),
    /// Send recordings or live capture to a fleet's work stream as frame-aligned sample blocks
    /// (NATS JetStream; docs/fleet.md).
    Publish(Box<crate::fleet::publish::PublishArgs>),
    /// Fleet administration: `fftd fleet setup` creates the streams and the workers' consumer.
    #[command(subcommand)]
    Fleet(crate::fleet::FleetCommand),
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Largest allowed difference, relative to each frame's largest bin [default: 1e-4 with f32,
    /// 1e-10 with --precision f64].
    #[arg(long, value_name = "REL")]
    pub tolerance: Option<f64>,

    #[command(flatten)]
    pub options: Options,
}
