#!/usr/bin/env bash
# Issue 41's hand-over hole, seen in the timeline: RUNS runs each of three jobs with fftd OLD and
# NEW (`--device gpu --trace`) on a GiB-sized f32 file in /dev/shm, and for each the stretch with
# no transform in flight just before the device's first kernels (bench/trace_gaps.py). One
# untimed run of each binary first, so the device-kind cache is warm (the CPU lanes start at once).
# Usage: OLD=path NEW=path [GIB=4] [RUNS=5] bench/hole_trace.sh
set -euo pipefail
gib=${GIB:-4}; runs=${RUNS:-5}
file=/dev/shm/fftd-hole.f32
trace=$(mktemp --suffix=.json)
trap 'rm -f "$file" "$trace"' EXIT
bash "$(dirname "$0")/noise_f32.sh" "$file" "$gib"
declare -A jobs=(
    [plain]="--frame 4096"
    [hop512]="--frame 4096 --hop 512"
    [logmel]="--frame 2048 --hop 512 --bands mel:128 --scale db"
)
run() { # BINARY JOB
    "$1" --file "$file" --input-format f32 --rate 16000 --format f32 --output /dev/null \
        --quiet --device gpu ${jobs[$2]} --trace "$trace"
}
run "$OLD" plain
run "$NEW" plain
for job in logmel hop512 plain; do
    for r in $(seq "$runs"); do
        for way in "old $OLD" "new $NEW"; do
            set -- $way
            s=$EPOCHREALTIME
            run "$2" "$job"
            t=$(awk "BEGIN { printf \"%.3f\", $EPOCHREALTIME - $s }")
            python3 "$(dirname "$0")/trace_gaps.py" "$trace" "$job $1 run $r (${t} s)"
        done
    done
done
