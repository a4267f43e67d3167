//! `fftd bench`'s command line: its flags (their doc comments are the `--help` text) and the
//! plain `bench::BenchSpec` they become, so that `bench` never sees the command line.

use crate::bench::{BenchKind, BenchSpec, MAX_REPS};
use crate::error::{FftdError, Result};
use crate::fft::router::DeviceChoice;
use crate::fft::Scale;
use crate::limits::MAX_BATCH_SAMPLES;
use crate::types::whole_in;
use crate::window::WindowKind;
use std::path::PathBuf;

/// Input kind for the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    Real,
    Complex,
}

fn parse_device(s: &str) -> Result<DeviceChoice, String> {
    s.parse()
}

/// `fftd bench` options.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Frame sizes: powers of two from A to B (`2..2^21`, `256..65536`) or a comma list
    /// (`1024,4096`), each at most 2^26; all checked before any is timed.
    #[arg(long, value_name = "A..B|LIST", default_value = "2..2^21")]
    pub sizes: String,
    /// Frames per batch (default: --batch-samples / n, at least 1).
    #[arg(long, value_name = "B", value_parser = whole_in::<usize>(1, MAX_BATCH_SAMPLES as u64))]
    pub batch: Option<usize>,
    /// Samples per batch when --batch is not given (the pipeline's default batch is 2^18).
    #[arg(long, value_name = "N", default_value_t = 1 << 18,
        value_parser = whole_in::<usize>(1, MAX_BATCH_SAMPLES as u64))]
    pub batch_samples: usize,
    /// Also write the rows as CSV to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Measure and cache a new calibration for `--device auto` (then exit).
    #[arg(long)]
    pub calibrate: bool,
    /// OpenCL device: gpu (best device), auto, opencl:P:D, cpu (CPU engine only), or several
    /// (gpu:all, a list such as opencl:1:0,opencl:1:1): the table is the first device's, then
    /// all devices at once (aggregate host-to-host rate, ratio to one device, shares).
    #[arg(long, default_value = "gpu", value_parser = parse_device)]
    pub device: DeviceChoice,
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: crate::types::Precision,
    #[arg(long, value_enum, default_value = "real")]
    pub kind: KindArg,
    #[arg(long, value_enum, default_value = "hann")]
    pub window: WindowKind,
    #[arg(long, value_enum, default_value = "magnitude")]
    pub scale: Scale,
    /// Timed runs per size, 1 to 100000 (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = whole_in::<usize>(1, MAX_REPS))]
    pub reps: usize,
    /// Band powers (as the pipeline's --bands: mel:N, octave, third-octave) summed by each engine
    /// from power spectra (on the device for OpenCL); times and errors are of the band rows.
    #[arg(long, value_name = "SPEC")]
    pub bands: Option<crate::products::bands::BandSpec>,
    /// Each run of N frames reduced to its mean by the engine (as the pipeline's `--average N`
    /// of means; on the device for OpenCL); times and errors are of the reduced rows.
    #[arg(long, value_name = "N", value_parser = whole_in::<u32>(1, MAX_BATCH_SAMPLES as u64))]
    pub average: Option<u32>,
    /// Sample rate --bands are laid out for, in Hz [default: 48000].
    #[arg(long, value_name = "HZ", value_parser = crate::app::units::rate_hz)]
    pub rate: Option<f64>,
    /// Skip the CPU engine (for very large batches).
    #[arg(long)]
    pub no_cpu: bool,
    /// With several devices (`--device gpu:all` or a list): milliseconds each device runs alone,
    /// and all run together, per size [default: 300].
    #[arg(long, value_name = "MS", value_parser = whole_in::<u64>(1, 600_000))]
    pub run_ms: Option<u64>,
}

impl BenchArgs {
    /// The benchmark these flags ask for; `--rate` without `--bands`, and `--run-ms` with one
    /// device, are refused (each would be taken and do nothing).
    pub fn spec(&self) -> Result<BenchSpec> {
        if let (Some(rate), None) = (self.rate, &self.bands) {
            return Err(FftdError::Usage(format!(
                "--rate {}: the rate lays out --bands' edges; give --bands (mel:N, octave, third-octave) or leave --rate out",
                crate::types::shown(rate)
            )));
        }
        // (as a run refuses them: the bands and sums are of power)
        if self.scale == Scale::Complex && (self.bands.is_some() || self.average.is_some()) {
            return Err(FftdError::Usage(
                crate::products::COMPLEX_NEEDS_POWER.into(),
            ));
        }
        let several = match &self.device {
            DeviceChoice::AllGpus => true,
            DeviceChoice::List(devices) => devices.len() > 1,
            _ => false,
        };
        if let (Some(ms), false) = (self.run_ms, several) {
            return Err(FftdError::Usage(format!(
                "--run-ms {ms}: times several devices run together; give --device gpu:all or a list such as opencl:1:0,opencl:1:1, or leave --run-ms out"
            )));
        }
        Ok(BenchSpec {
            sizes: self.sizes.clone(),
            batch: self.batch,
            batch_samples: self.batch_samples,
            csv: self.csv.clone(),
            calibrate: self.calibrate,
            device: self.device.clone(),
            precision: self.precision,
            kind: match self.kind {
                KindArg::Real => BenchKind::Real,
                KindArg::Complex => BenchKind::Complex,
            },
            window: self.window,
            scale: self.scale,
            reps: self.reps,
            bands: self.bands.clone(),
            average: self.average,
            rate: self.rate.unwrap_or(48_000.0),
            no_cpu: self.no_cpu,
            run_ms: self.run_ms.unwrap_or(300),
        })
    }
}
