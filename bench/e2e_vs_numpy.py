#!/usr/bin/env python3
"""End-to-end: `fftd --device cpu --input-format f32 --frame 4096 --format f32` file → /dev/null
against the numpy pipeline a user would write (fromfile, window, rfft, abs, tofile) and against
scipy.signal.stft on the same file, in the same run. Prints medians of several runs and the ratio. Usage:
    python3 bench/e2e_vs_numpy.py [--samples 2^25] [--runs 5] [--fftd target/release/fftd]"""
import argparse, os, statistics, subprocess, sys, tempfile, time

import numpy as np
from scipy.signal import get_window, stft

ap = argparse.ArgumentParser()
ap.add_argument("--samples", default="2^25")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--frame", type=int, default=4096)
ap.add_argument("--fftd", default="target/release/fftd")
a = ap.parse_args()
samples = eval(a.samples.replace("^", "**"))
n = a.frame

tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "x.f32")
np.random.default_rng(0).standard_normal(samples).astype("<f4").tofile(path)
out_np = os.path.join(tmp, "np.f32")


def run_fftd():
    t = time.perf_counter()
    subprocess.run([a.fftd, "--file", path, "--input-format", "f32", "--frame", str(n), "--format", "f32",
                    "--output", "/dev/null", "--device", "cpu", "--quiet"], check=True)
    return time.perf_counter() - t


def run_numpy():
    t = time.perf_counter()
    x = np.fromfile(path, "<f4")
    frames = len(x) // n  # the file is a whole number of frames
    w = get_window("hann", n).astype(np.float32)
    spec = np.abs(np.fft.rfft(x[: frames * n].reshape(frames, n) * w, axis=1)).astype("<f4")
    spec.tofile("/dev/null")
    return time.perf_counter() - t


def run_stft():
    """scipy.signal.stft on the same frames (hann, no overlap, no padding), magnitudes to a file."""
    t = time.perf_counter()
    x = np.fromfile(path, "<f4")
    _, _, z = stft(x, window="hann", nperseg=n, noverlap=0, boundary=None, padded=False, detrend=False,
                   scaling="psd")
    np.abs(z).astype("<f4").tofile("/dev/null")
    return time.perf_counter() - t


run_fftd(); run_numpy(); run_stft()  # warm the page cache
tf = statistics.median(run_fftd() for _ in range(a.runs))
tn = statistics.median(run_numpy() for _ in range(a.runs))
ts = statistics.median(run_stft() for _ in range(a.runs))
mb = samples * 4 / 1e6
print(f"samples={samples} frame={n} cores={os.cpu_count()} numpy={np.__version__}")
print(f"fftd : {tf*1e3:8.1f} ms  ({mb/tf:7.1f} MB/s of input)")
print(f"numpy: {tn*1e3:8.1f} ms  ({mb/tn:7.1f} MB/s of input)")
print(f"scipy.signal.stft: {ts*1e3:8.1f} ms  ({mb/ts:7.1f} MB/s of input)")
print(f"fftd is {tn/tf:.2f}x the speed of numpy, {ts/tf:.2f}x the speed of scipy.signal.stft")
