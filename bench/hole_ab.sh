#!/usr/bin/env bash
# Issue 41's hand-over, before/after on one machine: wall seconds (median of RUNS) of three jobs
# on a GiB-sized f32 file in /dev/shm, `--device gpu` with fftd OLD and NEW, and the CPU route
# (NEW), f32 spectra to /dev/null, start-up included; CORES from taskset (default all).
# Usage: OLD=path NEW=path [GIB=4] [RUNS=3] [CORES=16] bench/hole_ab.sh
set -euo pipefail
gib=${GIB:-4}; runs=${RUNS:-3}
file=/dev/shm/fftd-hole.f32
bash "$(dirname "$0")/noise_f32.sh" "$file" "$gib"
pin=()
[ -n "${CORES:-}" ] && pin=(taskset -c "0-$((CORES - 1))")
declare -A jobs=(
    [plain]="--frame 4096"
    [hop512]="--frame 4096 --hop 512"
    [logmel]="--frame 2048 --hop 512 --bands mel:128 --scale db"
)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
for job in plain hop512 logmel; do
    for way in "gpu $OLD old" "gpu $NEW new" "cpu $NEW new"; do
        set -- $way
        t=$(for _ in $(seq "$runs"); do
            s=$EPOCHREALTIME
            "${pin[@]}" "$2" --file "$file" --input-format f32 --rate 16000 --format f32 \
                --output /dev/null --quiet --device "$1" ${jobs[$job]}
            awk "BEGIN { print $EPOCHREALTIME - $s }"
        done | median)
        echo "$job $1 $3 $t"
    done
done
rm -f "$file"
