#!/usr/bin/env bash
# fftd's OpenCL kernels vs cuFFT (through torch) on the spectra fftd produces, f32, batches of
# 2^26 samples, kernel time by event profiling on both sides. Prints per size: fftd time, cuFFT
# time, useful GB/s of each (input + output bytes / time) and the ratio (cuFFT time / fftd time).
# Sizes: the powers of two SIZES (A..B or a comma list) and, in the same run, the sizes that are
# not powers of two OTHER_SIZES (mixed-radix 2/3/5/7 passes, Bluestein for 65521 and 2018; set
# OTHER_SIZES= to skip them). cuFFT gets the same sizes and batches (frames = SAMPLES / n).
# Usage: bench/gpu_vs_cufft.sh [OUTDIR]   (FFTD=path/to/fftd, default `fftd`; SIZES=256..65536;
#        OTHER_SIZES=960,1000,1920,2400,3000,44100,48000,65521,2018; REPS=10 fftd runs per size)
# AB=1: also time fftd once per variant of VARIANTS into OUTDIR/LABEL, joined against the same
# cuFFT run, then one table of every variant's time and ratio per size. VARIANTS: variants
# separated by ';', each LABEL:ENV=VALUE[,ENV=VALUE...] (no ',' or ';' in a value). Kernel
# variants are no knobs since issue 40 (the plan decides; experiments live on a branch), so a
# variant is another build: FFTD=path/to/that/fftd, e.g.
# VARIANTS="c70ca51:FFTD=$HOME/fftd-c70ca51/target/release/fftd" (the other build's own knobs,
# such as that commit's FFTD_OPENCL_*, may follow). Default: none.
# CHECK=1: before timing, `fftd check` (the device against the CPU engine, exit 1 on a mismatch)
# at every size, real and complex input, with the run's settings (each variant's too), on 2^22
# samples of noise; results in OUTDIR[/LABEL]/check.txt, one line per size and kind, and the
# script stops at the first mismatch.
# CUFFT_CSV=path: reuse an earlier cufft.csv (same sizes and SAMPLES) instead of running torch.
set -euo pipefail
out=${1:-bench-out}
fftd=${FFTD:-fftd}
sizes=${SIZES:-256..65536}
other=${OTHER_SIZES-960,1000,1920,2400,3000,44100,48000,65521,2018}
samples=${SAMPLES:-67108864}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
# one chunk per batch, so the kernel time is one launch over the whole 2^26-sample batch, as cuFFT's
export FFTD_OPENCL_CHUNK_BYTES=${FFTD_OPENCL_CHUNK_BYTES:-4294967296}
# A..B (powers of two, 2^k allowed) or a comma list -> a comma list, then the other sizes
list=$(python3 -c "
import sys
s = sys.argv[1]
if '..' in s:
    a, b = [int(eval(x.replace('^', '**'))) for x in s.split('..')]
    print(','.join(str(1 << k) for k in range(a.bit_length() - 1, b.bit_length())))
else:
    print(','.join(str(int(eval(x.replace('^', '**')))) for x in s.split(',')))
" "$sizes")
if [ -n "$other" ]; then list="$list,$other"; fi
if [ "${CHECK:-0}" = 1 ]; then
    python3 -c "
import numpy as np
r = np.random.default_rng(29)
r.standard_normal(1 << 22, dtype=np.float32).tofile('$out/check.f32')
r.standard_normal(1 << 23, dtype=np.float32).tofile('$out/check.cf32')
"
fi
# fftd_checks DIR: `fftd check` at every size of $list, real and complex, into DIR/check.txt
fftd_checks() {
    : > "$1/check.txt"
    IFS=',' read -ra ns <<< "$list"
    for n in "${ns[@]}"; do
        for f in "$out/check.f32" "$out/check.cf32"; do
            # the whole file in one batch (one launch: FFTD_OPENCL_CHUNK_BYTES above)
            if ! "$fftd" check --device gpu --file "$f" --frame "$n" --batch $(((1 << 22) / n)) \
                > "$1/check_one.txt" 2>&1; then
                cat "$1/check_one.txt" >&2
                echo "fftd check failed: n=$n $f (settings of $1)" >&2
                exit 1
            fi
            echo "$n ${f##*.} $(grep -o 'mismatches: [0-9]* of [0-9]*' "$1/check_one.txt"), $(grep -o 'max rel error .*' "$1/check_one.txt")" >> "$1/check.txt"
        done
    done
    rm -f "$1/check_one.txt"
}
# fftd_runs DIR: fftd's real and complex timings into DIR (CHECK=1: fftd_checks first)
fftd_runs() {
    mkdir -p "$1"
    if [ "${CHECK:-0}" = 1 ]; then fftd_checks "$1"; fi
    for kind in real complex; do
        "$fftd" bench --device gpu --sizes "$list" --batch-samples "$samples" --no-cpu --reps "${REPS:-10}" \
            --kind "$kind" --csv "$1/fftd_$kind.csv" > "$1/fftd_$kind.txt"
    done
}
fftd_runs "$out"
variants=${VARIANTS-}
labels=()
if [ "${AB:-0}" = 1 ]; then
    IFS=';' read -ra vlist <<< "$variants"
    for v in "${vlist[@]}"; do
        [ -n "$v" ] || continue
        label=${v%%:*}
        IFS=',' read -ra assigns <<< "${v#*:}"
        (
            for a in "${assigns[@]}"; do export "${a?}"; done
            fftd=${FFTD:-$fftd}
            fftd_runs "$out/$label"
        )
        labels+=("$label")
    done
fi
rm -f "$out/check.f32" "$out/check.cf32"
cufft=${CUFFT_CSV:-$out/cufft.csv}
if [ -z "${CUFFT_CSV:-}" ]; then
    python3 "$here/cufft_ref.py" --sizes "$list" --samples "$samples" --csv "$cufft"
fi
python3 "$here/join_cufft.py" "$out/fftd_real.csv" "$out/fftd_complex.csv" "$cufft" | tee "$out/gpu_vs_cufft.txt"
if [ "${#labels[@]}" -gt 0 ]; then
    args=("this=$out")
    for label in "${labels[@]}"; do
        echo
        echo "== $label: $(tr ';' '\n' <<< "$variants" | grep "^$label:" | cut -d: -f2-) =="
        python3 "$here/join_cufft.py" "$out/$label/fftd_real.csv" "$out/$label/fftd_complex.csv" "$cufft" | tee "$out/$label/gpu_vs_cufft.txt"
        args+=("$label=$out/$label")
    done
    echo
    python3 "$here/join_cufft.py" --variants "$cufft" "${args[@]}" | tee "$out/variants.txt"
fi
