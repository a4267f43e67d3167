#!/usr/bin/env python3
"""cuFFT reference for bench/gpu_vs_cufft.sh: times, with CUDA events (median of --reps after a
warm-up), on batches of --samples samples per size, f32:
  rfft_abs : torch.fft.rfft(x * w).abs()      (what fftd's real kernel computes: window, r2c, |X|)
  rfft     : torch.fft.rfft(x)                (the bare r2c transform)
  fft      : torch.fft.fft(z)                 (bare c2c on complex64 input)
  fft_abs  : torch.fft.fft(z * w).abs()       (what fftd's complex kernel computes)
Writes CSV: n,frames,op,ms,useful_gbps where useful bytes = input bytes + output bytes of the
final result (the same count fftd bench uses), so GB/s compare directly."""
import argparse, csv, sys
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="256,512,1024,2048,4096,8192,16384,32768,65536")
ap.add_argument("--samples", type=int, default=1 << 26)
ap.add_argument("--reps", type=int, default=20)
ap.add_argument("--csv", default="cufft.csv")
a = ap.parse_args()

dev = "cuda"
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), file=sys.stderr)

def bench(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(a.reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]

rows = []
for n in [int(v) for v in a.sizes.split(",")]:
    frames = max(1, a.samples // n)
    x = torch.randn(frames, n, device=dev, dtype=torch.float32)
    w = torch.hann_window(n, periodic=True, device=dev, dtype=torch.float32)
    z = torch.randn(frames, n, device=dev, dtype=torch.complex64)
    real_bytes = frames * (n + n // 2 + 1) * 4
    cplx_bytes = frames * (2 * n + n) * 4
    for op, fn, useful in [
        ("rfft_abs", lambda: torch.fft.rfft(x * w).abs(), real_bytes),
        ("rfft", lambda: torch.fft.rfft(x), frames * (n + 2 * (n // 2 + 1)) * 4),
        ("fft", lambda: torch.fft.fft(z), frames * 4 * n * 4),
        ("fft_abs", lambda: torch.fft.fft(z * w).abs(), cplx_bytes),
    ]:
        ms = bench(fn)
        rows.append((n, frames, op, ms, useful / (ms * 1e-3) * 1e-9))
        print(f"{n:>7} {frames:>8} {op:>9} {ms:9.4f} ms {rows[-1][4]:8.1f} GB/s", file=sys.stderr)
    del x, z
    torch.cuda.empty_cache()

with open(a.csv, "w", newline="") as f:
    wr = csv.writer(f)
    wr.writerow(["n", "frames", "op", "ms", "useful_gbps"])
    wr.writerows(rows)
