#!/usr/bin/env python3
"""Holes in a run's transform work, from `fftd --trace FILE`: the union of the spans in which a
batch is transformed (`fft` of a batch on a CPU lane; `kernels` on a device: a device lane's own
`fft` span also holds its program build and waits, so it is left out), from the first one's
start to the last one's end; prints the longest stretch with no transform in flight, when it
began, and when the device ran its first kernels. Issue 41's hand-over hole is such a stretch.

Usage: bench/trace_gaps.py TRACE.json [LABEL]"""
import json
import sys


def main() -> None:
    path = sys.argv[1]
    label = sys.argv[2] if len(sys.argv) > 2 else path
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    timed = [e for e in events if e.get("ph") == "X"]
    kernels = [e for e in timed if e.get("name") == "kernels"]
    on_device = {(e["args"].get("batch"), e["args"].get("stream")) for e in kernels}
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in timed
        if e["name"] == "kernels"
        or (
            e["name"] == "fft"
            and (e["args"].get("batch"), e["args"].get("stream")) not in on_device
        )
    )
    kernels = [e["ts"] for e in kernels]
    if not spans:
        print(f"{label}: no transform spans")
        return
    gap, gap_at, end = 0.0, None, spans[0][1]
    for start, stop in spans[1:]:
        if start > end and start - end > gap:
            gap, gap_at = start - end, end
        end = max(end, stop)
    first_kernels = "never"
    if kernels:
        first = min(kernels)
        before = max((stop for start, stop in spans if start < first), default=first)
        hole = max(0.0, first - before)
        first_kernels = f"{first / 1e3:.0f} ms, {hole / 1e3:.1f} ms after the last transform before them"
    at = f" from {gap_at / 1e3:.0f} ms" if gap_at is not None else ""
    print(
        f"{label}: longest stretch with no transform in flight {gap / 1e3:.1f} ms{at}; "
        f"transforms {spans[0][0] / 1e3:.0f}..{end / 1e3:.0f} ms; device's first kernels {first_kernels}"
    )


if __name__ == "__main__":
    main()
