#!/usr/bin/env python3
"""Issue 23's benchmark: six jobs x the cpu, gpu and auto routes x 2/4/8/all cores (taskset), and a
torch script and a cupyx.scipy.signal script doing each job on CUDA from the same file (CUDA
start-up excluded: one warm-up call first), wall time with fftd's start-up. Prints a table of medians and the ratios the issue's
targets name.

    python3 bench/e2e_routes.py [--fftd target/release/fftd] [--runs 2] [--log2-samples 28]
                                [--cores 2,4,8,all] [--jobs plain,overlap,...] [--auto-learn 2]

`auto` keeps a record per job shape and core count (fftd's cache folder): each core count gets
--auto-learn untimed runs first, in which it tries the routes it has no figure for.

Needs numpy; torch with CUDA for the torch column, cupy for the cupyx one (each skipped, and said
so, without it)."""
import argparse, os, statistics, subprocess, sys, tempfile, time

import numpy as np

JOBS = {
    "plain": ("frame 4096", ["--frame", "4096"]),
    "overlap": ("frame 4096 hop 512", ["--frame", "4096", "--hop", "512"]),
    "large": ("frame 65536 hop 8192", ["--frame", "65536", "--hop", "8192"]),
    "logmel": ("log-mel 2048 hop 512 mel:128 dB",
               ["--frame", "2048", "--hop", "512", "--bands", "mel:128", "--scale", "db"]),
    "f64": ("f64 4096 hop 1024", ["--frame", "4096", "--hop", "1024", "--precision", "f64"]),
    "welch": ("Welch 4096 hop 2048 --average 64", ["--frame", "4096", "--hop", "2048", "--average", "64"]),
}

ap = argparse.ArgumentParser()
ap.add_argument("--fftd", default="target/release/fftd")
ap.add_argument("--runs", type=int, default=2)
ap.add_argument("--log2-samples", type=int, default=28)
ap.add_argument("--dir", default="/dev/shm")
ap.add_argument("--cores", default="2,4,8,all")
ap.add_argument("--jobs", default=",".join(JOBS))
ap.add_argument("--routes", default="cpu,gpu,auto")
ap.add_argument("--no-torch", action="store_true", help="skip the torch column")
ap.add_argument("--no-cupy", action="store_true", help="skip the cupyx.scipy.signal column")
ap.add_argument("--auto-learn", type=int, default=2,
                help="untimed auto runs per core count first (its records are per job and cores)")
a = ap.parse_args()
samples = 1 << a.log2_samples
path = os.path.join(tempfile.mkdtemp(prefix="fftd-routes-", dir=a.dir), "x.f32")
rng = np.random.default_rng(0)
with open(path, "wb") as f:
    for _ in range(max(1, samples >> 26)):
        rng.standard_normal(min(samples, 1 << 26), dtype=np.float32).tofile(f)
ncpu = os.cpu_count()


def taskset(cores):
    return [] if cores == "all" else ["taskset", "-c", f"0-{int(cores) - 1}"]


spreads = {}  # (job, route, cores) -> every run's wall s, printed after the ratios


def median_time(cmd, runs, key=None):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    if key is not None:
        spreads[key] = times
    return statistics.median(times)


def fftd_cmd(job, route, cores):
    return [*taskset(cores), a.fftd, "--file", path, "--input-format", "f32", "--rate", "16000",
            "--format", "f32", "--output", "/dev/null", "--quiet", "--device", route, *JOBS[job][1]]


def read_pieces(dtype=np.float32):
    """The input in pieces of 2^26 samples, as `dtype` (a peer's frames across piece edges are
    left out: timing only)."""
    with open(path, "rb") as f:
        while True:
            x = np.fromfile(f, "<f4", count=1 << 26)
            if x.size == 0:
                return
            yield x.astype(dtype, copy=False)


def peer_jobs(write, spectra, logmel, welch):
    """A peer's six jobs from its `spectra(n, hop, dtype)` and the rows' `write`."""
    return {
        "plain": lambda: write(spectra(4096, 4096)),
        "overlap": lambda: write(spectra(4096, 512)),
        "large": lambda: write(spectra(65536, 8192)),
        "logmel": logmel,
        "f64": lambda: write(spectra(4096, 1024, np.float64)),
        "welch": welch,
    }


def mel_fb_np(n_fft, n_mels, sr):
    """HTK-mel triangular filters on the rfft bins (as torchaudio's melscale_fbanks), bins x mels."""
    def hz2mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)
    mels = np.linspace(hz2mel(0.0), hz2mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    bins = np.linspace(0, sr / 2, n_fft // 2 + 1)
    fb = np.zeros((n_fft // 2 + 1, n_mels), np.float32)
    for m in range(n_mels):
        lo, c, hi = hz[m], hz[m + 1], hz[m + 2]
        fb[:, m] = np.maximum(0, np.minimum((bins - lo) / (c - lo), (hi - bins) / (hi - c)))
    return fb


def torch_jobs():
    import torch
    assert torch.cuda.is_available()
    dev = "cuda"

    def pieces(dtype=np.float32):
        for x in read_pieces(dtype):
            yield torch.from_numpy(x).to(dev, non_blocking=False)

    def spectra(n, hop, dtype=np.float32, power=False):
        w = None
        for x in pieces(dtype):
            if w is None:
                w = torch.hann_window(n, periodic=True, device=dev, dtype=x.dtype)
            s = torch.fft.rfft(x.unfold(0, n, hop) * w).abs()
            yield s * s if power else s

    def write(it):
        for s in it:
            s.cpu().numpy().tofile("/dev/null")
        torch.cuda.synchronize()

    fb = torch.from_numpy(mel_fb_np(2048, 128, 16000)).to(dev)

    def logmel():
        for p in spectra(2048, 512, power=True):
            m = p @ fb
            (10 * torch.log10(torch.clamp(m, min=1e-24))).cpu().numpy().tofile("/dev/null")
        torch.cuda.synchronize()

    def welch():
        for p in spectra(4096, 2048, power=True):
            rows = p.shape[0] // 64 * 64
            p[:rows].reshape(-1, 64, p.shape[1]).mean(1).cpu().numpy().tofile("/dev/null")
        torch.cuda.synchronize()

    return peer_jobs(write, spectra, logmel, welch)


def cupy_jobs():
    """The same jobs as a user of cupyx.scipy.signal writes them: `spectrogram` per piece (the
    frames across piece edges left out, as torch's), mel filters by a matrix product."""
    import cupy as cp
    from cupyx.scipy import signal as cs

    def pieces(dtype=np.float32):
        for x in read_pieces(dtype):
            yield cp.asarray(x)

    def spectra(n, hop, dtype=np.float32, power=False):
        for x in pieces(dtype):
            _, _, s = cs.spectrogram(x, fs=16000.0, window="hann", nperseg=n, noverlap=n - hop,
                                     detrend=False, mode="psd" if power else "magnitude")
            yield s  # bins x frames

    def write(it):
        for s in it:
            cp.asnumpy(s).tofile("/dev/null")
        cp.cuda.Device().synchronize()

    fb = None

    def logmel():
        nonlocal fb
        if fb is None:
            fb = cp.asarray(mel_fb_np(2048, 128, 16000).T)
        for p in spectra(2048, 512, power=True):
            m = fb @ p
            cp.asnumpy(10 * cp.log10(cp.maximum(m, 1e-24))).tofile("/dev/null")
        cp.cuda.Device().synchronize()

    def welch():
        for p in spectra(4096, 2048, power=True):
            cols = p.shape[1] // 64 * 64
            cp.asnumpy(p[:, :cols].reshape(p.shape[0], -1, 64).mean(2)).tofile("/dev/null")
        cp.cuda.Device().synchronize()

    return peer_jobs(write, spectra, logmel, welch)


def peer_time(fns, job):
    fns[job]()  # warm-up: CUDA context, FFT plans, kernels
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        fns[job]()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


jobs = a.jobs.split(",")
routes = a.routes.split(",")
cores_list = a.cores.split(",")
print(f"{samples} f32 samples ({samples * 4 / 2**30:.2f} GiB) in {a.dir}, rate 16 kHz, f32 out to "
      f"/dev/null, {ncpu} cores, median of {a.runs} after a warm-up; wall s with start-up", flush=True)
def peer_fns(label, skipped, flag, make):
    """A peer's jobs, or none (said so) where `flag` skips it or it cannot run here."""
    try:
        if skipped:
            raise RuntimeError(flag)
        return make()
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"{label} column skipped: {e}", flush=True)
        return {}


torch_fns = peer_fns("torch", a.no_torch, "--no-torch", torch_jobs)
cupy_fns = peer_fns("cupyx", a.no_cupy, "--no-cupy", cupy_jobs)
table = {}
for job in jobs:
    for route in routes:
        subprocess.run(fftd_cmd(job, route, "all"), check=True)  # warm-up: cache, kernels
        for cores in cores_list:
            if route == "auto":
                for _ in range(a.auto_learn):  # auto tries each way once per job shape and cores
                    subprocess.run(fftd_cmd(job, route, cores), check=True)
            key = (job, route, cores)
            table[key] = median_time(fftd_cmd(job, route, cores), a.runs, key)
    for peer, fns in (("torch", torch_fns), ("cupyx", cupy_fns)):
        if job in fns:
            table[(job, peer, "all")] = peer_time(fns, job)
    line = " | ".join(
        f"{c}: " + " / ".join(f"{table[(job, r, c)]:.3f}" for r in routes) for c in cores_list)
    peers = "".join(f" | {p} {table[(job, p, 'all')]:.3f}" for p in ("torch", "cupyx")
                    if (job, p, "all") in table)
    print(f"{JOBS[job][0]:34s} ({'/'.join(routes)}) {line}{peers}", flush=True)

print("\nratios (cpu time / gpu time; auto vs the faster route: faster / auto)")
for job in jobs:
    parts = []
    for cores in cores_list:
        get = lambda r: table.get((job, r, cores))
        cpu, gpu, auto = get("cpu"), get("gpu"), get("auto")
        if cpu and gpu:
            s = f"{cores}: gpu {cpu / gpu:.2f}x"
            if auto:
                s += f", auto {min(cpu, gpu) / auto:.2f}"
            parts.append(s)
    gpu_all = table.get((job, "gpu", "all"))
    peers = [table[(job, p, "all")] for p in ("torch", "cupyx") if (job, p, "all") in table]
    for peer in ("torch", "cupyx"):
        if table.get((job, peer, "all")) and gpu_all:
            parts.append(f"{peer}/gpu {table[(job, peer, 'all')] / gpu_all:.2f}x")
    if len(peers) == 2 and gpu_all:  # issue 41's log-mel target is against the faster peer
        parts.append(f"faster peer/gpu {min(peers) / gpu_all:.2f}x")
    print(f"{JOBS[job][0]:34s} " + "; ".join(parts), flush=True)

# a GPU run's start-up varies by 0.1-0.3 s with the driver's state (docs/perf.md, session 23):
# every run is printed, so a verdict on a short job can be read against its spread
print("\nevery run (wall s, in order)")
for job in jobs:
    cells = [f"{r}@{c}: " + " ".join(f"{t:.3f}" for t in spreads[(job, r, c)])
             for r in routes for c in cores_list if (job, r, c) in spreads]
    print(f"{JOBS[job][0]:34s} " + " | ".join(cells), flush=True)
os.remove(path)
