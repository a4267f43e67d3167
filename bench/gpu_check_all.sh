#!/usr/bin/env bash
# `fftd check --device gpu` (the device against the CPU engine, exit 1 on a mismatch) at every
# size of the OpenCL plan's kinds: every power of two 2^MIN_LOG2..2^MAX_LOG2 (default 1..26, the
# CPU's largest frame), the mixed-radix sizes and odd sizes of OTHER_SIZES, and Bluestein primes,
# real and complex input, on noise.
# One line per size and kind in OUTDIR/check_all.txt; stops at the first mismatch (exit 1).
# This is what decides a kernel change (PoCL runs a work-group's items one after another between
# barriers, so it cannot show a missing barrier).
# Usage: bench/gpu_check_all.sh [OUTDIR]   (FFTD=path/to/fftd; MIN_LOG2=1; MAX_LOG2=26;
#        OTHER_SIZES=3,5,6,7,12,15,30,60,96,100,105,960,1000,1920,2018,2400,3000,4097,44100,48000,65521,99991,1000000,33554431,44100000)
set -euo pipefail
out=${1:-check-out}
fftd=${FFTD:-fftd}
min=${MIN_LOG2:-1}
max=${MAX_LOG2:-26}
other=${OTHER_SIZES-3,5,6,7,12,15,30,60,96,100,105,960,1000,1920,2018,2400,3000,4097,44100,48000,65521,99991,1000000,33554431,44100000}
mkdir -p "$out"
# noise: enough for 2 frames of the largest size, and at least 2^22 samples
samples=$(( (2 << max) > (1 << 22) ? (2 << max) : (1 << 22) ))
python3 -c "
import numpy as np
r = np.random.default_rng(40)
r.standard_normal($samples, dtype=np.float32).tofile('$out/noise.f32')
r.standard_normal(2 * $samples, dtype=np.float32).tofile('$out/noise.cf32')
"
sizes=$(python3 -c "print(' '.join([str(1 << k) for k in range($min, $max + 1)] + '$other'.split(',')))")
: > "$out/check_all.txt"
for n in $sizes; do
    for f in "$out/noise.f32" "$out/noise.cf32"; do
        # about 2^22 samples a batch, at least one frame
        batch=$(( n >= (1 << 22) ? 1 : (1 << 22) / n ))
        if ! "$fftd" check --device gpu --file "$f" --frame "$n" --batch "$batch" \
            > "$out/one.txt" 2>&1; then
            cat "$out/one.txt" >&2
            echo "fftd check failed: n=$n ${f##*.}" | tee -a "$out/check_all.txt" >&2
            exit 1
        fi
        echo "$n ${f##*.} $(grep -o 'mismatches: [0-9]* of [0-9]*' "$out/one.txt"), $(grep -o 'max rel error .*' "$out/one.txt")" >> "$out/check_all.txt"
    done
done
rm -f "$out/noise.f32" "$out/noise.cf32" "$out/one.txt"
echo "all $(wc -l < "$out/check_all.txt") checks passed"
