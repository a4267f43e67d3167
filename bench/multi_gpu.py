#!/usr/bin/env python3
"""Issue 13 on a host with several GPUs, in one command: one GPU (`--device gpu`) against every GPU
(`--device gpu:all`), host to host (`fftd bench`: all/one per frame size) and end to end (16 f32
input files in /dev/shm, frame 4096, f32 spectra into files on /dev/shm, medians of --runs runs
after a warm-up), with each device's share of the work (`--stats`). Targets: host to host all/one
>= 1.8, end to end >= 1.6 with 2 GPUs on the jobs where the GPU route wins (issue 30: overlapped
frames, log-mel; --jobs).

    python3 bench/multi_gpu.py [--fftd target/release/fftd] [--runs 5] [--log2-samples 29]
                               [--jobs plain,overlap,logmel] [--no-host]

Needs numpy (to write the inputs)."""
import argparse, os, shutil, statistics, subprocess, tempfile, time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--fftd", default="target/release/fftd")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--log2-samples", type=int, default=29, help="all 16 files together")
ap.add_argument("--dir", default="/dev/shm")
ap.add_argument("--frame", type=int, default=4096)
ap.add_argument("--sizes", default="256..65536", help="fftd bench --sizes")
ap.add_argument("--jobs", default="plain", help="end-to-end jobs: plain (--frame), overlap (hop "
                "frame/8), logmel (2048 hop 512 mel:128 dB)")
ap.add_argument("--no-host", action="store_true", help="skip the host-to-host bench")
ap.add_argument("--no-stats", action="store_true", help="skip the --stats runs")
a = ap.parse_args()

subprocess.run([a.fftd, "devices"], check=True)
# calibrations first (cached per device model): the dispatcher spreads batches by them
subprocess.run([a.fftd, "bench", "--calibrate", "--device", "gpu:all"], check=True)

if not a.no_host:
    print("\n== host to host: fftd bench --device gpu:all (FFTD_OPENCL_PROFILE=0: no event profiling)",
          flush=True)
    bench_env = {**os.environ, "FFTD_OPENCL_PROFILE": "0"}
    subprocess.run([a.fftd, "bench", "--device", "gpu:all", "--sizes", a.sizes, "--no-cpu",
                    "--batch-samples", str(1 << 24), "--run-ms", "1000", "--csv",
                    "multi_gpu_bench.csv"], check=True, env=bench_env)

work = tempfile.mkdtemp(prefix="fftd-multi-", dir=a.dir)
samples = 1 << a.log2_samples
per_file = samples // 16
rng = np.random.default_rng(0)
files = []
for k in range(16):
    p = os.path.join(work, f"in{k:02d}.f32")
    rng.standard_normal(per_file, dtype=np.float32).tofile(p)
    files.append(p)
out = os.path.join(work, "out")
os.mkdir(out)
in_bytes = samples * 4


JOBS = {
    "plain": ["--frame", str(a.frame)],
    "overlap": ["--frame", str(a.frame), "--hop", str(a.frame // 8)],
    "logmel": ["--frame", "2048", "--hop", "512", "--bands", "mel:128", "--scale", "db"],
}


def run(job, device, stats=False):
    args = [a.fftd, *[x for f in files for x in ("--file", f)], *JOBS[job],
            "--format", "f32", "--output-dir", out, "--quiet", "--device", device]
    subprocess.run(args + (["--stats"] if stats else []), check=True)


def timed(job, device):
    run(job, device)  # warm-up: page cache, kernel caches
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        run(job, device)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


for job in a.jobs.split(","):
    print(f"\n== end to end, {job} ({' '.join(JOBS[job])}): 16 files, {samples} f32 samples "
          f"({in_bytes / 2**30:.1f} GiB) in {a.dir}, f32 out to {a.dir}, {os.cpu_count()} cores, "
          f"median of {a.runs}", flush=True)
    results = {}
    for device in ["gpu", "gpu:all", "auto", "cpu"]:
        med, lo, hi = timed(job, device)
        results[device] = med
        print(f"--device {device:8s} {med:7.3f} s [{lo:.3f}-{hi:.3f}]  "
              f"{in_bytes / med / 1e9:6.2f} GB/s of input", flush=True)
    print(f"{job}: all GPUs vs one: {results['gpu'] / results['gpu:all']:.2f}x (target >= 1.6 with "
          f"2 GPUs where the GPU route wins); gpu vs cpu: {results['cpu'] / results['gpu']:.2f}x")
    print(f"{job}: auto vs the faster of gpu, gpu:all and cpu: "
          f"{min(results['gpu'], results['gpu:all'], results['cpu']) / results['auto']:.2f}x")
    if not a.no_stats:
        for device in ["gpu", "gpu:all"]:
            print(f"--stats of --device {device}:", flush=True)
            run(job, device, stats=True)
shutil.rmtree(work)
