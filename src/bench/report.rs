//! What `fftd bench` prints: the heading, the table and its CSV twin, the all-devices line and
//! the break-even sentence.

use super::all_devices::AllDevicesRow;
use super::{BenchRow, BenchSpec, SizeInputs};
use crate::error::FftdError;
use crate::fft::device_set::LaneSpec;
use crate::fft::opencl::OpenClEngine;
use crate::types::Sample;
use std::fmt::Write as _;

/// What the timed rows are, for the heading: the scale the engines ran in (`--bands` sums power
/// spectra, whatever `--scale`), and the bands and `--average` they were reduced by.
fn rows_measured(args: &BenchSpec) -> String {
    let mut rows = match &args.bands {
        Some(bands) => format!("scale power summed into --bands {bands}"),
        None => format!("scale {}", args.scale),
    };
    if let Some(n) = args.average {
        rows.push_str(&format!(", means of --average {n} frames"));
    }
    rows
}

/// The lines above the table, and the pinned host-to-device copy rate in GB/s (the same run's
/// reference for host-to-host figures) when measured.
pub(super) fn heading<T: Sample>(
    args: &BenchSpec,
    specs: &[LaneSpec],
    engines: &[OpenClEngine<T>],
) -> (String, Option<f64>) {
    let mut head = String::new();
    let _ = writeln!(
        head,
        "fftd bench: {} {:?} input, window {}, {}, OpenCL device {}, median of {} runs",
        T::NAME,
        args.kind,
        args.window,
        rows_measured(args),
        specs
            .first()
            .map_or("none".into(), |s| format!("{} ({})", s.name(), s.label())),
        args.reps
    );
    // pinned copies of 256 MiB each way
    let pcie = match engines.first().map(|g| g.copy_bandwidth(256 << 20, 5)) {
        Some(Ok((h2d, d2h))) => {
            let _ = writeln!(
                head,
                "pinned copies (256 MiB, event profiling): host->device {:.1} GB/s, device->host {:.1} GB/s",
                h2d * 1e-9,
                d2h * 1e-9
            );
            Some(h2d * 1e-9)
        }
        Some(Err(e)) => {
            let _ = writeln!(head, "pinned copies: not measured ({e})");
            None
        }
        None => None,
    };
    (head, pcie)
}

pub(super) fn table_head() -> String {
    format!(
        "{:>9} {:>7} {:>10} {:>10} {:>10} {:>11} {:>9} {:>9} {:>9} {:>6} {:>8} {:>8} {:>8}\n",
        "n",
        "frames",
        "cpu_us/fr",
        "ocl_us/fr",
        "page_us/fr",
        "kern_us/fr",
        "kern_GB/s",
        "in_GB/s",
        "page_GB/s",
        "%pcie",
        "GFLOPS",
        "cpu/ocl",
        "max_err"
    )
}

pub(super) const CSV_HEAD: &str = "n,frames,precision,kind,cpu_us_per_frame,opencl_us_per_frame,opencl_pageable_us_per_frame,opencl_kernel_us_per_frame,kernel_gbps,input_gbps,pageable_input_gbps,pcie_percent,kernel_gflops,cpu_over_opencl,max_rel_err,devices,all_devices_us_per_frame,all_devices_input_gbps,all_over_one,device_shares\n";

fn fixed(v: Option<f64>, p: usize) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.p$}"))
}

/// CPU over OpenCL (host to host), and the input rate's share of the pinned copy rate.
fn ratios(row: &BenchRow, pcie: Option<f64>) -> (Option<f64>, Option<f64>) {
    let speed = match (row.cpu_us, row.ocl_us) {
        (Some(c), Some(o)) if o > 0.0 => Some(c / o),
        _ => None,
    };
    let pct = match (row.in_gbps, pcie) {
        (Some(g), Some(p)) if p > 0.0 => Some(100.0 * g / p),
        _ => None,
    };
    (speed, pct)
}

pub(super) fn table_line(row: &BenchRow, pcie: Option<f64>) -> String {
    let (speed, pct) = ratios(row, pcie);
    let f = fixed;
    format!(
        "{:>9} {:>7} {:>10} {:>10} {:>10} {:>11} {:>9} {:>9} {:>9} {:>6} {:>8} {:>8} {:>8}",
        row.n,
        row.frames,
        f(row.cpu_us, 3),
        f(row.ocl_us, 3),
        f(row.paged_us, 3),
        f(row.kernel_us, 4),
        f(row.kernel_gbps, 1),
        f(row.in_gbps, 2),
        f(row.paged_in_gbps, 2),
        f(pct, 1),
        f(row.gflops, 1),
        f(speed, 2),
        row.max_rel_err.map_or("-".into(), |e| format!("{e:.1e}"))
    )
}

/// Input bytes of one frame.
fn frame_bytes<T>(sized: &SizeInputs<T>) -> f64 {
    (sized.spec.values_per_frame() * std::mem::size_of::<T>()) as f64
}

pub(super) fn together_line<T>(
    all: &AllDevicesRow,
    specs: &[LaneSpec],
    sized: &SizeInputs<T>,
) -> String {
    let shares: Vec<String> = specs
        .iter()
        .zip(all.shares())
        .map(|(s, pct)| format!("{} {pct:.0}%", s.label()))
        .collect();
    format!(
        "{:>9} {:>7} {:>12.4} {:>10.4} {:>10.2} {:>8.2}  {}",
        all.n,
        all.frames,
        1e6 / all.best_alone().max(f64::MIN_POSITIVE),
        1e6 / all.total().max(f64::MIN_POSITIVE),
        all.total() * frame_bytes(sized) * 1e-9,
        all.speedup(),
        shares.join(", ")
    )
}

pub(super) fn csv_line<T: Sample>(
    csv: &mut String,
    (row, sized): (&BenchRow, &SizeInputs<T>),
    all: Option<&AllDevicesRow>,
    (pcie, args): (Option<f64>, &BenchSpec),
    specs: &[LaneSpec],
) {
    let (speed, pct) = ratios(row, pcie);
    let c = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
    let labels: Vec<String> = specs.iter().map(LaneSpec::label).collect();
    let (all_us, all_gbps, over_one, shares) = match all {
        Some(a) => {
            let shares: Vec<String> = labels
                .iter()
                .zip(a.shares())
                .map(|(l, p)| format!("{l}={p:.1}"))
                .collect();
            (
                Some(1e6 / a.total().max(f64::MIN_POSITIVE)),
                Some(a.total() * frame_bytes(sized) * 1e-9),
                Some(a.speedup()),
                shares.join(" "),
            )
        }
        None => (None, None, None, String::new()),
    };
    let _ = writeln!(
        csv,
        "{},{},{},{:?},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        row.n,
        row.frames,
        T::NAME,
        args.kind,
        c(row.cpu_us),
        c(row.ocl_us),
        c(row.paged_us),
        c(row.kernel_us),
        c(row.kernel_gbps),
        c(row.in_gbps),
        c(row.paged_in_gbps),
        c(pct),
        c(row.gflops),
        c(speed),
        c(row.max_rel_err),
        labels.join(" "),
        c(all_us),
        c(all_gbps),
        c(over_one),
        shares
    );
}

/// Writes `text` to stdout; a closed stdout (`| head`) ends the output quietly: false.
pub(super) fn emit(text: &str) -> Result<bool, FftdError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(FftdError::io("<stdout>", e)),
    }
}

/// "break-even: ..." — the smallest size from which OpenCL (host to host) beats the CPU engine
/// at every larger size measured, for this batch length.
pub(super) fn break_even_line(rows: &[BenchRow], args: &BenchSpec) -> String {
    let batch = match args.batch {
        Some(b) => format!("{b} frames per batch"),
        None => format!("{} samples per batch", args.batch_samples),
    };
    let faster: Vec<(usize, bool)> = rows
        .iter()
        .filter_map(|r| Some((r.n, r.ocl_us? < r.cpu_us?)))
        .collect();
    if faster.is_empty() {
        return "break-even: not measured (needs both CPU and OpenCL timings)".into();
    }
    let from = faster.iter().rposition(|(_, f)| !*f).map_or(0, |i| i + 1);
    match faster.get(from) {
        None => format!("break-even ({batch}): the CPU engine is faster at every size measured"),
        Some((n, _)) if from == 0 => {
            format!("break-even ({batch}): OpenCL is faster at every size measured (from n = {n})")
        }
        Some((n, _)) => {
            format!("break-even ({batch}): OpenCL (copies included) is faster from n = {n} upwards")
        }
    }
}
