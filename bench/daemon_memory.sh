#!/usr/bin/env bash
# issue 27: is fftd's memory flat over a long daemon-like run? A paced live-like input (stdin fed
# at its sample rate by a generator: a 1 kHz tone on for 2 s every 10 s over low noise) through
# rotation every minute, two alerts firing (events to a file), triggered recordings and the live
# view; the resident set size (VmRSS) is sampled every 10 s. Reports the RSS after the warm-up
# (the first WARMUP s), at the last sample before the input ends, its range in between, and the
# growth from warm-up to the end.
# Not part of the test suite (it takes DURATION seconds).
#
#   bench/daemon_memory.sh                 # 30 minutes (the issue's run)
#   DURATION=300 bench/daemon_memory.sh    # a short look
#
# Env: DURATION (s, default 1800), RATE (Hz, default 48000), FFTD (binary, default
# target/release/fftd), OUT (folder, default a new temporary one; kept).
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
gen | "$FFTD" --file - --input-format f32 --rate "$RATE" --frame 4096 --hop 2048 \
    --format npy --output "$OUT/spectra/spec-%H%M%S.npy" --rotate 1min \
    --alert 'name=tone,band=900-1100,above=-20,hysteresis=3,hold=100ms' \
    --alert 'name=quiet,band=900-1100,below=-60,hold=1s' \
    --events "$OUT/events.ndjson" --record-on-alert "$OUT/rec" --pre 1s --post 1s \
    --serve "127.0.0.1:$port" --quiet 2>"$OUT/fftd.log" &
pid=$!   # the pipeline's last process: fftd
sleep 1
kill -0 "$pid" 2>/dev/null || { echo "daemon_memory: fftd did not start:" >&2; cat "$OUT/fftd.log" >&2; exit 1; }

echo "seconds,rss_kib" >"$OUT/rss.csv"
t=0
while kill -0 "$pid" 2>/dev/null && [ "$t" -le "$DURATION" ]; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && echo "$t,$rss" >>"$OUT/rss.csv"
    sleep 10
    t=$((t + 10))
done
# the live view keeps serving after the input ends: stop it as Ctrl-C would
kill -INT "$pid" 2>/dev/null || true
wait || true

python3 - "$OUT" "$WARMUP" "$DURATION" <<'PY'
import csv, os, sys
out, warmup, duration = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rows = [(int(r["seconds"]), int(r["rss_kib"])) for r in csv.DictReader(open(f"{out}/rss.csv"))]
after = [r for r in rows if warmup <= r[0] < duration]   # the end's teardown is not the run
if len(after) < 2:
    sys.exit("daemon_memory: too few samples after the warm-up (DURATION too short?)")
(t0, r0), (t1, r1) = after[0], after[-1]
peak = max(r for _, r in rows)
low, high = min(r for _, r in after), max(r for _, r in after)
files = len(os.listdir(f"{out}/spectra"))
recs = len([f for f in os.listdir(f"{out}/rec") if f.endswith(".wav")])
events = sum(1 for _ in open(f"{out}/events.ndjson"))
print(f"daemon_memory: {duration:.0f} s paced run, {files} rotated files, {events} events, {recs} recordings")
print(f"daemon_memory: RSS {r0} KiB at {t0} s, {r1} KiB at {t1} s, peak {peak} KiB; "
      f"growth after warm-up {r1 - r0:+d} KiB ({(r1 - r0) / max(t1 - t0, 1) * 3600:+.0f} KiB/h); "
      f"range after warm-up {low}-{high} KiB")
print(f"daemon_memory: samples in {out}/rss.csv")
PY
