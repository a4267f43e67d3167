#!/usr/bin/env bash
# The fleet's throughput on the 16-core GPU host (issue 28, docs/perf.md): bench/fleet.py on one
# server and on a 3-node loopback cluster (R3), rows batched into messages and one per row, each
# against a local run in the same invocation. That host has no network and no cargo: bring a
# release build and Debian's nats-server as files, from this machine:
#
#   nice cargo build --release
#   mkdir -p target/fleet-probe
#   strip -o target/fleet-probe/fftd target/release/fftd          # ~20 MB instead of ~100 MB
#   cp "$(command -v nats-server)" target/fleet-probe/nats-server
#
# then on the device machine (the run tool, carry ["target/fleet-probe"]):
#
#   bash bench/fleet_probe.sh
#
# It prints each configuration's lines (rows/s, samples/s, MB/s, ratio to the local run) and,
# when $OUT is set, keeps them in $OUT/fleet_probe.txt. About 4 minutes on 16 cores.
set -euo pipefail
here=target/fleet-probe
[[ -x $here/fftd && -x $here/nats-server ]] || {
    echo "fleet_probe: $here/fftd and $here/nats-server are missing (see the top of this script)" >&2
    exit 1
}
export FFTD=$here/fftd
out=${OUT:-/tmp}/fleet_probe.txt
: >"$out"
probe() {
    echo "== python3 bench/fleet.py $*" | tee -a "$out"
    python3 bench/fleet.py --nats-server "$here/nats-server" "$@" 2>&1 | tee -a "$out"
}
echo "host: $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), $($here/nats-server --version)" | tee -a "$out"
probe --samples 64000000 --runs 3
probe --samples 64000000 --runs 3 --cluster
probe --samples 64000000 --runs 3 --frame 4096 --hop 2048 --layouts max
probe --samples 64000000 --runs 3 --workers 6 --layouts max
