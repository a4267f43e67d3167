#!/usr/bin/env python3
"""Where a device batch's time goes, from `fftd --trace FILE` of a GPU run: per batch the device
took, the host's `fft` span against the device's commands for it (upload, kernels, download, on
the host clock): from the span's start to the first command, first to last command, last
command to the span's end, and per chunk the gaps between its upload and kernels and between
its kernels and download. Medians, 10th and 90th percentiles, in µs. Session 26 found with it
that a batch of two 8 MiB chunks spent 57 + 52 µs on the host around 281 µs of device commands
(docs/perf.md, "The GPU route's exit, one chunk per device batch, ...").

Usage: bench/trace_batches.py TRACE.json"""
import collections
import json
import statistics
import sys

trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
         if e.get("ph") == "M" and e.get("name") == "thread_name"}
spans = [e for e in events if e.get("ph") == "X"]
device = collections.defaultdict(list)
for e in spans:
    if " engine" in names.get((e["pid"], e["tid"]), "") and "batch" in e.get("args", {}):
        device[e["args"]["batch"]].append(e)
ffts = {e["args"]["batch"]: e for e in spans
        if e["name"] == "fft" and e.get("args", {}).get("batch") in device}
rows = collections.defaultdict(list)
for batch, fft in ffts.items():
    commands = device[batch]
    first = min(c["ts"] for c in commands)
    last = max(c["ts"] + c["dur"] for c in commands)
    rows["fft span"].append(fft["dur"])
    rows["span start -> first command"].append(first - fft["ts"])
    rows["first -> last command"].append(last - first)
    rows["last command -> span end"].append(fft["ts"] + fft["dur"] - last)
    by_name = {n: sorted((c for c in commands if c["name"] == n), key=lambda c: c["ts"])
               for n in ("upload", "kernels", "download")}
    for up, k, down in zip(by_name["upload"], by_name["kernels"], by_name["download"]):
        rows["upload end -> kernels"].append(k["ts"] - up["ts"] - up["dur"])
        rows["kernels end -> download"].append(down["ts"] - k["ts"] - k["dur"])
        for name, c in (("upload", up), ("kernels", k), ("download", down)):
            rows[name + " duration"].append(c["dur"])
print(f"{len(ffts)} device batches")
for name, values in rows.items():
    v = sorted(values)
    print(f"{name:30s} median {statistics.median(v):8.1f}  p10 {v[len(v) // 10]:8.1f}  "
          f"p90 {v[9 * len(v) // 10]:8.1f}")
