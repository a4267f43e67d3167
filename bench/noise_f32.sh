#!/usr/bin/env bash
# GIB GiB of f32 noise (seed 41, the same bytes every time) in FILE (until 2026-11-28 it wrote
# four times GIB: figures from it before then are for 4x the GiB they name), for the GPU-route
# benchmarks (bench/hole_ab.sh, bench/hole_trace.sh, bench/rows_ab.sh).
# Usage: bench/noise_f32.sh FILE GIB
set -euo pipefail
python3 -c "
import numpy as np
r = np.random.default_rng(41)
with open('$1', 'wb') as f:
    for _ in range($2 * 4):  # 2^26 f32 = 256 MiB a block
        r.standard_normal(1 << 26, dtype=np.float32).tofile(f)
"
