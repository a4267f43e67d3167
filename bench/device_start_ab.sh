#!/usr/bin/env bash
# A/B of two fftd builds on the GPU route where the device's start-up matters (session 28,
# docs/perf.md): a fresh machine's first run, runs with a cold driver (page cache dropped,
# ~/.nv and fftd's cache removed: needs root), six jobs at 1 GiB and four at 4 GiB on all
# cores, and two at 1 and 4 GiB on 4 cores, each pair of runs alternating its order (A-B, B-A). Every run first waits until no
# fftd process is left: fftd leaves the driver's teardown to a child that outlives it by 1–2 s,
# and a GPU run started meanwhile finds the driver's platform twice as slow to load.
# Usage (on the GPU machine, as root): bench/device_start_ab.sh FFTD_A FFTD_B OUT_LOG
# Prints one line a run (wall, the device's share of frames, the platform's load); OUT_LOG
# gets every run's `--stats`.
set -u
A=$1 B=$2 LOG=$3
cd "$(dirname "$0")/.."
bash bench/noise_f32.sh /dev/shm/n1.f32 1
bash bench/noise_f32.sh /dev/shm/n4.f32 4
declare -A JOB=([plain]="--frame 4096" [hop512]="--frame 4096 --hop 512"
    [large]="--frame 65536 --hop 8192" [logmel]="--frame 2048 --hop 512 --bands mel:128 --scale db"
    [f64]="--frame 4096 --hop 1024 --precision f64" [welch]="--frame 4096 --hop 2048 --average 64")
settle() {
    local n=0
    while pgrep -f "^($A|$B) " >/dev/null && [ $n -lt 100 ]; do sleep 0.05; n=$((n + 1)); done
    sleep 0.2
}
run() { # label binary file device job [taskset cores]
    local l=$1 b=$2 f=$3 d=$4 j=$5 ts=${6:-} pre=()
    [ -n "$ts" ] && pre=(taskset -c "$ts")
    settle
    local t0 t1 rc
    t0=$(date +%s%N)
    "${pre[@]}" "$b" --file "$f" --input-format f32 --rate 16000 --format f32 --output /dev/null \
        --quiet --device "$d" --stats ${JOB[$j]} 2> /tmp/ab-err.txt
    rc=$?
    t1=$(date +%s%N)
    { echo "## $l $j [$b $d] rc=$rc wall $(((t1 - t0) / 1000000)) ms"; cat /tmp/ab-err.txt; } >> "$LOG"
    local dev plat
    dev=$(grep -o "): [0-9]* batches, [0-9]* frames ([0-9.]*%)" /tmp/ab-err.txt | grep -o "([0-9.]*%)" | tr '\n' ' ')
    plat=$(grep -o "platform [0-9.]* s" /tmp/ab-err.txt | head -1)
    printf "%-8s %-7s %-4s %-4s rc=%s wall %5d ms  dev %-8s %s\n" "$l" "$j" "$([ "$b" = "$A" ] && echo A || echo B)" \
        "$d" $rc $(((t1 - t0) / 1000000)) "${dev:-none}" "$plat"
}
pair() { # i label file job [cores]
    if [ $(($1 % 2)) -eq 1 ]; then
        run "$2" "$A" "$3" gpu "$4" "${5:-}"; run "$2" "$B" "$3" gpu "$4" "${5:-}"
    else
        run "$2" "$B" "$3" gpu "$4" "${5:-}"; run "$2" "$A" "$3" gpu "$4" "${5:-}"
    fi
}
cold() { rm -rf ~/.nv ~/.cache/fftd; sync; echo 3 > /proc/sys/vm/drop_caches; }
echo "== the machine's first run (B), then B, A, B (1 GiB hop 512)"
run first "$B" /dev/shm/n1.f32 gpu hop512; run second "$B" /dev/shm/n1.f32 gpu hop512
run third "$A" /dev/shm/n1.f32 gpu hop512; run fourth "$B" /dev/shm/n1.f32 gpu hop512
echo "== a cold driver before each run (1 GiB hop 512)"
for i in 1 2 3 4; do
    if [ $((i % 2)) -eq 1 ]; then order=("$A" "$B"); else order=("$B" "$A"); fi
    for b in "${order[@]}"; do cold; run "cold$i" "$b" /dev/shm/n1.f32 gpu hop512; done
done
for j in "${!JOB[@]}"; do  # every job's programs built once (4 GiB: the device starts)
    "$B" --file /dev/shm/n4.f32 --input-format f32 --rate 16000 --format f32 --output /dev/null \
        --quiet --device gpu ${JOB[$j]} 2>/dev/null
done
echo "== 1 GiB, all cores"
for j in plain hop512 large logmel f64 welch; do
    for i in 1 2 3 4; do pair $i "1g r$i" /dev/shm/n1.f32 $j; done
    run 1g "$B" /dev/shm/n1.f32 cpu $j; run 1g "$B" /dev/shm/n1.f32 cpu $j
done
echo "== 4 GiB, all cores"
for j in hop512 large logmel f64; do
    for i in 1 2 3 4; do pair $i "4g r$i" /dev/shm/n4.f32 $j; done
    run 4g "$B" /dev/shm/n4.f32 cpu $j
done
echo "== 1 GiB, 4 cores"
for j in hop512 logmel; do for i in 1 2; do pair $i "1g4c r$i" /dev/shm/n1.f32 $j 0-3; done; done
echo "== 4 GiB, 4 cores"
for j in hop512 logmel; do
    for i in 1 2; do pair $i "4g4c r$i" /dev/shm/n4.f32 $j 0-3; done
    run 4g4c "$B" /dev/shm/n4.f32 cpu $j 0-3
done
