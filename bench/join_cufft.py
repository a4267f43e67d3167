#!/usr/bin/env python3
"""Joins fftd bench CSVs (real and complex runs) with bench/cufft_ref.py's CSV and prints, per
size, fftd kernel time, cuFFT time, useful GB/s of each, and the ratio cuFFT time / fftd time
(> 1: fftd faster). Usage: join_cufft.py FFTD_REAL.csv FFTD_COMPLEX.csv CUFFT.csv
join_cufft.py --variants CUFFT.csv LABEL=DIR...: one table per input kind, per size each
variant's fftd time (DIR/fftd_real.csv, DIR/fftd_complex.csv) and its ratio against cuFFT
(real: rfft(x*w).abs(), complex: bare fft), the fastest variant marked with *."""
import csv, os, sys

def load(p):
    with open(p) as f:
        return list(csv.DictReader(f))

def kernel_ms(r):
    """fftd's kernel time of one CSV row in ms (None when not measured)."""
    if not r["opencl_kernel_us_per_frame"]:
        return None
    return float(r["opencl_kernel_us_per_frame"]) * int(r["frames"]) * 1e-3

def variants(cu_path, pairs):
    cuf = {(int(r["n"]), r["op"]): float(r["ms"]) for r in load(cu_path)}
    runs = [(p.split("=", 1)[0], p.split("=", 1)[1]) for p in pairs]
    for kind, op in (("real", "rfft_abs"), ("complex", "fft")):
        times = {}
        sizes = []
        for label, d in runs:
            path = os.path.join(d, f"fftd_{kind}.csv")
            if not os.path.exists(path):
                continue
            for r in load(path):
                n = int(r["n"])
                if n not in sizes:
                    sizes.append(n)
                times[(label, n)] = kernel_ms(r)
        print(f"\n{kind} input: fftd ms (ratio = cuFFT {op} ms / fftd ms), * = fastest")
        print(f"{'n':>7} {op + '_ms':>12}" + "".join(f" {l:>16}" for l, _ in runs))
        for n in sizes:
            c = cuf.get((n, op))
            got = [times.get((l, n)) for l, _ in runs]
            best = min((t for t in got if t), default=None)
            line = f"{n:>7} {c if c else float('nan'):12.4f}"
            for t in got:
                if t is None:
                    line += f" {'-':>16}"
                else:
                    ratio = f"{c / t:.2f}x" if c else "-"
                    mark = "*" if t == best else " "
                    line += f" {t:8.4f} {ratio:>6}{mark}"
            print(line)

if sys.argv[1] == "--variants":
    variants(sys.argv[2], sys.argv[3:])
    sys.exit(0)

real, cplx, cu = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
cuf = {(int(r["n"]), r["op"]): r for r in cu}

def table(title, rows, ops):
    print(f"\n{title}")
    hdr = f"{'n':>7} {'frames':>8} {'fftd_ms':>9} {'fftd_GB/s':>10}"
    for op in ops:
        hdr += f" {op + '_ms':>12} {op + '_GB/s':>13} {'ratio':>6}"
    print(hdr)
    for r in rows:
        n, frames = int(r["n"]), int(r["frames"])
        if not r["opencl_kernel_us_per_frame"]:
            continue
        ms = float(r["opencl_kernel_us_per_frame"]) * frames * 1e-3
        line = f"{n:>7} {frames:>8} {ms:9.4f} {float(r['kernel_gbps']):10.1f}"
        for op in ops:
            c = cuf.get((n, op))
            if c:
                cms = float(c["ms"])
                line += f" {cms:12.4f} {float(c['useful_gbps']):13.1f} {cms / ms:6.2f}"
            else:
                line += f" {'-':>12} {'-':>13} {'-':>6}"
        print(line)

table("real input: fftd (window + r2c + |X|) vs torch.fft.rfft(x*w).abs() and bare rfft", real, ["rfft_abs", "rfft"])
table("complex input: fftd (window + c2c + |X|) vs bare torch.fft.fft(z) and fft(z*w).abs()", cplx, ["fft", "fft_abs"])
