#!/usr/bin/env bash
# The whole test suite, as CI runs it: system packages, formatting, lints, then every test
# (unit, numerics vs a naive DFT, end-to-end CLI, OpenCL on PoCL, microphone through ALSA).
# Every test binary runs whatever fails before it (`--no-fail-fast`); the last line is the
# summary `N passed, N failed` over all of them, and the exit status is non-zero when a test
# failed or a binary ended without its result. Each stage's time and each test binary's go to
# target/test-times.txt (docs/testing.md says where the time goes and how to check the suite
# on a busy machine).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test

export POCL_CACHE_DIR="$PWD/target/pocl-cache"     # PoCL compiles each kernel once
export FFTD_CACHE_DIR="$PWD/target/fftd-cache"     # OpenCL calibration cache for tests
mkdir -p "$POCL_CACHE_DIR" "$FFTD_CACHE_DIR"
if [[ "${CI:-}" == "true" ]]; then
    export FFTD_REQUIRE_NUMPY=1                     # a missing numpy fails CI instead of skipping
fi

times=target/test-times.txt
log=target/test-log.txt
: > "$times"
# stage NAME CMD...: runs CMD, adds its wall time to $times
stage() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "stage $name $((SECONDS - start)) s" >> "$times"
}

stage fmt cargo fmt --check
stage clippy cargo clippy --release --all-targets --quiet -- -D warnings
# the build on its own, so its time is apart from the tests' (the run below builds nothing more)
stage build cargo test --release --no-run --quiet

start=$SECONDS
set +e
cargo test --release --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
echo "stage tests $((SECONDS - start)) s" >> "$times"
exec python3 scripts/test_summary.py "$log" "$status" "$times"
