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
# `fftd publish` alone) and, when $OUT is set, keeps them in $OUT/fleet_probe.txt. About 6
# minutes on 16 cores with RUNS=2. The first lines compare the work stream as one stream
# (--shards 1, fftd before shards) with 4 and 8 shards (issue 28: one stream's file store bound
# the fleet at ~350 MB/s); then 4 publishers, a memory store, one row a message, a 3-node
# cluster and larger frames. Without the carried nats-server it uses one on PATH, if any.
# SAMPLES=N and RUNS=N override the input size (64 M f32 samples) and runs per line (3).
#
#   bash bench/fleet_probe.sh --publisher
#
# runs only the lines of issue 28's third pass (the publisher's connections, a minute or two):
# 4 shards on one publishing connection (as before) and on one per shard (the default), 8
# shards, 8 shards with 6 workers, and 8 shards in memory (the file store's share).
set -euo pipefail
here=target/fleet-probe
mode=all
[[ ${1:-} == --publisher ]] && mode=publisher
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
[[ $mode == publisher ]] && runs=${RUNS:-2}
out=${OUT:-/tmp}/fleet_probe.txt
: >"$out"
probe() {
    echo "== python3 bench/fleet.py $*" | tee -a "$out"
    python3 bench/fleet.py --nats-server "$nats" "$@" 2>&1 | tee -a "$out"
}
echo "host: $(nproc) cores, $(date -u "+%Y-%m-%d %H:%M UTC"), $($nats --version), $($FFTD --version)" | tee -a "$out"
if [[ $mode == publisher ]]; then
    # before (every shard on one connection, as fftd publish was) and after (one per shard)
    probe --samples "$samples" --runs "$runs" --layouts max --shards 4 --connections 1
    probe --samples "$samples" --runs "$runs" --layouts max --shards 4
    probe --samples "$samples" --runs "$runs" --layouts max --shards 8
    probe --samples "$samples" --runs "$runs" --layouts max --shards 8 --workers 6
    probe --samples "$samples" --runs "$runs" --layouts max --shards 8 --memory
    exit 0
fi
# issue 28's work shards: one stream (as before shards), then fleet setup's default (4) and 8,
# each line its own servers; the same with 6 workers (more consumers of the shards)
probe --samples "$samples" --runs "$runs" --layouts max --shards 1
probe --samples "$samples" --runs "$runs" --layouts max
probe --samples "$samples" --runs "$runs" --layouts max --shards 8
probe --samples "$samples" --runs "$runs" --layouts max --workers 6 --shards 8
probe --samples "$samples" --runs "$runs" --layouts max --publishers 4
probe --samples "$samples" --runs "$runs" --layouts max --memory
probe --samples "$samples" --runs "$runs" --layouts 1
probe --samples "$samples" --runs "$runs" --cluster --layouts max
probe --samples "$samples" --runs "$runs" --frame 4096 --hop 2048 --layouts max
