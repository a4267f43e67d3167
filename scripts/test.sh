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
# PoCL without LLVM's optimisations: compiling kernels is most of the OpenCL tests' time (85 % of
# their CPU in a profile), running them under 2 %; -O0 builds them in about 0.8x the time. The
# kernels' results are checked the same way; speed is measured on real devices (docs/perf.md).
export POCL_EXTRA_BUILD_FLAGS="-cl-opt-disable"
mkdir -p "$POCL_CACHE_DIR" "$FFTD_CACHE_DIR"
if [[ "${CI:-}" == "true" ]]; then
    export FFTD_REQUIRE_NUMPY=1                     # a missing numpy fails CI instead of skipping
fi

times=target/test-times.txt
log=target/test-log.txt
: > "$times"
# build_tests LIST: builds every test binary (as `cargo test --release` would) and writes one line
# per binary to LIST: its source, then its path
build_tests() {
    cargo test --release --no-run --quiet --message-format=json-render-diagnostics |
        python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["src_path"], m["executable"])
' > "$1"
}

# run_group LIST GROUP LOG: runs the test binaries of GROUP (opencl: tests/opencl_engine.rs;
# rest: every other) one after another into LOG, each headed as cargo heads it, and prints each
# one's result line; exits non-zero when one failed. `suite` runs three tests at a time: most of
# its time is waiting on processes, not CPU.
run_group() {
    local list=$1 group=$2 out=$3 status=0 src exe name mine
    local -a threads
    : > "$out"
    while read -r src exe; do
        name=${src#"$PWD"/}
        mine=rest
        [[ $name == tests/opencl_engine.rs ]] && mine=opencl
        [[ $mine == "$group" ]] || continue
        threads=()
        [[ $name == tests/suite.rs ]] && threads=(--test-threads 3)
        echo "     Running $name ($exe)" >> "$out"
        "$exe" "${threads[@]}" >> "$out" 2>&1 || status=1
        echo "$name: $(grep '^test result' "$out" | tail -n 1)"
    done < "$list"
    return $status
}

# stage NAME CMD...: runs CMD, adds its wall time to $times
stage() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "stage $name $((SECONDS - start)) s" >> "$times"
}

stage fmt cargo fmt --check
stage clippy cargo clippy --release --all-targets --quiet -- -D warnings
# the build on its own, so its time is apart from the tests'; it lists the test binaries it made
built=target/test-binaries.txt
stage build build_tests "$built"

# Two groups at once: the OpenCL engine's tests are CPU work (PoCL compiling kernels), the rest
# mostly wait on processes (servers, browsers, paced input), so side by side they take little
# more than the longer one. Each group's log is written whole; the summary reads both.
start=$SECONDS
set +e
run_group "$built" opencl target/test-log-opencl.txt &
opencl=$!
run_group "$built" rest target/test-log-rest.txt
rest_status=$?
wait "$opencl"
opencl_status=$?
set -e
cat target/test-log-rest.txt target/test-log-opencl.txt > "$log"
echo "stage tests $((SECONDS - start)) s" >> "$times"
exec python3 scripts/test_summary.py "$log" "$((rest_status | opencl_status))" "$times"
