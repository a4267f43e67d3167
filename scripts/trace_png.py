#!/usr/bin/env python3
"""Draws a `fftd --trace` timeline (Chrome trace-event JSON) as a PNG, offline: one row per
track (thread, OpenCL queue, device set-up), a bar per span coloured by stage. Needs matplotlib (`pip install matplotlib`).

    python3 scripts/trace_png.py run.json docs/img/trace-cpu.png [--title TEXT]
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {
    "start-up": "#999999",
    "engines": "#666666",
    "planning and outputs": "#bbbbbb",
    "read": "#1f77b4",
    "decode": "#17becf",
    "frame": "#9467bd",
    "batch": "#8c564b",
    "fft": "#d62728",
    "encode": "#2ca02c",
    "write": "#ff7f0e",
    "wait": "#eeeeee",
    "teardown": "#444444",
    # the OpenCL queues' tracks ("opencl:P:D engine K upload / kernels / download")
    "upload": "#e377c2",
    "kernels": "#bcbd22",
    "download": "#7f7f7f",
    # device set-up and pinned memory (on their thread's track, or "opencl:P:D set-up")
    "platform": "#555555",
    "context": "#777777",
    "calibration": "#aaaaaa",
    "program build": "#000000",
    "pinned alloc": "#8c6d31",
    "pinned release": "#bd9e39",
    # the averaging, progress and stall-watcher threads
    "average": "#393b79",
    "progress": "#9c9ede",
    "watch": "#637939",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--title", default="fftd --trace")
    args = ap.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    tids = sorted({e["tid"] for e in spans})
    row = {tid: i for i, tid in enumerate(tids)}
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(tids) + 1.5))
    # drawn thinner: inside start-up, or inside a thread's span (set-up done by a stage thread)
    nested = {"engines", "planning and outputs", "program build", "pinned alloc", "pinned release"}
    # one broken_barh call per (thread, span name): a trace of 100 000 spans draws in seconds
    bars = {}
    # spans of a few µs (a chunk's copy) stay visible: at least 1/1500 of the time drawn
    least = max(max((e["ts"] + e["dur"] for e in spans), default=0) / 1e3 / 1500, 0.01)
    for e in spans:
        bars.setdefault((e["tid"], e["name"]), []).append((e["ts"] / 1e3, max(e["dur"] / 1e3, least)))
    seen = set()
    for (tid, name), ranges in bars.items():
        y = row[tid]
        h = 0.4 if name in nested else 0.8
        ax.broken_barh(
            ranges,
            (y - h / 2, h),
            facecolors=COLOURS.get(name, "#000000"),
            edgecolor="none",
            label=name if name not in seen else None,
        )
        seen.add(name)
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([names.get(t, str(t)) for t in tids])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the run's start")
    ax.set_title(args.title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)


if __name__ == "__main__":
    main()
