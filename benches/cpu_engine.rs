//! CPU engine batch throughput against realfft on the same frames, in the same run:
//! - `fftd_engine`: `CpuEngine::process` (window → r2c → |X|) on a batch of frames;
//! - `realfft_raw`: realfft's r2c alone on the same frames (no window, complex output);
//! - `realfft_same_output`: realfft plus the window and |X| written as plain loops — the same
//!   output fftd produces, done the obvious way.
//!
//! Run: cargo bench --bench cpu_engine   (ratios in docs/perf.md)

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fftd::fft::cpu::CpuEngine;
use fftd::fft::{Engine, Scale, TransformSpec};
use fftd::types::InputKind;
use fftd::window::WindowKind;
use num_complex::Complex;
use realfft::RealFftPlanner;
use std::hint::black_box;

fn signal(len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_batch");
    for n in [256usize, 1024, 4096, 16384] {
        let frames = (1 << 20) / n; // 2^20 samples per batch
        let input = signal(n * frames);
        group.throughput(Throughput::Elements((n * frames) as u64));
        let spec = TransformSpec {
            n,
            kind: InputKind::Real,
            window: WindowKind::Hann,
            scale: Scale::Magnitude,
            rate: 1.0,
        };
        let mut engine = CpuEngine::<f32>::new();
        let mut out = Vec::new();
        group.bench_with_input(BenchmarkId::new("fftd_engine", n), &n, |b, _| {
            b.iter(|| {
                engine
                    .process(&spec, black_box(&input), frames, &mut out)
                    .expect("process");
                black_box(&out);
            })
        });
        let fft = RealFftPlanner::<f32>::new().plan_fft_forward(n);
        let mut scratch = fft.make_scratch_vec();
        let mut buf = fft.make_input_vec();
        let mut spectrum = fft.make_output_vec();
        group.bench_with_input(BenchmarkId::new("realfft_raw", n), &n, |b, _| {
            b.iter(|| {
                for frame in input.chunks_exact(n) {
                    buf.copy_from_slice(frame);
                    fft.process_with_scratch(&mut buf, &mut spectrum, &mut scratch)
                        .expect("fft");
                    black_box(&spectrum);
                }
            })
        });
        let window: Vec<f32> = WindowKind::Hann
            .coefficients(n)
            .iter()
            .map(|v| *v as f32)
            .collect();
        let mut mags = vec![0f32; frames * (n / 2 + 1)];
        group.bench_with_input(BenchmarkId::new("realfft_same_output", n), &n, |b, _| {
            b.iter(|| {
                for (frame, row) in input.chunks_exact(n).zip(mags.chunks_exact_mut(n / 2 + 1)) {
                    for ((d, x), w) in buf.iter_mut().zip(frame).zip(&window) {
                        *d = x * w;
                    }
                    fft.process_with_scratch(&mut buf, &mut spectrum, &mut scratch)
                        .expect("fft");
                    for (m, z) in row.iter_mut().zip(&spectrum) {
                        *m = Complex::norm(*z);
                    }
                }
                black_box(&mags);
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
