#!/usr/bin/env python3
"""End to end on the GPU machine, the table of issue 10 in one command: a 2^29-sample f32 file in
/dev/shm, frame 4096, f32 spectra, through every route of fftd (cpu, gpu, auto; to /dev/null and
into a file on /dev/shm; the sequential reader as the before-figure), a torch script doing the same
job on CUDA (start-up excluded: one warm-up run first), 16 input files at once, and the machine's
own limits (one sequential read, 16 parallel reads). Medians of --runs runs; ratios at the end.

    python3 bench/e2e_gpu.py [--fftd target/release/fftd] [--runs 3] [--log2-samples 29]

Needs numpy; torch with CUDA for the torch line (skipped, and said so, without it)."""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--fftd", default="target/release/fftd")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--log2-samples", type=int, default=29)
ap.add_argument("--dir", default="/dev/shm")
ap.add_argument("--frame", type=int, default=4096)
a = ap.parse_args()
n = a.frame
samples = 1 << a.log2_samples
in_bytes = samples * 4
work = tempfile.mkdtemp(prefix="fftd-e2e-", dir=a.dir)
big = os.path.join(work, "x.f32")
parts_dir = os.path.join(work, "parts")
os.mkdir(parts_dir)

rng = np.random.default_rng(0)
chunk = 1 << 26
with open(big, "wb") as f:
    for _ in range(samples // chunk):
        rng.standard_normal(chunk, dtype=np.float32).tofile(f)
x = np.fromfile(big, "<f4")
parts = []
for i, piece in enumerate(np.split(x, 16)):
    p = os.path.join(parts_dir, f"p{i:02d}.f32")
    piece.tofile(p)
    parts.append(p)
del x


def timed(fn, runs=a.runs):
    fn()  # warm-up (page cache, OpenCL program cache, CUDA context)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


def fftd(args, env=None):
    def go():
        subprocess.run([a.fftd, *args, "--frame", str(n), "--format", "f32", "--quiet"], check=True,
                       env={**os.environ, **(env or {})})
    return go


results = {}


def row(name, fn, gbytes=in_bytes):
    med, lo, hi = timed(fn)
    results[name] = med
    print(f"{name:44s} {med:7.3f} s  [{lo:.3f}-{hi:.3f}]  {gbytes / med / 1e9:6.2f} GB/s of input", flush=True)


out_file = os.path.join(work, "out.f32")
print(f"{samples} f32 samples ({in_bytes / 2**30:.1f} GiB) in {a.dir}, frame {n}, f32 out, "
      f"{os.cpu_count()} cores, median of {a.runs}", flush=True)
for device in ["cpu", "gpu", "auto"]:
    row(f"fftd --device {device} > /dev/null", fftd(["--file", big, "--device", device, "--output", "/dev/null"]))
    row(f"fftd --device {device} > file", fftd(["--file", big, "--device", device, "--output", out_file]))
row("fftd --device cpu > file (ordinary sink: FFTD_PLACED_OUTPUT=0)",
    fftd(["--file", big, "--device", "cpu", "--output", out_file], {"FFTD_PLACED_OUTPUT": "0"}))
for device in ["cpu", "gpu"]:
    row(f"fftd --device {device} > /dev/null (sequential reader)",
        fftd(["--file", big, "--device", device, "--output", "/dev/null"], {"FFTD_RANGE_READ": "0"}))
out16 = os.path.join(work, "out16")
os.mkdir(out16)
for device in ["cpu", "gpu"]:
    args = [f for p in parts for f in ("--file", p)]
    row(f"fftd 16 files --device {device}", fftd([*args, "--device", device, "--output-dir", out16]))
row("fftd 16 files --device cpu (ordinary sink)",
    fftd([*args, "--device", "cpu", "--output-dir", out16], {"FFTD_PLACED_OUTPUT": "0"}))

try:
    import torch
    assert torch.cuda.is_available()

    def torch_job():
        t = torch.from_numpy(np.fromfile(big, "<f4")).cuda()
        w = torch.hann_window(n, periodic=True, device="cuda")
        spec = torch.fft.rfft(t.reshape(-1, n) * w).abs()
        spec.cpu().numpy().tofile("/dev/null")
        torch.cuda.synchronize()

    row("torch: fromfile -> cuda -> rfft(x*w).abs() -> cpu", torch_job)
except Exception as e:  # noqa: BLE001 - report and go on
    print(f"torch line skipped: {e}")


def dd():
    subprocess.run(["dd", f"if={big}", "of=/dev/null", "bs=16M", "status=none"], check=True)


def parallel_reads():
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: subprocess.run(["dd", f"if={p}", "of=/dev/null", "bs=16M", "status=none"],
                                               check=True), parts))


row("limit: one dd read", dd)
row("limit: 16 parallel dd reads", parallel_reads)

r = results
cpu, gpu, auto = r["fftd --device cpu > /dev/null"], r["fftd --device gpu > /dev/null"], r["fftd --device auto > /dev/null"]
print()
print(f"gpu route vs cpu route:            {cpu / gpu:5.2f}x")
print(f"auto vs the faster of cpu and gpu: {min(cpu, gpu) / auto:5.2f}x (1.00 = as fast)")
if "torch: fromfile -> cuda -> rfft(x*w).abs() -> cpu" in r:
    print(f"fftd gpu vs torch script:          {r['torch: fromfile -> cuda -> rfft(x*w).abs() -> cpu'] / gpu:5.2f}x")
print(f"placed vs ordinary sink, cpu > file: "
      f"{r['fftd --device cpu > file (ordinary sink: FFTD_PLACED_OUTPUT=0)'] / r['fftd --device cpu > file']:5.2f}x")
print(f"placed vs ordinary sink, 16 files:   "
      f"{r['fftd 16 files --device cpu (ordinary sink)'] / r['fftd 16 files --device cpu']:5.2f}x")
print(f"range vs sequential reader, cpu:   {r['fftd --device cpu > /dev/null (sequential reader)'] / cpu:5.2f}x")
print(f"range vs sequential reader, gpu:   {r['fftd --device gpu > /dev/null (sequential reader)'] / gpu:5.2f}x")
for device, out in [("gpu", "/dev/null"), ("cpu", out_file), ("gpu", out_file)]:
    print(f"--stats of --device {device} > {out}:", flush=True)
    subprocess.run([a.fftd, "--file", big, "--device", device, "--frame", str(n), "--format", "f32",
                    "--quiet", "--output", out, "--stats"], check=True)
shutil.rmtree(work)
