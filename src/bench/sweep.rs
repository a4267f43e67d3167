//! The sweep `fftd bench` runs: `--sizes` parsed, and every size, batch and band layout checked
//! (and every size and the precision against each OpenCL engine) before anything is timed, so
//! that a sweep that would fail at its 25th size is refused at once, naming the limit.

use super::{BenchKind, BenchSpec};
use crate::error::FftdError;
use crate::fft::opencl::OpenClEngine;
use crate::fft::TransformSpec;
use crate::limits::MAX_BATCH_SAMPLES;
use crate::types::{InputKind, Sample};

/// Timed runs per size at most (`--reps`).
pub(crate) const MAX_REPS: u64 = 100_000;

/// Parses `A..B` (powers of two, `2^k` allowed) or a comma list into frame sizes, each at most
/// `MAX_BATCH_SAMPLES` (a batch holds at least one frame).
pub(crate) fn parse_sizes(s: &str) -> Result<Vec<usize>, FftdError> {
    let one = |t: &str| -> Result<usize, FftdError> {
        let t = t.trim();
        let v = match t.split_once('^') {
            Some((b, e)) => {
                let b: usize = b.trim().parse().map_err(|_| bad(s))?;
                let e: u32 = e.trim().parse().map_err(|_| bad(s))?;
                b.checked_pow(e).ok_or_else(|| too_large(s, t))?
            }
            None => t.parse().map_err(|_| bad(s))?,
        };
        if v < 2 {
            return Err(bad(s));
        }
        if v > MAX_BATCH_SAMPLES {
            return Err(too_large(s, t));
        }
        Ok(v)
    };
    if let Some((a, b)) = s.split_once("..") {
        let (a, b) = (one(a)?, one(b)?);
        if !a.is_power_of_two() || !b.is_power_of_two() || a > b {
            return Err(bad(s));
        }
        let mut v = Vec::new();
        let mut n = a;
        while n <= b {
            v.push(n);
            n *= 2;
        }
        Ok(v)
    } else {
        s.split(',').map(one).collect()
    }
}

fn bad(s: &str) -> FftdError {
    FftdError::Usage(format!(
        "--sizes {s}: expected A..B with powers of two (e.g. 2..2^21) or a comma list"
    ))
}

fn too_large(s: &str, size: &str) -> FftdError {
    FftdError::Usage(format!(
        "--sizes {s}: {size} is larger than the largest frame bench runs, 2^26 = {MAX_BATCH_SAMPLES} samples"
    ))
}

/// `--batch` frames of every size within `MAX_BATCH_SAMPLES` samples (a complex sample is one; with
/// `--batch-samples` the batch is within it already).
fn check_batches(args: &BenchSpec, sizes: &[usize]) -> Result<(), FftdError> {
    let Some(batch) = args.batch else {
        return Ok(());
    };
    match sizes.iter().find(|&&n| batch.checked_mul(n).is_none_or(|v| v > MAX_BATCH_SAMPLES)) {
        Some(n) => Err(FftdError::Usage(format!(
            "--batch {batch} with --sizes {}: {batch} frames of {n} samples exceed the largest batch, 2^26 = {MAX_BATCH_SAMPLES} samples",
            args.sizes
        ))),
        None => Ok(()),
    }
}

/// Every size and the precision taken by every OpenCL engine, before anything is timed.
pub(super) fn check_engines<T: Sample>(
    args: &BenchSpec,
    engines: &[OpenClEngine<T>],
    sizes: &[usize],
) -> Result<(), FftdError> {
    let kind = match args.kind {
        BenchKind::Real => InputKind::Real,
        BenchKind::Complex => InputKind::Complex,
    };
    let spec = |n| TransformSpec {
        n,
        kind,
        window: args.window,
        scale: args.scale,
        rate: args.rate,
    };
    for gpu in engines {
        if let Err(e) = gpu.supports(&spec(2)) {
            return Err(FftdError::Usage(format!("--precision {}: {e}", T::NAME)));
        }
        for &n in sizes {
            if let Err(e) = gpu.supports(&spec(n)) {
                return Err(FftdError::Usage(format!(
                    "--sizes {}: {e}; --device cpu times the CPU engine alone",
                    args.sizes
                )));
            }
        }
    }
    Ok(())
}

/// Everything about the sweep that can be checked before a device opens: the sizes, their
/// batches, bands for each size.
pub(super) fn check_args(args: &BenchSpec) -> Result<Vec<usize>, FftdError> {
    let sizes = parse_sizes(&args.sizes)?;
    check_batches(args, &sizes)?;
    if args.no_cpu && args.device == crate::fft::device_choice::DeviceChoice::Cpu {
        return Err(FftdError::Usage(
            "--no-cpu with --device cpu: nothing would be measured (name a device, or leave --no-cpu out)".into(),
        ));
    }
    if let Some(bands) = &args.bands {
        if args.kind == BenchKind::Complex {
            return Err(FftdError::Usage(
                "--bands with --kind complex: bands are defined on real signals' spectra".into(),
            ));
        }
        for &n in &sizes {
            crate::products::bands::BandMatrix::new(bands, n, args.rate)
                .map_err(FftdError::Usage)?;
        }
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("2..16").ok(), Some(vec![2, 4, 8, 16]));
        assert_eq!(parse_sizes("2^10..2^11").ok(), Some(vec![1024, 2048]));
        assert_eq!(parse_sizes("1000,4096").ok(), Some(vec![1000, 4096]));
        assert!(parse_sizes("3..16").is_err());
        assert!(parse_sizes("x").is_err());
    }
}
