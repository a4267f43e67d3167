#!/usr/bin/env bash
# The fleet's throughput on the 16-core GPU host (issue 28, docs/perf.md): bench/fleet.py on one
# server and on a 3-node loopback cluster (R3), rows batched into messages and one per row, each
# against a local run in the same invocation. That host has no network and no cargo: bring a
# release build and Debian's nats-server as files, from this machine:
#
#   nice cargo build --release && bash bench/fleet_probe.sh --prepare
#
# (a stripped fftd, ~20 MB instead of ~100 MB, and `command -v nats-server`, copied into
# target/fleet-probe/), then on the device machine (the run tool, carry ["target/fleet-probe"]):
#
#   bash bench/fleet_probe.sh
#
# It prints each configuration's lines (rows/s, samples/s, MB/s, ratio to the local run, and
# `fftd publish` alone) and, when $OUT is set, keeps them in $OUT/fleet_probe.txt. About 4
# minutes on 16 cores. Without the carried nats-server it uses one on PATH, if any.
set -euo pipefail
here=target/fleet-probe
if [[ ${1:-} == --prepare ]]; then
    mkdir -p "$here"
    strip -o "$here/fftd" target/release/fftd
    cp "$(command -v nats-server)" "$here/nats-server"
    ls -l "$here"
    exit 0
fi
nats=$here/nats-server
[[ -x $nats ]] || nats=$(command -v nats-server || true)
[[ -x $here/fftd && -n $nats ]] || {
    echo "fleet_probe: $here/fftd or a nats-server is missing (run bash bench/fleet_probe.sh --prepare here first)" >&2
    exit 1
}
export FFTD=$here/fftd
out=${OUT:-/tmp}/fleet_probe.txt
: >"$out"
probe() {
    echo "== python3 bench/fleet.py $*" | tee -a "$out"
    python3 bench/fleet.py --nats-server "$nats" "$@" 2>&1 | tee -a "$out"
}
echo "host: $(nproc) cores, $(date -u "+%Y-%m-%d %H:%M UTC"), $($nats --version), $($FFTD --version)" | tee -a "$out"
probe --samples 64000000 --runs 3
probe --samples 64000000 --runs 3 --cluster
probe --samples 64000000 --runs 3 --frame 4096 --hop 2048 --layouts max
probe --samples 64000000 --runs 3 --workers 6 --layouts max
probe --samples 64000000 --runs 3 --memory --layouts max
