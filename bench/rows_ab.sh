#!/usr/bin/env bash
# Issue 41 item 2, rows out without a copy and f64 runs with f32 over the bus, before/after on
# one machine: wall seconds (median of RUNS) of the JOBS on a GiB-sized f32 file in /dev/shm,
# `--device gpu` with fftd OLD and NEW side by side (alternating, run by run; with CPU_ROUTE=1
# NEW's `--device cpu` too, the route the issue's targets compare with), f32 spectra to
# /dev/null (a pipe-like output: not placed in a file), start-up included; each core count of
# CORES through taskset; then one `--stats` run of OLD and NEW for each job of STATS at the first
# core count (NEW's devices line says how many batches crossed as f32 each way).
# Usage: OLD=path NEW=path [GIB=4] [RUNS=5] [CORES="16 4"] [JOBS="hop512 plain logmel f64"]
#        [STATS=hop512] [CPU_ROUTE=0] bench/rows_ab.sh
# The f64 job alone (issue 41 item 2's f32 transfers):
#        OLD=old/fftd NEW=new/fftd JOBS=f64 STATS=f64 CPU_ROUTE=1 bash bench/rows_ab.sh
# On the GPU machine, register NVIDIA's OpenCL first (bench/gpu_env.sh does).
set -euo pipefail
gib=${GIB:-4}; runs=${RUNS:-5}; cores=${CORES:-16 4}
todo=${JOBS:-hop512 plain logmel f64}; stats=${STATS:-${todo%% *}}; cpu_route=${CPU_ROUTE:-0}
file=/dev/shm/fftd-rows.f32
bash "$(dirname "$0")/noise_f32.sh" "$file" "$gib"
declare -A jobs=(
    [hop512]="--frame 4096 --hop 512"
    [plain]="--frame 4096"
    [logmel]="--frame 2048 --hop 512 --bands mel:128 --scale db"
    [f64]="--frame 4096 --hop 1024 --precision f64"
)
for job in $todo $stats; do
    [[ -n ${jobs[$job]:-} ]] || { echo "unknown job $job (${!jobs[*]})" >&2; exit 2; }
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
one() { # cores fftd job [device]
    local s=$EPOCHREALTIME
    taskset -c "0-$(($1 - 1))" "$2" --file "$file" --input-format f32 --rate 16000 --format f32 \
        --output /dev/null --quiet --device "${4:-gpu}" ${jobs[$3]}
    awk "BEGIN { print $EPOCHREALTIME - $s }"
}
for c in $cores; do
    for job in $todo; do
        : > /tmp/rows-old; : > /tmp/rows-new; : > /tmp/rows-cpu
        for _ in $(seq "$runs"); do
            one "$c" "$OLD" "$job" >> /tmp/rows-old
            one "$c" "$NEW" "$job" >> /tmp/rows-new
            [[ $cpu_route == 1 ]] && one "$c" "$NEW" "$job" cpu >> /tmp/rows-cpu
        done
        o=$(median < /tmp/rows-old); n=$(median < /tmp/rows-new)
        line="$job cores $c old $o new $n old/new $(awk "BEGIN { printf \"%.2f\", $o / $n }")"
        if [[ $cpu_route == 1 ]]; then
            p=$(median < /tmp/rows-cpu)
            line+=" cpu route (new) $p new vs cpu $(awk "BEGIN { printf \"%.2f\", $p / $n }")x"
        fi
        echo "$line"
    done
done
c=${cores%% *}
for job in $stats; do
    for way in OLD NEW; do
        echo "$way --stats, $job, $c cores:"
        taskset -c "0-$((c - 1))" "${!way}" --file "$file" --input-format f32 --rate 16000 \
            --format f32 --output /dev/null --device gpu --stats ${jobs[$job]} 2>&1 |
            grep -E "^fftd "
    done
done
rm -f "$file"
