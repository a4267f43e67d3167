#!/usr/bin/env bash
# Issue 41 item 2, rows out without a copy, before/after on one machine: wall seconds (median of
# RUNS) of four jobs on a GiB-sized f32 file in /dev/shm, `--device gpu` with fftd OLD and NEW
# side by side (alternating, run by run), f32 spectra to /dev/null (a pipe-like output: not
# placed in a file), start-up included; each core count of CORES through taskset; then one
# `--stats` run of each on the first job at the first core count.
# Usage: OLD=path NEW=path [GIB=4] [RUNS=5] [CORES="16 4"] bench/rows_ab.sh
set -euo pipefail
gib=${GIB:-4}; runs=${RUNS:-5}; cores=${CORES:-16 4}
file=/dev/shm/fftd-rows.f32
bash "$(dirname "$0")/noise_f32.sh" "$file" "$gib"
declare -A jobs=(
    [hop512]="--frame 4096 --hop 512"
    [plain]="--frame 4096"
    [logmel]="--frame 2048 --hop 512 --bands mel:128 --scale db"
    [f64]="--frame 4096 --hop 1024 --precision f64"
)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
one() { # cores fftd job
    local s=$EPOCHREALTIME
    taskset -c "0-$(($1 - 1))" "$2" --file "$file" --input-format f32 --rate 16000 --format f32 \
        --output /dev/null --quiet --device gpu ${jobs[$3]}
    awk "BEGIN { print $EPOCHREALTIME - $s }"
}
for c in $cores; do
    for job in hop512 plain logmel f64; do
        : > /tmp/rows-old; : > /tmp/rows-new
        for _ in $(seq "$runs"); do
            one "$c" "$OLD" "$job" >> /tmp/rows-old
            one "$c" "$NEW" "$job" >> /tmp/rows-new
        done
        o=$(median < /tmp/rows-old); n=$(median < /tmp/rows-new)
        echo "$job cores $c old $o new $n old/new $(awk "BEGIN { printf \"%.2f\", $o / $n }")"
    done
done
c=${cores%% *}
for way in OLD NEW; do
    echo "$way --stats, hop512, $c cores:"
    taskset -c "0-$((c - 1))" "${!way}" --file "$file" --input-format f32 --rate 16000 \
        --format f32 --output /dev/null --device gpu --stats ${jobs[hop512]} 2>&1 | grep -E "stages|devices"
done
rm -f "$file"
