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
use crate::fft::device_choice::DeviceChoice;
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
        flag("window", self.window.name().into());
        // the products' scaled power builds power's programs (its unit is a kernel argument)
        let scale = match self.scale {
            crate::fft::Scale::ScaledPower => crate::fft::Scale::Power,
            scale => scale,
        };
        flag("scale", scale.name().into());
        flag("precision", self.precision.name().into());
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
    /// lane's warm-up does (`fft::warm`). At nice 10 from its first thread on (the driver's
    /// threads inherit it), for at most `BUILDER_TIME_LIMIT`, and not at all while another
    /// builder of the same programs is at work (runs back to back hand on the same build).
    pub fn build(&self) -> Result<(), String> {
        // SAFETY: `setpriority` only reads its arguments; a failure leaves the priority as it is
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
        let Some(_only_builder) = self.only_builder() else {
            return Ok(());
        };
        std::thread::spawn(|| {
            std::thread::sleep(BUILDER_TIME_LIMIT);
            // SAFETY: `_exit` ends the process at once; a builder has no output to lose, and
            // the driver's cache takes a program whole or not at all
            unsafe { libc::_exit(1) }
        });
        match self.precision {
            Precision::F32 => self.build_in::<f32>(),
            Precision::F64 => self.build_in::<f64>(),
        }
    }

    /// A lock on these programs' file in fftd's cache folder, held until the process ends;
    /// None while another builder holds it. Without a cache folder (or a lock file) the
    /// builder goes on unguarded.
    fn only_builder(&self) -> Option<Option<std::fs::File>> {
        use std::os::fd::AsRawFd;
        let programs = crate::types::fingerprint(&self.command_line().join(" "));
        let name = format!("build-programs-{programs}.lock");
        let dir = crate::fft::calibrate::cache_dir();
        let file = dir.and_then(|d| {
            std::fs::create_dir_all(&d).ok()?;
            std::fs::File::create(d.join(name)).ok()
        });
        let Some(file) = file else {
            return Some(None);
        };
        // SAFETY: `flock` on a descriptor this function owns (`file`, kept in the result)
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        (locked == 0).then_some(Some(file))
    }

    fn build_in<T: Sample>(&self) -> Result<(), String> {
        let (platform, device) = platform_and_device(&self.device)
            .ok_or_else(|| format!("--device {}: not opencl:P:D", self.device))?;
        let entry = device_at(platform, device)?;
        // (no injected fault: the builder has no batches, and a run's held warm-up must not
        // hold its builder too)
        let options = OpenClOptions {
            fault: None,
            ..OpenClOptions::from_env()
        };
        let mut engine = OpenClEngine::<T>::new(entry, options)?;
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
            op: SegmentOp::Mean,
        });
        let row_len = if self.bands { 1 } else { spec.values_out() };
        let carried = (self.samples_f32, self.rows_f32);
        let reduction = (band.as_ref(), runs.as_ref());
        crate::fft::warm::warm_once(&mut engine, &spec, carried, reduction, row_len)
            .map_err(|e| e.to_string())
    }
}

/// The longest a builder runs: a driver that hangs in a build leaves no builder behind for
/// long (a build took 0.9–1.2 s on an H200 with an empty cache, session 37).
const BUILDER_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// P and D of `opencl:P:D` (as `--device` reads it).
fn platform_and_device(address: &str) -> Option<(usize, usize)> {
    match crate::fft::device_choice::parse_single(address) {
        Ok(DeviceChoice::OpenCl { platform, device }) => Some((platform, device)),
        _ => None,
    }
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
        unit: 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_builder_of_the_same_programs_at_a_time() {
        let job = JobPrograms {
            device: "opencl:0:0".into(),
            frame: 12345,
            complex: false,
            window: WindowKind::Hann,
            scale: crate::fft::Scale::Magnitude,
            precision: Precision::F32,
            bands: false,
            runs: false,
            samples_f32: false,
            rows_f32: false,
        };
        let first = job.only_builder().expect("no builder before");
        if first.is_none() {
            return; // no cache folder here: builders go unguarded
        }
        assert!(
            job.only_builder().is_none(),
            "a second builder of the same programs"
        );
        let other = JobPrograms {
            frame: 12346,
            ..job.clone()
        };
        assert!(
            other.only_builder().is_some(),
            "other programs have a lock of their own"
        );
        drop(first);
        assert!(
            job.only_builder().is_some(),
            "the lock ends with its builder"
        );
    }
}
