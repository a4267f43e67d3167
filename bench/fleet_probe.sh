#!/usr/bin/env bash
# The fleet's throughput on the 16-core GPU host (issue 28, docs/perf.md): bench/fleet.py on one
# server and on a 3-node loopback cluster (R3), rows batched into messages and one per row, each
# against a local run in the same invocation. That host has no network and no cargo: bring a
# release build and Debian's nats-server as files, from this machine:
#
#   nice cargo build --release && bash bench/fleet_probe.sh --prepare
#
# (a stripped fftd, ~20 MB instead of ~100 MB, the libasound.so.2 it links, and `command -v
# nats-server` — /usr/sbin/nats-server here, Debian's 2.9.10 — copied into target/fleet-probe/,
# 29 MB in all), then on the device machine (the run tool, carry ["target/fleet-probe"]):
#
#   bash bench/fleet_probe.sh
#
# It prints each configuration's lines (rows/s, samples/s, MB/s, ratio to the local run, and
# `fftd publish` alone) and, when $OUT is set, keeps them in $OUT/fleet_probe.txt. About 5
# minutes on 16 cores. The last two lines tell where the samples' way in is bound: a memory store
# (the file store's share), and 4 publishers on 4 connections into the same work stream (the
# server's per-connection ingest). Without the carried nats-server it uses one on PATH, if any.
# SAMPLES=N and RUNS=N override the input size (64 M f32 samples) and runs per line (3).
set -euo pipefail
here=target/fleet-probe
if [[ ${1:-} == --prepare ]]; then
    mkdir -p "$here"
    strip -o "$here/fftd" target/release/fftd
    cp "$(command -v nats-server)" "$here/nats-server"
    # fftd links libasound.so.2 at load time; the GPU host may lack it
    lib=$(ldd target/release/fftd | awk '/libasound.so.2/ {print $3}')
    [[ -n $lib ]] && cp -L "$lib" "$here/libasound.so.2"
    ls -l "$here"
    exit 0
fi
nats=$here/nats-server
[[ -x $nats ]] || nats=target/gpu/nats-server
[[ -x $nats ]] || nats=$(command -v nats-server || true)
export LD_LIBRARY_PATH=$PWD/$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[[ -x $here/fftd && -n $nats ]] || {
    echo "fleet_probe: $here/fftd or a nats-server is missing (run bash bench/fleet_probe.sh --prepare here first)" >&2
    exit 1
}
export FFTD=$here/fftd
samples=${SAMPLES:-64000000}
runs=${RUNS:-3}
out=${OUT:-/tmp}/fleet_probe.txt
: >"$out"
probe() {
    echo "== python3 bench/fleet.py $*" | tee -a "$out"
    python3 bench/fleet.py --nats-server "$nats" "$@" 2>&1 | tee -a "$out"
}
echo "host: $(nproc) cores, $(date -u "+%Y-%m-%d %H:%M UTC"), $($nats --version), $($FFTD --version)" | tee -a "$out"
probe --samples "$samples" --runs "$runs"
probe --samples "$samples" --runs "$runs" --cluster
probe --samples "$samples" --runs "$runs" --frame 4096 --hop 2048 --layouts max
probe --samples "$samples" --runs "$runs" --workers 6 --layouts max
probe --samples "$samples" --runs "$runs" --memory --layouts max
probe --samples "$samples" --runs "$runs" --publishers 4 --layouts max
