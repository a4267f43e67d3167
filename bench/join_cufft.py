#!/usr/bin/env python3
"""Joins fftd bench CSVs (real and complex runs) with bench/cufft_ref.py's CSV and prints, per
size, fftd kernel time, cuFFT time, useful GB/s of each, and the ratio cuFFT time / fftd time
(> 1: fftd faster). Usage: join_cufft.py FFTD_REAL.csv FFTD_COMPLEX.csv CUFFT.csv"""
import csv, sys

def load(p):
    with open(p) as f:
        return list(csv.DictReader(f))

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
