#!/usr/bin/env python3
"""What each stage did in each slice of a run, from `fftd --trace FILE`: per BIN ms (default 50),
the ms of `fft` spans on the CPU lane's workers and on a device's workers (and the batches the
device's workers took), the readers' ms waiting for room in the lanes' queues (`send`) and
before a job (next job and buffer), the ms of pinning on set-up threads and on the workers, and
the ms of device downloads. Session 21 found with it that the CPU lane's workers were half idle
while every reader waited in `send` (docs/perf.md, "The CPU lane fed at full rate again").

Usage: bench/trace_busy.py TRACE.json [BIN_MS]"""
import collections
import json
import sys

trace = json.load(open(sys.argv[1]))
bin_us = (float(sys.argv[2]) if len(sys.argv) > 2 else 50.0) * 1e3
events = trace["traceEvents"] if isinstance(trace, dict) else trace
names = {e["tid"]: e["args"]["name"] for e in events
         if e.get("ph") == "M" and e.get("name") == "thread_name"}
spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
t0 = spans[0]["ts"]
thread = lambda e: names.get(e["tid"], "")
on_device = {e["args"]["batch"] for e in spans
             if thread(e).startswith("opencl:") and "batch" in e.get("args", {})}
device_worker = {e["tid"] for e in spans if thread(e).startswith("fft workers")
                 and e["name"] == "fft" and e.get("args", {}).get("batch") in on_device}
cols = ["cpu fft", "dev fft", "dev batches", "readers send", "readers before",
        "pin set-up", "pin workers", "download"]
table = collections.defaultdict(collections.Counter)


def add(e, col, value=None):
    table[int((e["ts"] - t0) // bin_us)][col] += e["dur"] / 1e3 if value is None else value


last_reader_span = {}  # a reader's `wait` after its `frame` span is the send to a lane
for e in spans:
    name, th = e["name"], thread(e)
    if th.startswith("fft workers") and name == "fft":
        add(e, "dev fft" if e["tid"] in device_worker else "cpu fft")
        if e["tid"] in device_worker:
            add(e, "dev batches", 1)
    elif th.startswith("fft workers") and name.startswith("pinned"):
        add(e, "pin workers")
    elif "set-up" in th and name.startswith("pinned"):
        add(e, "pin set-up")
    elif th.startswith("opencl:") and name == "download":
        add(e, "download")
    elif th.startswith("readers"):
        if name == "wait":
            add(e, "readers send" if last_reader_span.get(e["tid"]) == "frame"
                else "readers before")
        last_reader_span[e["tid"]] = name
print(f"{'ms':>6} " + " ".join(f"{c:>14}" for c in cols))
for b in sorted(table):
    row = table[b]
    print(f"{b * bin_us / 1e3:6.0f} " + " ".join(f"{row[c]:14.0f}" for c in cols))
