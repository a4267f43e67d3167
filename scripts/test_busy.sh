#!/usr/bin/env bash
# The suite as CI and a new contributor meet it, on a busy machine (issue 39): RUNS times in a
# row (default 3), each from a fresh clone of HEAD, the first build included, with two busy
# loops (`yes > /dev/null`) beside it the whole time. Dependencies compiled once are reused
# (CARGO_TARGET_DIR, seeded from this checkout's target/release the first time); fftd itself and
# every test binary are built anew in each run, since a fresh clone's files are all new; the
# tests' scratch folder (CARGO_TARGET_TMPDIR: PoCL's compiled kernels among others) starts empty.
# Prints each run's wall time and summary line; exits 1 if any run failed.
# Usage: scripts/test_busy.sh [RUNS]    (docs/testing.md)
set -euo pipefail
runs=${1:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
work=${BUSY_DIR:-/tmp/fftd-busy}
export CARGO_TARGET_DIR="$work/target"
if [[ ! -d "$CARGO_TARGET_DIR/release" && -d "$here/target/release" ]]; then
    mkdir -p "$CARGO_TARGET_DIR"
    cp -a "$here/target/release" "$CARGO_TARGET_DIR/"
fi
yes > /dev/null &
busy1=$!
yes > /dev/null &
busy2=$!
trap 'kill $busy1 $busy2 2>/dev/null' EXIT
failed=0
for i in $(seq "$runs"); do
    # as on CI's fresh machine: no kernels compiled, nothing a test left in its scratch folder
    rm -rf "$work/clone" "$CARGO_TARGET_DIR/tmp"
    git clone -q "$here" "$work/clone"
    start=$SECONDS
    if (cd "$work/clone" && ./scripts/test.sh > "$work/run$i.log" 2>&1); then
        verdict=passed
    else
        verdict=FAILED
        failed=1
    fi
    echo "run $i: $verdict in $((SECONDS - start)) s: $(tail -1 "$work/run$i.log")"
    cp "$work/clone/target/test-times.txt" "$work/run$i-times.txt" 2>/dev/null || true
done
exit $failed
