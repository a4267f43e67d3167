#!/usr/bin/env python3
"""Pinned and pageable PCIe copy bandwidth (torch, CUDA events, median of 10), 256 MiB each way:
the reference for fftd's host-to-host GPU stage."""
import torch

n = 64 << 20  # float32 values = 256 MiB
dev = torch.empty(n, device="cuda")
for name, host in [("pinned", torch.empty(n).pin_memory()), ("pageable", torch.empty(n))]:
    host.uniform_()
    for direction in ["h2d", "d2h"]:
        ts = []
        for _ in range(12):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            if direction == "h2d":
                dev.copy_(host, non_blocking=True)
            else:
                host.copy_(dev, non_blocking=True)
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e))
        ts = sorted(ts[2:])
        ms = ts[len(ts) // 2]
        print(f"{name:9} {direction}: {n * 4 / (ms * 1e-3) / 1e9:6.1f} GB/s")
