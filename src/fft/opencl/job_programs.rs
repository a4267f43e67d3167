//! A job's programs on one device, built by a process of their own. A run ends as soon as its
//! output is complete, without waiting for a device start-up still under way
//! (`left_behind`); a start-up that was building the job's programs then leaves the driver's
//! program cache without them, so the next run of the job builds them from source again (0.26–
//! 0.67 s a job on an H200), and again each run that ends before its build does (issue 41:
//! log-mel on 4 GiB, 16 cores, ended before its build in every run with a cold cache). Such a
//! run hands the build on at its exit (`left_behind::hand_on_unbuilt`) to `fftd
//! build-programs`, a hidden command that builds what its first batch would have and ends.
//!
//! Takes: what a job's first batch builds (`JobPrograms`: the device, the transform, the
//! precision, the reductions and the carriage), as flags. Gives: the programs built, in the
//! driver's cache where it keeps one.

use super::device::device_at;
use super::{OpenClEngine, OpenClOptions};
use crate::fft::{BandWeights, RowFinish, SegmentOp, Segments, TransformSpec};
use crate::types::{InputKind, Precision, Sample};
use crate::window::WindowKind;

/// What a job's first batch builds on one device (`fftd build-programs`' flags, which
/// `app::build_programs` reads and `command_line` writes).
#[derive(Clone, Debug, PartialEq)]
pub struct JobPrograms {
    /// The device, `opencl:P:D`.
    pub device: String,
    /// Samples per frame.
    pub frame: usize,
    /// Complex (I/Q) samples.
    pub complex: bool,
    pub window: WindowKind,
    pub scale: crate::fft::Scale,
    pub precision: Precision,
    /// Bands summed on the device.
    pub bands: bool,
    /// Runs of rows reduced on the device (`--average`).
    pub runs: bool,
    /// Samples cross as f32 (an f64 run's widening kernel).
    pub samples_f32: bool,
    /// Rows cross as f32 (an f64 run's narrowing kernel).
    pub rows_f32: bool,
}

impl JobPrograms {
    /// The hidden command's name.
    pub const COMMAND: &'static str = "build-programs";

    /// The command line (after the program's name) that builds these programs.
    pub(crate) fn command_line(&self) -> Vec<String> {
        let mut line = vec![Self::COMMAND.to_string()];
        let mut flag = |name: &str, value: String| {
            line.push(format!("--{name}"));
            line.push(value);
        };
        flag("device", self.device.clone());
        flag("frame", self.frame.to_string());
        flag("window", value_name(self.window));
        flag("scale", value_name(self.scale));
        flag("precision", value_name(self.precision));
        let switches = [
            (self.complex, "--complex"),
            (self.bands, "--bands"),
            (self.runs, "--runs"),
            (self.samples_f32, "--samples-f32"),
            (self.rows_f32, "--rows-f32"),
        ];
        let on = switches.into_iter().filter(|&(on, _)| on);
        line.extend(on.map(|(_, name)| name.to_string()));
        line
    }

    /// Builds the programs: one frame of zeros through an engine on the device, as a device
    /// lane's warm-up does (`fft::warm`).
    pub fn build(&self) -> Result<(), String> {
        match self.precision {
            Precision::F32 => self.build_in::<f32>(),
            Precision::F64 => self.build_in::<f64>(),
        }
    }

    fn build_in<T: Sample>(&self) -> Result<(), String> {
        let (platform, device) = platform_and_device(&self.device)
            .ok_or_else(|| format!("--device {}: not opencl:P:D", self.device))?;
        let entry = device_at(platform, device)?;
        let mut engine = OpenClEngine::<T>::new(entry, OpenClOptions::from_env())?;
        let spec = TransformSpec {
            n: self.frame,
            kind: match self.complex {
                true => InputKind::Complex,
                false => InputKind::Real,
            },
            window: self.window,
            scale: self.scale,
            rate: 1.0,
        };
        // (a band's program and the runs' do not depend on the bands or runs themselves)
        let band = self.bands.then(|| one_band(spec.bins()));
        let runs = self.runs.then_some(Segments {
            lengths: &[1],
            op: SegmentOp::Sum,
        });
        let row_len = if self.bands { 1 } else { spec.values_out() };
        let carried = (self.samples_f32, self.rows_f32);
        let reduction = (band.as_ref(), runs.as_ref());
        crate::fft::warm::warm_once(&mut engine, &spec, carried, reduction, row_len)
            .map_err(|e| e.to_string())
    }
}

/// P and D of `opencl:P:D`.
fn platform_and_device(address: &str) -> Option<(usize, usize)> {
    let (platform, device) = address.strip_prefix("opencl:")?.split_once(':')?;
    Some((platform.parse().ok()?, device.parse().ok()?))
}

/// `value`'s name on the command line: its `Debug` name in kebab case, as the value enums'
/// flags take it (`BlackmanHarris` as `blackman-harris`, `F64` as `f64`).
fn value_name(value: impl std::fmt::Debug) -> String {
    let mut name = String::new();
    for (i, c) in format!("{value:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// One band of the first bin.
fn one_band(bins: usize) -> BandWeights {
    BandWeights {
        bins,
        first: vec![0],
        len: vec![1],
        offset: vec![0],
        weights: vec![1.0],
        id: 0,
        finish: RowFinish::AsIs,
    }
}
