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
use crate::fft::device_set::{self, LaneDevice, LaneSpec};
use crate::fft::opencl::device::SharedDevice;
use crate::fft::opencl::{OpenClEngine, OpenClOptions};
use crate::fft::router::DeviceChoice;
use crate::fft::{
    transform_reduced, BandWeights, Engine, HostBuf, Reduction, Scale, SegmentOp, Segments,
    TransformSpec,
};
use crate::limits::MAX_BATCH_SAMPLES;
use crate::types::whole_in;
use crate::types::{InputKind, Sample};
use crate::window::WindowKind;
use all_devices::AllDevicesRow;
use report::{
    break_even_line, csv_line, emit, heading, table_head, table_line, together_line, CSV_HEAD,
};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;
pub use sweep::parse_sizes;
use sweep::{check_args, check_engines, positive_hz, MAX_REPS};

/// Input kind for the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchKind {
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
    /// (`1024,4096`), each at most 2^26 (2^24 on OpenCL); all checked before any is timed.
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
    pub kind: BenchKind,
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
    /// Each run of N frames reduced to its sum by the engine (as the pipeline's `--average N`
    /// of means; on the device for OpenCL); times and errors are of the reduced rows.
    #[arg(long, value_name = "N", value_parser = whole_in::<u32>(1, MAX_BATCH_SAMPLES as u64))]
    pub average: Option<u32>,
    /// Sample rate the bands are laid out for, in Hz.
    #[arg(long, value_name = "HZ", default_value_t = 48_000.0, value_parser = positive_hz)]
    pub rate: f64,
    /// Skip the CPU engine (for very large batches).
    #[arg(long)]
    pub no_cpu: bool,
    /// With several devices (`--device gpu:all` or a list): milliseconds each device runs alone,
    /// and all run together, per size.
    #[arg(long, value_name = "MS", default_value_t = 300, value_parser = whole_in::<u64>(1, 600_000))]
    pub run_ms: u64,
}

/// One benchmark row.
#[derive(Clone, Debug, Default)]
pub struct BenchRow {
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
    fn new(args: &BenchArgs, n: usize) -> Result<Self, FftdError> {
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
            op: SegmentOp::Sum,
        })
    }
}

fn bench_size<T: Sample>(
    args: &BenchArgs,
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
    let rt = |e: crate::fft::EngineError| FftdError::Runtime(e.to_string());
    let mut cpu_out = Vec::new();
    if !args.no_cpu {
        let mut cpu = CpuEngine::<T>::new();
        cpu_out = vec![T::default(); out_len];
        transform_reduced(&mut cpu, &spec, input, frames, reduce, &mut cpu_out).map_err(rt)?;
        let t: Vec<f64> = (0..reps)
            .map(|_| {
                let s = Instant::now();
                transform_reduced(&mut cpu, &spec, input, frames, reduce, &mut cpu_out)
                    .map(|_| s.elapsed().as_secs_f64())
            })
            .collect::<Result<_, _>>()
            .map_err(rt)?;
        row.cpu_us = Some(median(t) * 1e6 / frames as f64);
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

/// The OpenCL device instances `choice` names (`auto`/`gpu`: the best device; none for `cpu`).
fn device_specs(choice: &DeviceChoice) -> Result<Vec<LaneSpec>, FftdError> {
    match choice {
        DeviceChoice::Cpu => Ok(Vec::new()),
        DeviceChoice::Auto => device_set::opencl_devices(&DeviceChoice::Gpu),
        other => device_set::opencl_devices(other),
    }
}

/// An engine on `spec`'s device instance; kernel times come from event profiling
/// (FFTD_OPENCL_PROFILE=0: off, to measure host-to-host times as the pipeline runs them).
fn open_engine<T: Sample>(spec: &LaneSpec) -> Result<OpenClEngine<T>, FftdError> {
    let LaneDevice::OpenCl(entry) = spec.device else {
        return Err(FftdError::Runtime(format!(
            "{}: not an OpenCL device",
            spec.label()
        )));
    };
    let mut options = OpenClOptions::from_env();
    options.profile = crate::knobs::opencl_profile().unwrap_or(true);
    let at = |e: String| FftdError::Runtime(format!("{}: {e}", spec.label()));
    let dev = SharedDevice::open_instance(entry, spec.instance).map_err(at)?;
    OpenClEngine::<T>::on_device(dev, options).map_err(at)
}

fn run_typed<T: Sample>(args: &BenchArgs) -> Result<(), FftdError> {
    let sizes = match args.calibrate {
        true => Vec::new(),
        false => check_args(args)?,
    };
    let specs = device_specs(&args.device)?;
    let mut engines = specs
        .iter()
        .map(open_engine::<T>)
        .collect::<Result<Vec<_>, _>>()?;
    if args.calibrate {
        return calibrate_devices(&mut engines, &specs);
    }
    check_engines(args, &engines, &sizes)?;
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
    if let Some(path) = &args.csv {
        std::fs::write(path, csv).map_err(|e| FftdError::io(path, e))?;
    }
    Ok(())
}

/// Every device alone, then all at once, on `sized`'s batch.
fn bench_together<T: Sample>(
    engines: &mut [OpenClEngine<T>],
    sized: &SizeInputs<T>,
    args: &BenchArgs,
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
            path.display()
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
pub fn run_bench(args: &BenchArgs) -> Result<(), FftdError> {
    args.precision.dispatch(Bench(args))
}

/// A benchmark in the sample type of its precision.
struct Bench<'a>(&'a BenchArgs);

impl crate::types::WithSample for Bench<'_> {
    type Output = Result<(), FftdError>;
    fn run<T: Sample>(self) -> Result<(), FftdError> {
        run_typed::<T>(self.0)
    }
}
