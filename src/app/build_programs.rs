//! `fftd build-programs`' flags (hidden: a run starts it at its exit for the programs its
//! device start-up was still building, `left_behind`): what a job's first batch builds on one
//! device (`fft::opencl::job_programs::JobPrograms`, whose `command_line` writes these flags).

use crate::fft::opencl::job_programs::JobPrograms;
use crate::fft::Scale;
use crate::types::Precision;
use crate::window::WindowKind;

/// The flags of `fftd build-programs`.
#[derive(clap::Args, Debug)]
pub struct BuildProgramsArgs {
    /// The device, `opencl:P:D`.
    #[arg(long, value_name = "opencl:P:D")]
    pub device: String,
    /// Samples per frame.
    #[arg(long, value_name = "N")]
    pub frame: usize,
    /// Complex (I/Q) samples.
    #[arg(long)]
    pub complex: bool,
    #[arg(long, value_enum)]
    pub window: WindowKind,
    #[arg(long, value_enum)]
    pub scale: Scale,
    #[arg(long, value_enum)]
    pub precision: Precision,
    /// Bands summed on the device.
    #[arg(long)]
    pub bands: bool,
    /// Runs of rows reduced on the device (`--average`).
    #[arg(long)]
    pub runs: bool,
    /// Samples cross as f32 (an f64 run's widening kernel).
    #[arg(long)]
    pub samples_f32: bool,
    /// Rows cross as f32 (an f64 run's narrowing kernel).
    #[arg(long)]
    pub rows_f32: bool,
}

impl BuildProgramsArgs {
    /// The programs these flags name.
    pub fn job(self) -> JobPrograms {
        JobPrograms {
            device: self.device,
            frame: self.frame,
            complex: self.complex,
            window: self.window,
            scale: self.scale,
            precision: self.precision,
            bands: self.bands,
            runs: self.runs,
            samples_f32: self.samples_f32,
            rows_f32: self.rows_f32,
        }
    }
}
