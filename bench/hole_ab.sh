#!/usr/bin/env bash
# Issue 41's hand-over, before/after on one machine: three jobs (plain, hop512, logmel) on a
# GiB-sized f32 file in /dev/shm, `--device gpu` with fftd OLD and NEW alternating, and the CPU
# route of NEW, f32 spectra to /dev/null, start-up included; CORES from taskset (default all).
# bench/lanes_ab.sh with these builds and jobs: one line per run (with its --stats figures),
# then the medians.
# Usage: OLD=path NEW=path [GIB=4] [RUNS=3] [CORES=16] bench/hole_ab.sh
set -euo pipefail
BUILDS="new=${NEW:?NEW=path} old=${OLD:?OLD=path}" DEVICES=gpu JOBS="plain hop512 logmel" \
    exec bash "$(dirname "$0")/lanes_ab.sh"
