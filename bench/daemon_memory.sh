#!/usr/bin/env bash
# issue 27: is fftd's memory flat over a long daemon-like run? A paced live-like input (stdin fed
# at its sample rate by a generator: a 1 kHz tone on for 2 s every 10 s over low noise) through
# rotation every minute, two alerts firing (events to a file), triggered recordings and the live
# view. Every 10 s it samples the resident set size (VmRSS), the anonymous memory and the part of
# it in transparent huge pages (smaps_rollup), and from /metrics the live heap (bytes and
# allocations still allocated; fftd runs with FFTD_HEAP_COUNT=1, which counts them) and
# mimalloc's committed memory. Reports each after the warm-up (the first WARMUP s), at the last
# sample before the input ends, its range in between, and the growth from warm-up to the end.
# Not part of the test suite (it takes DURATION seconds).
#
#   bench/daemon_memory.sh                 # 30 minutes (the issue's run)
#   DURATION=300 bench/daemon_memory.sh    # a short look
#
# Env: DURATION (s, default 1800), RATE (Hz, default 48000), FFTD (binary, default
# target/release/fftd), OUT (folder, default a new temporary one; kept), WARMUP (s, default 120).
# mimalloc's own MIMALLOC_* variables pass through (MIMALLOC_ALLOW_THP=0 and the like).
set -euo pipefail

DURATION=${DURATION:-1800}
RATE=${RATE:-48000}
FFTD=${FFTD:-target/release/fftd}
OUT=${OUT:-$(mktemp -d /tmp/fftd-daemon-memory.XXXXXX)}
WARMUP=${WARMUP:-120}   # s: the pre-roll rings and the live view's history fill first
mkdir -p "$OUT/spectra" "$OUT/rec"
[ -x "$FFTD" ] || { echo "daemon_memory: $FFTD not built (cargo build --release)" >&2; exit 1; }

# the generator: f32 samples at RATE, paced by the wall clock, for DURATION seconds
gen() {
    python3 - "$RATE" "$DURATION" <<'PY'
import array, math, random, sys, time
rate, duration = int(sys.argv[1]), float(sys.argv[2])
block = rate // 10                       # 100 ms blocks
rng = random.Random(1)
noise = array.array('f', (rng.uniform(-1e-3, 1e-3) for _ in range(block)))
tone = array.array('f', (0.5 * math.sin(2 * math.pi * 1000 * i / rate) + noise[i]
                         for i in range(block)))   # 1000 Hz: whole cycles per block
out, start, n = sys.stdout.buffer, time.monotonic(), 0
try:
    while n * 0.1 < duration:
        t = n * 0.1
        out.write((tone if (t % 10.0) < 2.0 else noise).tobytes())
        out.flush()
        n += 1
        delay = start + n * 0.1 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
except BrokenPipeError:
    pass
PY
}

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
gen | FFTD_HEAP_COUNT=1 "$FFTD" --file - --input-format f32 --rate "$RATE" --frame 4096 --hop 2048 \
    --format npy --output "$OUT/spectra/spec-%H%M%S.npy" --rotate 1min \
    --alert 'name=tone,band=900-1100,above=-20,hysteresis=3,hold=100ms' \
    --alert 'name=quiet,band=900-1100,below=-60,hold=1s' \
    --events "$OUT/events.ndjson" --record-on-alert "$OUT/rec" --pre 1s --post 1s \
    --serve "127.0.0.1:$port" --quiet 2>"$OUT/fftd.log" &
pid=$!   # the pipeline's last process: fftd
started=$(date +%s)
sleep 1
kill -0 "$pid" 2>/dev/null || { echo "daemon_memory: fftd did not start:" >&2; cat "$OUT/fftd.log" >&2; exit 1; }

# every 10 s: the process's memory (/proc: VmRSS; smaps_rollup: anonymous memory and the part
# of it in transparent huge pages) and, from /metrics, the heap as the allocator sees it: live
# bytes (FFTD_HEAP_COUNT=1 counts them) and mimalloc's committed memory
echo "seconds,rss_kib,anon_kib,anon_huge_kib,heap_live_kib,heap_allocations,mi_committed_kib" >"$OUT/rss.csv"
sample() {
    local rss anon huge metrics live count committed
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] || return 0
    anon=$(awk '/^Anonymous:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
    huge=$(awk '/^AnonHugePages:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
    metrics=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics" || true)
    live=$(awk '$1 == "fftd_heap_live_bytes" {printf "%d", $2 / 1024}' <<<"$metrics")
    count=$(awk '$1 == "fftd_heap_live_allocations" {printf "%d", $2}' <<<"$metrics")
    committed=$(awk '$1 == "fftd_heap_committed_bytes" {printf "%d", $2 / 1024}' <<<"$metrics")
    echo "$1,$rss,$anon,$huge,$live,$count,$committed" >>"$OUT/rss.csv"
    # the live heap by allocation size, at the warm-up's end and the last sample
    if [ "$1" -eq "$WARMUP" ] || [ "$1" -eq "$LAST" ]; then
        grep '^fftd_heap_live_bytes_by_size' <<<"$metrics" >"$OUT/heap-sizes-$1.txt" || true
    fi
}
# (on the wall clock since fftd started, so the last samples are still the run's, not its end)
LAST=$(( (DURATION - 1) / 10 * 10 ))
t=0
while kill -0 "$pid" 2>/dev/null && [ "$t" -le "$DURATION" ]; do
    sample "$t"
    t=$((t + 10))
    while [ "$(( $(date +%s) - started ))" -lt "$t" ]; do sleep 0.2; done
done
# the live view keeps serving after the input ends: stop it as Ctrl-C would
kill -INT "$pid" 2>/dev/null || true
wait || true

python3 - "$OUT" "$WARMUP" "$DURATION" <<'PY'
import csv, os, sys
out, warmup, duration = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rows = list(csv.DictReader(open(f"{out}/rss.csv")))
after = [r for r in rows if warmup <= int(r["seconds"]) < duration]   # teardown is not the run
if len(after) < 2:
    sys.exit("daemon_memory: too few samples after the warm-up (DURATION too short?)")
files = len(os.listdir(f"{out}/spectra"))
recs = len([f for f in os.listdir(f"{out}/rec") if f.endswith(".wav")])
events = sum(1 for _ in open(f"{out}/events.ndjson"))
print(f"daemon_memory: {duration:.0f} s paced run, {files} rotated files, {events} events, {recs} recordings")
t0, t1 = int(after[0]["seconds"]), int(after[-1]["seconds"])
for key, what in [("rss_kib", "RSS"), ("anon_kib", "anonymous"), ("anon_huge_kib", "in huge pages"),
                  ("heap_live_kib", "live heap"), ("heap_allocations", "live allocations"),
                  ("mi_committed_kib", "mimalloc committed")]:
    values = [int(r[key]) for r in after if r.get(key)]
    if len(values) != len(after):
        continue   # not sampled (no FFTD_HEAP_COUNT=1, or an older fftd)
    unit = "" if key == "heap_allocations" else " KiB"
    v0, v1 = values[0], values[-1]
    print(f"daemon_memory: {what:18s} {v0}{unit} at {t0} s, {v1}{unit} at {t1} s, "
          f"growth {v1 - v0:+d}{unit} ({(v1 - v0) / max(t1 - t0, 1) * 3600:+.0f}{unit}/h), "
          f"range after warm-up {min(values)}-{max(values)}{unit}")
print(f"daemon_memory: samples in {out}/rss.csv")
PY
