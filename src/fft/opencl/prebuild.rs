//! Programs built side by side. A job's first batch on a device may need several programs: a
//! four-step, three-stage or two-level plan has one per stage, and the band sums, the run
//! reduction and an f64 run's carriage each have their own beside the plan. Built one after
//! the other, a job's first run on a fresh machine waited for their sum (a cold NVIDIA build
//! takes 0.1–0.6 s each, issue 41). Here the others build on threads of their own while the
//! caller's thread builds the one it needs first, so the batch waits for the longest.
//!
//! Takes: the device, the programs to build besides (`ProgramSource`), and the caller's own
//! build. Gives: that build's result, once every program of the list is built or its failure
//! cached on the device (`SharedDevice::program_of`), where the caller's later requests find
//! it. A program the device already has, or is building, is not asked for again.

use super::device::{ProgramSource, SharedDevice};
use crate::fft::Reduction;
use crate::types::Sample;

/// Runs `first` on this thread while `others` build on threads of their own; returns once all
/// are done. A thread that cannot be started leaves its program to the caller's later request.
pub(super) fn alongside<R>(
    dev: &SharedDevice,
    others: &[ProgramSource<'_>],
    first: impl FnOnce() -> R,
) -> R {
    let others: Vec<&ProgramSource<'_>> = others.iter().filter(|p| !dev.knows(p)).collect();
    if others.is_empty() {
        return first();
    }
    std::thread::scope(|scope| {
        for source in others {
            let build = move || drop(dev.program_of(source));
            let started = std::thread::Builder::new()
                .name("fftd-build".into())
                .spawn_scoped(scope, build);
            if let Err(e) = started {
                tracing::debug!(program = source.name, "no thread to build it beside: {e}");
            }
        }
        first()
    })
}

/// The programs a batch needs besides its plan: the band sums' (`bands`), the run reduction's
/// (`runs`), and the f64 carriage's widen and narrow (`carried`: samples or rows cross as f32).
pub(super) fn besides_the_plan<T: Sample>(
    (bands, runs): Reduction<'_>,
    carried: bool,
) -> Vec<ProgramSource<'static>> {
    let bands = bands.map(|_| super::bands::program_source::<T>());
    let runs = runs.map(|_| super::segments::program_source::<T>());
    let carriage = carried.then(super::carry::program_source);
    [bands, runs, carriage].into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// The device the OpenCL tests use (PoCL in CI); None only with FFTD_SKIP_OPENCL_TESTS=1.
    fn device() -> Option<Arc<SharedDevice>> {
        match super::super::device::best_device() {
            Ok(entry) => Some(SharedDevice::open(entry).expect("a context on the test device")),
            Err(_) if std::env::var("FFTD_SKIP_OPENCL_TESTS").as_deref() == Ok("1") => None,
            Err(e) => {
                panic!("no OpenCL device ({e}); install PoCL or set FFTD_SKIP_OPENCL_TESTS=1")
            }
        }
    }

    fn source(options: &str, text: &'static [&'static str]) -> ProgramSource<'static> {
        ProgramSource {
            name: "prebuild-test",
            sources: text,
            options: options.into(),
        }
    }

    const GOOD: &[&str] = &["__kernel void one(__global float *x) { x[0] = 1.0f; }"];
    const BAD: &[&str] = &["__kernel void one(__global float *x) { x[0] = ; }"];

    #[test]
    fn the_others_build_while_the_first_does_and_their_results_stay_on_the_device() {
        let Some(dev) = device() else { return };
        let (good, bad) = (source("-D BESIDE=1", GOOD), source("-D BESIDE=2", BAD));
        let mine = source("-D BESIDE=3", GOOD);
        let seen_while_first_ran = alongside(&dev, &[good.clone(), bad.clone()], || {
            // the others' builds are under way before this one ends
            let deadline = Instant::now() + Duration::from_secs(60);
            while !(dev.knows(&good) && dev.knows(&bad)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let seen = dev.knows(&good) && dev.knows(&bad);
            (seen, dev.program_of(&mine).is_ok())
        });
        assert_eq!(seen_while_first_ran, (true, true));
        assert!(dev.program_of(&good).is_ok());
        let failed = dev.program_of(&bad).expect_err("a bad program fails");
        assert!(failed.contains("kernel build failed"), "{failed}");
    }

    #[test]
    fn a_batch_asks_besides_its_plan_for_exactly_the_programs_it_uses() {
        let weights = crate::fft::BandWeights {
            bins: 1,
            first: vec![0],
            len: vec![1],
            offset: vec![0],
            weights: vec![1.0],
            id: 0,
            finish: crate::fft::RowFinish::AsIs,
        };
        let runs = crate::fft::Segments {
            lengths: &[1],
            op: crate::fft::SegmentOp::Sum,
        };
        let names = |r: Reduction<'_>, carried| {
            let list = besides_the_plan::<f64>(r, carried);
            list.iter().map(|p| p.name).collect::<Vec<_>>()
        };
        assert!(names((None, None), false).is_empty());
        assert_eq!(names((None, None), true), ["carry"]);
        assert_eq!(names((Some(&weights), None), true), ["bands", "carry"]);
        assert_eq!(names((None, Some(&runs)), false), ["segments"]);
        assert_eq!(
            names((Some(&weights), Some(&runs)), false),
            ["bands", "segments"]
        );
        let f32_bands = besides_the_plan::<f32>((Some(&weights), None), false);
        let f64_bands = besides_the_plan::<f64>((Some(&weights), None), false);
        assert_eq!(f32_bands[0].options, "");
        assert_eq!(f64_bands[0].options, "-D USE_DOUBLE");
    }
}
