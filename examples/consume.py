#!/usr/bin/env python3
"""Reads fftd's `--format f32` stream from stdin: BINS little-endian float32 values per frame,
nothing else. Standard library only (no numpy), so it runs on a fresh machine.
Usage: fftd --file rec.wav --frame 4096 --format f32 | python3 examples/consume.py 2049 RATE"""
import sys
from array import array

bins, rate = int(sys.argv[1]), float(sys.argv[2])
n = 2 * (bins - 1)
row_bytes = bins * 4
frames = 0
peak_hist = {}
pending = b""
while True:
    chunk = sys.stdin.buffer.read(row_bytes * 64)
    if not chunk:
        break
    pending += chunk
    whole = len(pending) - len(pending) % row_bytes  # a pipe may hand over part of a row
    values = array("f", pending[:whole])
    pending = pending[whole:]
    if sys.byteorder == "big":
        values.byteswap()
    for r in range(len(values) // bins):
        row = values[r * bins : (r + 1) * bins]
        k = max(range(bins), key=row.__getitem__)
        peak_hist[k] = peak_hist.get(k, 0) + 1
        frames += 1
if pending:
    sys.exit(f"consume.py: the stream ends inside a frame ({len(pending)} stray bytes)")
if not frames:
    sys.exit("consume.py: no frames on stdin")
top = max(peak_hist, key=peak_hist.get)
print(f"{frames} frames of {bins} bins; most common peak: bin {top} = {top * rate / n:.1f} Hz")
