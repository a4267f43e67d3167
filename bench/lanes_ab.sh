#!/usr/bin/env bash
# Builds side by side on the GPU route, the runs of each round alternating between builds:
# wall seconds and the `--stats` figures that show a hand-over (p99 latency, the device's share,
# batches held for order, pinned memory) of four jobs on a GiB-sized f32 file in /dev/shm,
# `--device gpu`, f32 spectra to /dev/null, start-up included; the CPU route of the first build
# before and after each job. CORES from taskset (default all). Prints one line per run and the
# medians. DEVICES="cpu gpu" alternates the builds on both routes instead (a change to what feeds
# the lanes: session 21). (Session 20's A/B of the hand-over: docs/perf.md.)
# Usage: BUILDS="name=path name=path ..." [GIB=4] [RUNS=3] [CORES=16] [JOBS="hop512 f64 big logmel"]
#        (also plain: frame 4096 alone)
#        [DEVICES=gpu] bench/lanes_ab.sh
set -euo pipefail
gib=${GIB:-4}; runs=${RUNS:-3}; jobs=${JOBS:-hop512 f64 big logmel}; devices=${DEVICES:-gpu}
file=/dev/shm/fftd-lanes.f32
bash "$(dirname "$0")/noise_f32.sh" "$file" "$gib"
pin=()
[ -n "${CORES:-}" ] && pin=(taskset -c "0-$((CORES - 1))")
declare -A args=(
    [plain]="--frame 4096"
    [hop512]="--frame 4096 --hop 512"
    [f64]="--frame 4096 --hop 1024 --precision f64"
    [big]="--frame 65536 --hop 8192"
    [logmel]="--frame 2048 --hop 512 --bands mel:128 --scale db"
)
declare -A path
names=()
for b in ${BUILDS:?BUILDS=\"name=path ...\"}; do names+=("${b%%=*}"); path[${b%%=*}]=${b#*=}; done
stats=$(mktemp)
times=$(mktemp)
one() { # build job device
    local start=$EPOCHREALTIME
    # shellcheck disable=SC2086
    "${pin[@]}" "${path[$1]}" --file "$file" ${args[$2]} --format f32 --output /dev/null --quiet \
        --device "$3" --stats 2> "$stats"
    local wall
    wall=$(python3 -c "print(round($EPOCHREALTIME - $start, 3))")
    echo "$1 $2 $3 $wall" >> "$times"
    echo "$1 $2 $3 wall $wall | $(grep -o 'p99 [0-9.]* ms' "$stats") |" \
        "$(grep -o 'opencl:[0-9:]* [^;]*: [0-9]* batches, [0-9]* frames ([0-9.]*%)' "$stats" |
            paste -sd ';')" \
        "| $(grep -o 'held for order at most [0-9]*' "$stats") |" \
        "$(grep -o 'pinned alloc [0-9.]* s ([0-9]* blocks, [0-9.]* MiB' "$stats" | paste -sd ';')"
}
"${path[${names[0]}]}" --file "$file" --frame 4096 --format f32 --output /dev/null --quiet \
    --device gpu 2> /dev/null # the driver's and fftd's caches warm
for job in $jobs; do
    [ "$devices" = gpu ] && one "${names[0]}" "$job" cpu
    for _ in $(seq "$runs"); do
        for d in $devices; do
            for b in "${names[@]}"; do one "$b" "$job" "$d"; done
        done
    done
    [ "$devices" = gpu ] && one "${names[0]}" "$job" cpu
done
echo "medians (s):"
python3 - "$times" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    build, job, device, wall = line.split()
    runs[(job, device, build)].append(float(wall))
for (job, device, build), walls in sorted(runs.items()):
    print(f"{job:8s} {device:4s} {build:10s} {statistics.median(walls):.3f}  {walls}")
PY
rm -f "$stats" "$times" "$file"
