#!/usr/bin/env python3
"""Log-mel on the GPU: fftd's OpenCL engine (window, FFT, |X|^2 and the 128 mel bands summed on the
device; `fftd bench --bands`) against torchaudio.transforms.MelSpectrogram + log on the same GPU,
in one run. Frames of n_fft with hop h from batches of 2^26 samples: torchaudio takes the signal
(2^26 samples, center=False), fftd the same number of frames packed back to back (the pipeline
packs frames so). Times are medians; torchaudio's with CUDA events, data already on the GPU;
fftd's kernel time from OpenCL event profiling (host to host time too). fftd applies the log on
the host after the copy back (not counted in its kernel time).

    python3 bench/logmel_gpu.py --fftd target/release/fftd
"""
import argparse
import csv
import os
import statistics
import subprocess
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--fftd", default="target/release/fftd")
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--log2-samples", type=int, default=26)
ap.add_argument("--rate", type=int, default=16000)
a = ap.parse_args()
samples = 1 << a.log2_samples

import torch  # noqa: E402
import torchaudio  # noqa: E402

assert torch.cuda.is_available(), "needs CUDA for the torchaudio side"
x = torch.randn(samples, device="cuda")


def torch_time(n_fft, hop):
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=a.rate, n_fft=n_fft, hop_length=hop, n_mels=128, center=False, power=2.0,
        norm="slaney", mel_scale="slaney").cuda()
    out = torch.log(mel(x) + 1e-10)  # warm-up (plans, kernels)
    times = []
    for _ in range(a.reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = torch.log(mel(x) + 1e-10)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times), out.shape[-1]


def fftd_time(n_fft, frames):
    with tempfile.TemporaryDirectory() as d:
        table = os.path.join(d, "t.csv")
        subprocess.run([a.fftd, "bench", "--device", "gpu", "--sizes", str(n_fft), "--batch", str(frames),
                        "--bands", "mel:128", "--rate", str(a.rate), "--reps", str(a.reps), "--no-cpu",
                        "--csv", table], check=True, stdout=subprocess.DEVNULL)
        row = next(csv.DictReader(open(table)))
    per_frame = lambda key: float(row[key]) * 1e-6 * frames  # noqa: E731
    return per_frame("opencl_kernel_us_per_frame"), per_frame("opencl_us_per_frame")


print(f"log-mel, 128 mels, {samples} samples per batch at {a.rate} Hz, f32, medians of {a.reps}")
print(f"{'n_fft':>6} {'hop':>5} {'frames':>8} {'torchaudio s':>13} {'fftd kernel s':>14} {'fftd host-host s':>17} {'kernel ratio':>13}")
for n_fft in (1024, 2048):
    for hop in (256, 512):
        t, frames = torch_time(n_fft, hop)
        k, h = fftd_time(n_fft, frames)
        print(f"{n_fft:>6} {hop:>5} {frames:>8} {t:13.4f} {k:14.4f} {h:17.4f} {t / k:12.2f}x", flush=True)
