#!/usr/bin/env python3
"""Reads fftd's `--format f32` stream from stdin: BINS float32 values per frame, nothing else.
Usage: fftd --file rec.wav --frame 4096 --format f32 | python3 examples/consume.py 2049 RATE"""
import sys

import numpy as np

bins, rate = int(sys.argv[1]), float(sys.argv[2])
n = 2 * (bins - 1)
frames = 0
peak_hist = {}
while True:
    chunk = sys.stdin.buffer.read(bins * 4 * 64)
    if not chunk:
        break
    rows = np.frombuffer(chunk, "<f4").reshape(-1, bins)
    frames += len(rows)
    for k in rows.argmax(axis=1):
        peak_hist[k] = peak_hist.get(k, 0) + 1
top = max(peak_hist, key=peak_hist.get)
print(f"{frames} frames of {bins} bins; most common peak: bin {top} = {top * rate / n:.1f} Hz")
