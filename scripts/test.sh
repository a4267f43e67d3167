#!/usr/bin/env bash
# The whole test suite, as CI runs it: system packages, formatting, lints, then every test
# (unit, numerics vs a naive DFT, end-to-end CLI, OpenCL on PoCL, microphone through ALSA).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test

export POCL_CACHE_DIR="$PWD/target/pocl-cache"     # PoCL compiles each kernel once
export FFTD_CACHE_DIR="$PWD/target/fftd-cache"     # OpenCL calibration cache for tests
mkdir -p "$POCL_CACHE_DIR" "$FFTD_CACHE_DIR"
if [[ "${CI:-}" == "true" ]]; then
    export FFTD_REQUIRE_NUMPY=1                     # a missing numpy fails CI instead of skipping
fi

cargo fmt --check
cargo clippy --release --all-targets --quiet -- -D warnings
cargo test --release
