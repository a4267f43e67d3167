//! `fftd bench`: per frame size, CPU engine time per frame; OpenCL time per frame host to host
//! (write + kernels + read) with the batch in the device's pinned memory (as the pipeline runs
//! it) and in ordinary memory (staged); OpenCL kernel-only time (event profiling), kernel
//! bandwidth and GFLOPS; host-to-host input bandwidth against the same run's pinned PCIe copy
//! rate; and the break-even frame size for the batch length used. A table goes to stdout, the
//! same rows to `--csv FILE`. `--calibrate` measures and caches a new `auto` calibration instead
//! (one per device model of `--device`). With several devices (`gpu:all`, a list) the table is the
//! first device's, and a second one gives all devices at once (`all_devices`).
//!
//! Conventions: times are medians of `--reps` runs after one warm-up (kernel builds excluded);
//! kernel GB/s = (bytes read + bytes written by the transform) / time; host in_GB/s = input
//! bytes / host-to-host time; %pcie = pinned in_GB/s / the pinned host-to-device copy rate;
//! GFLOPS counts 5·N·log2 N per complex frame and 2.5·N·log2 N per real frame.

mod all_devices;
mod report;
mod sweep;

use crate::error::FftdError;
use crate::fft::calibrate;
use crate::fft::compare::compare_rows;
use crate::fft::cpu::CpuEngine;
use crate::fft::device_set::{self, LaneSpec};
use crate::fft::opencl::{OpenClEngine, OpenClOptions};
use crate::fft::router::DeviceChoice;
use crate::fft::{
    transform_reduced, BandWeights, Engine, HostBuf, Reduction, Scale, SegmentOp, Segments,
    TransformSpec,
};
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;
use all_devices::AllDevicesRow;
use report::{
    break_even_line, csv_line, emit, heading, table_head, table_line, together_line, CSV_HEAD,
};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;
pub(crate) use sweep::MAX_REPS;
use sweep::{check_args, check_engines};

/// Input kind for the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchKind {
    Real,
    Complex,
}

/// What `fftd bench` measures (built by `app::bench_args` from the command line; the flags'
/// `--help` text there says what each is).
#[derive(Debug, Clone)]
pub struct BenchSpec {
    /// `--sizes`: `A..B` or a list (`parse_sizes`).
    pub sizes: String,
    /// `--batch`: frames per batch.
    pub batch: Option<usize>,
    /// `--batch-samples`: samples per batch when `batch` is not given.
    pub batch_samples: usize,
    /// `--csv`: the rows as CSV to this file too.
    pub csv: Option<PathBuf>,
    /// `--calibrate`: a new calibration for `--device auto` instead of the table.
    pub calibrate: bool,
    pub device: DeviceChoice,
    pub precision: crate::types::Precision,
    pub kind: BenchKind,
    pub window: WindowKind,
    pub scale: Scale,
    /// `--reps`: timed runs per size (the median is reported).
    pub reps: usize,
    /// `--bands`: band powers summed by each engine.
    pub bands: Option<crate::products::bands::BandSpec>,
    /// `--average`: each run of N frames reduced to its mean by the engine.
    pub average: Option<u32>,
    /// `--rate`: the sample rate bands are laid out for, in Hz.
    pub rate: f64,
    /// `--no-cpu`: the CPU engine skipped.
    pub no_cpu: bool,
    /// `--run-ms`: with several devices, how long each runs alone and all together.
    pub run_ms: u64,
}

/// One benchmark row.
#[derive(Clone, Debug, Default)]
pub(crate) struct BenchRow {
    pub n: usize,
    pub frames: usize,
    pub cpu_us: Option<f64>,
    /// Host to host, batch in the device's pinned memory.
    pub ocl_us: Option<f64>,
    /// Host to host, batch in ordinary (pageable) memory.
    pub paged_us: Option<f64>,
    pub kernel_us: Option<f64>,
    pub kernel_gbps: Option<f64>,
    /// Input bytes per second host to host, pinned / pageable.
    pub in_gbps: Option<f64>,
    pub paged_in_gbps: Option<f64>,
    pub gflops: Option<f64>,
    pub max_rel_err: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// What one frame size benchmarks: the spec, the batch and what the engines reduce it to.
struct SizeInputs<T> {
    spec: TransformSpec,
    frames: usize,
    input: Vec<T>,
    bands: Option<BandWeights>,
    /// Run lengths of `--average`.
    lengths: Option<Vec<u32>>,
    /// Values per batch out.
    out_len: usize,
}

impl<T: Sample> SizeInputs<T> {
    fn new(args: &BenchSpec, n: usize) -> Result<Self, FftdError> {
        let kind = match args.kind {
            BenchKind::Real => InputKind::Real,
            BenchKind::Complex => InputKind::Complex,
        };
        let spec = TransformSpec {
            n,
            kind,
            window: args.window,
            scale: if args.bands.is_some() {
                Scale::Power
            } else {
                args.scale
            },
            rate: args.rate,
        };
        if args.bands.is_some() && kind == InputKind::Complex {
            return Err(FftdError::Usage(
                "--bands with --kind complex: bands are defined on real signals' spectra".into(),
            ));
        }
        let bands = match &args.bands {
            Some(b) => Some(
                crate::products::bands::BandMatrix::new(b, n, args.rate)
                    .map_err(FftdError::Usage)?
                    .weights(),
            ),
            None => None,
        };
        let frames = args.batch.unwrap_or(args.batch_samples / n).max(1);
        let lengths = args.average.map(|a| runs_of(frames, a as usize));
        let rows = lengths.as_ref().map_or(frames, Vec::len);
        let out_len = rows * bands.as_ref().map_or(spec.values_out(), |b| b.bands());
        let input: Vec<T> = (0..frames * spec.values_per_frame())
            .map(|i| {
                let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                T::of_f64(x as f64 / (1u64 << 24) as f64 - 0.5)
            })
            .collect();
        Ok(SizeInputs {
            spec,
            frames,
            input,
            bands,
            lengths,
            out_len,
        })
    }

    fn segments(&self) -> Option<Segments<'_>> {
        self.lengths.as_deref().map(|lengths| Segments {
            lengths,
            op: SegmentOp::Mean,
        })
    }
}

fn bench_size<T: Sample>(
    args: &BenchSpec,
    gpu: Option<&mut OpenClEngine<T>>,
    sized: &SizeInputs<T>,
) -> Result<BenchRow, FftdError> {
    let SizeInputs {
        spec,
        frames,
        ref input,
        out_len,
        ..
    } = *sized;
    let (n, kind) = (spec.n, spec.kind);
    let runs = sized.segments();
    let reduce = (sized.bands.as_ref(), runs.as_ref());
    let reps = args.reps;
    let mut row = BenchRow {
        n,
        frames,
        ..Default::default()
    };
    let mut cpu_out = Vec::new();
    if !args.no_cpu {
        cpu_out = vec![T::default(); out_len];
        let t = time_cpu(&spec, (input, frames, reduce), &mut cpu_out, reps)?;
        row.cpu_us = Some(t * 1e6 / frames as f64);
    }
    if let Some(gpu) = gpu {
        let in_bytes = (frames * spec.values_per_frame() * std::mem::size_of::<T>()) as f64;
        let bytes = in_bytes + (out_len * std::mem::size_of::<T>()) as f64;
        // ordinary memory: the engine stages the batch through its own pinned buffers
        let mut paged_out = vec![T::default(); out_len];
        let (paged, _) = time_gpu(gpu, &spec, (input, frames, reduce), &mut paged_out, reps)?;
        row.paged_us = Some(paged * 1e6 / frames as f64);
        row.paged_in_gbps = Some(in_bytes / paged * 1e-9);
        // the device's pinned memory, as the pipeline packs batches: copied by DMA directly
        let pinned = gpu.pinned_memory();
        let mut pin_in = HostBuf::with_capacity(input.len(), pinned.as_ref());
        pin_in.extend_from_slice(input);
        let mut out = HostBuf::with_capacity(out_len, pinned.as_ref());
        out.set_len_for_overwrite(out_len);
        let (w, kern) = time_gpu(gpu, &spec, (&pin_in, frames, reduce), &mut out, reps)?;
        row.ocl_us = Some(w * 1e6 / frames as f64);
        row.in_gbps = Some(in_bytes / w * 1e-9);
        if let Some(k) = kern {
            let per_frame_flops = match kind {
                InputKind::Real => 2.5,
                InputKind::Complex => 5.0,
            } * n as f64
                * (n as f64).log2();
            row.kernel_us = Some(k * 1e6 / frames as f64);
            row.kernel_gbps = Some(bytes / k * 1e-9);
            row.gflops = Some(per_frame_flops * frames as f64 / k * 1e-9);
        }
        if out[..] != paged_out[..] {
            return Err(FftdError::Runtime(format!(
                "n = {n}: pinned and pageable batches gave different spectra"
            )));
        }
        if !cpu_out.is_empty() {
            let a: Vec<f64> = out.iter().map(|v| v.into_f64()).collect();
            let b: Vec<f64> = cpu_out.iter().map(|v| v.into_f64()).collect();
            row.max_rel_err = Some(match reduce {
                (None, None) => compare_rows(&a, &b, &spec, 0.0).2,
                _ => largest_error(&a, &b),
            });
        }
    }
    Ok(row)
}

/// Median time of `reps` transforms on the CPU engine (after one warm-up).
fn time_cpu<T: Sample>(
    spec: &TransformSpec,
    (input, frames, reduce): (&[T], usize, Reduction<'_>),
    out: &mut [T],
    reps: usize,
) -> Result<f64, FftdError> {
    let rt = |e: crate::fft::EngineError| FftdError::Runtime(e.to_string());
    let mut cpu = CpuEngine::<T>::new();
    transform_reduced(&mut cpu, spec, input, frames, reduce, out).map_err(rt)?;
    let t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            transform_reduced(&mut cpu, spec, input, frames, reduce, out)
                .map(|_| s.elapsed().as_secs_f64())
        })
        .collect::<Result<_, _>>()
        .map_err(rt)?;
    Ok(median(t))
}

/// Median wall time of `reps` host-to-host transforms (after one warm-up) and, when profiling
/// gives it, the median kernel time.
fn time_gpu<T: Sample>(
    gpu: &mut OpenClEngine<T>,
    spec: &TransformSpec,
    (input, frames, reduce): (&[T], usize, Reduction<'_>),
    out: &mut [T],
    reps: usize,
) -> Result<(f64, Option<f64>), FftdError> {
    let rt = |e: crate::fft::EngineError| FftdError::Runtime(e.to_string());
    transform_reduced(gpu, spec, input, frames, reduce, out).map_err(rt)?;
    let (mut wall, mut kern) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let s = Instant::now();
        transform_reduced(gpu, spec, input, frames, reduce, out).map_err(rt)?;
        wall.push(s.elapsed().as_secs_f64());
        if let Some(p) = gpu.last_profile().filter(|p| p.kernel_ns > 0) {
            kern.push(p.kernel_ns as f64 * 1e-9);
        }
    }
    Ok((median(wall), (!kern.is_empty()).then(|| median(kern))))
}

/// The largest |a - b| relative to the largest |b| (band rows).
fn largest_error(a: &[f64], b: &[f64]) -> f64 {
    let peak = b
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / peak)
        .fold(0.0, f64::max)
}

/// Runs of `run` frames (the last one shorter) covering `frames`.
fn runs_of(frames: usize, run: usize) -> Vec<u32> {
    let run = run.max(1);
    (0..frames.div_ceil(run))
        .map(|k| run.min(frames - k * run) as u32)
        .collect()
}

/// An engine on each OpenCL device instance `choice` names (`auto`/`gpu`: the best device; none
/// for `cpu`); kernel times come from event profiling (FFTD_OPENCL_PROFILE=0: off, to measure
/// host-to-host times as the pipeline runs them).
fn open_engines<T: Sample>(
    choice: &DeviceChoice,
) -> Result<(Vec<LaneSpec>, Vec<OpenClEngine<T>>), FftdError> {
    let mut options = OpenClOptions::from_env();
    options.profile = crate::knobs::opencl_profile().unwrap_or(true);
    device_set::open_opencl::<T>(choice, &options)
}

fn run_typed<T: Sample>(args: &BenchSpec) -> Result<(), FftdError> {
    let sizes = match args.calibrate {
        true => Vec::new(),
        false => check_args(args)?,
    };
    let (specs, mut engines) = open_engines::<T>(&args.device)?;
    if args.calibrate {
        return calibrate_devices(&mut engines, &specs);
    }
    check_engines(args, &engines, &sizes)?;
    // (a --csv that cannot be written is said before minutes of timing, not after)
    let csv_file = (args.csv.as_ref())
        .map(|path| std::fs::File::create(path).map_err(|e| FftdError::io(path, e)))
        .transpose()?;
    // the table goes to stdout row by row as each size is measured (once: no copy on stderr)
    let (head, pcie) = heading(args, &specs, &engines);
    // a closed stdout stops the sweep, unless the rows also go to --csv
    let mut open = emit(&format!("{head}\n{}", table_head()))?;
    let several = engines.len() > 1;
    let mut together = String::new();
    if several {
        let labels: Vec<String> = specs.iter().map(LaneSpec::label).collect();
        let _ = writeln!(
            together,
            "\nall devices at once ({}), host to host, pinned batches, {} ms alone and {} ms together per size:\n{:>9} {:>7} {:>12} {:>10} {:>10} {:>8}  shares",
            labels.join(", "),
            args.run_ms,
            args.run_ms,
            "n", "frames", "one_us/fr", "all_us/fr", "all_GB/s", "all/one"
        );
    }
    let mut csv = String::from(CSV_HEAD);
    let mut rows = Vec::new();
    for n in sizes {
        let sized = SizeInputs::<T>::new(args, n)?;
        let row = bench_size::<T>(args, engines.first_mut(), &sized)?;
        let all = match several {
            true => Some(bench_together(&mut engines, &sized, args)?),
            false => None,
        };
        open = open && emit(&format!("{}\n", table_line(&row, pcie)))?;
        if !open && args.csv.is_none() {
            return Ok(());
        }
        if let Some(all) = &all {
            let _ = writeln!(together, "{}", together_line(all, &specs, &sized));
        }
        csv_line(&mut csv, (&row, &sized), all.as_ref(), (pcie, args), &specs);
        rows.push(row);
    }
    if open {
        emit(&format!("{}\n{together}", break_even_line(&rows, args)))?;
    }
    if let (Some(path), Some(mut file)) = (&args.csv, csv_file) {
        std::io::Write::write_all(&mut file, csv.as_bytes()).map_err(|e| FftdError::io(path, e))?;
    }
    Ok(())
}

/// Every device alone, then all at once, on `sized`'s batch.
fn bench_together<T: Sample>(
    engines: &mut [OpenClEngine<T>],
    sized: &SizeInputs<T>,
    args: &BenchSpec,
) -> Result<AllDevicesRow, FftdError> {
    let runs = sized.segments();
    let plan = all_devices::BatchPlan {
        spec: sized.spec,
        input: &sized.input,
        frames: sized.frames,
        reduce: (sized.bands.as_ref(), runs.as_ref()),
        out_len: sized.out_len,
    };
    let window = std::time::Duration::from_millis(args.run_ms.max(1));
    all_devices::bench_all(engines, &plan, window)
}

/// `--calibrate`: a new calibration for each device model (identical devices share one).
fn calibrate_devices<T: Sample>(
    engines: &mut [OpenClEngine<T>],
    specs: &[LaneSpec],
) -> Result<(), FftdError> {
    if engines.is_empty() {
        return Err(FftdError::Usage(
            "--calibrate needs an OpenCL device (--device gpu/gpu:all/auto/opencl:P:D or a list)"
                .into(),
        ));
    }
    let mut text = String::new();
    let mut done: Vec<calibrate::CalibrationKey> = Vec::new();
    for (g, spec) in engines.iter_mut().zip(specs) {
        let key = calibrate::CalibrationKey::new::<T>(g.device());
        if done.contains(&key) {
            let _ = writeln!(
                text,
                "{}: same model and driver as above, same calibration\n",
                spec.label()
            );
            continue;
        }
        let cal = calibrate::obtain(g, true, true).map_err(FftdError::Runtime)?;
        let path = cal.save().map_err(FftdError::Runtime)?;
        let _ = writeln!(
            text,
            "calibration for {} {} ({}) saved to {}",
            spec.label(),
            cal.key.device,
            T::NAME,
            crate::types::shown_path(&path)
        );
        let _ = writeln!(
            text,
            "{:>9} {:>7} {:>12} {:>12}",
            "n", "frames", "cpu_ms", "opencl_ms"
        );
        for p in &cal.points {
            let _ = writeln!(
                text,
                "{:>9} {:>7} {:>12.4} {:>12.4}",
                p.n,
                p.frames,
                p.cpu_s * 1e3,
                p.gpu_s * 1e3
            );
        }
        let _ = writeln!(text);
        done.push(key);
    }
    emit(&text).map(drop)
}

/// Runs `fftd bench` with `args`.
pub fn run_bench(args: &BenchSpec) -> Result<(), FftdError> {
    args.precision.dispatch(Bench(args))
}

/// A benchmark in the sample type of its precision.
struct Bench<'a>(&'a BenchSpec);

impl crate::types::WithSample for Bench<'_> {
    type Output = Result<(), FftdError>;
    fn run<T: Sample>(self) -> Result<(), FftdError> {
        run_typed::<T>(self.0)
    }
}
