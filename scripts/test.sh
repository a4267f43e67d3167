#!/usr/bin/env bash
# The whole test suite, as CI runs it: system packages, formatting, lints, then every test
# (unit, numerics vs a naive DFT, end-to-end CLI, OpenCL on PoCL, microphone through ALSA).
# Every test binary runs whatever fails before it (`--no-fail-fast`), and a formatting or lint
# failure stops no test: the last line is the summary `N passed, N failed` over all of them (a
# failed check counts as one failure), and the exit status is non-zero when a test or a check
# failed or a binary ended without its result. Each stage's time and each test binary's go to
# target/test-times.txt (docs/testing.md says where the time goes and how to check the suite
# on a busy machine).
set -euo pipefail
cd "$(dirname "$0")/.."
deps_start=$SECONDS
scripts/deps.sh --test
deps_seconds=$((SECONDS - deps_start))

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
echo "stage deps $deps_seconds s" > "$times"
# build_tests LIST: builds every test binary (as `cargo test --release` would) and writes one line
# per binary to LIST: its source, then its path
build_tests() {
    # no line tables in the test build (the same code as the release build, which keeps them
    # for profiling): a cold build took 437 s against 472 s with the dependencies' line tables,
    # and half the disk (session 28); the dependencies are built once more beside the release
    # build's
    cargo test --release --no-run --quiet --message-format=json-render-diagnostics \
        --config 'profile.release.debug=0' |
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

# run_binary EXE NAME LOG [ARGS...]: one test binary (or a part of one, by test filters in ARGS)
# into LOG, headed as cargo heads it; prints its result line and exits with the binary's status.
run_binary() {
    local exe=$1 name=$2 out=$3 status=0
    shift 3
    echo "     Running $name ($exe)" > "$out"
    "$exe" "$@" >> "$out" 2>&1 || status=$?
    echo "$name: $(grep '^test result' "$out" | tail -n 1)"
    return $status
}

# opencl_parts LIST: the OpenCL engine's tests in three processes at once, one log each
# (target/test-log-opencl-*.txt). PoCL compiles one kernel at a time in a process (a lock around
# LLVM), and compiling kernels is most of these tests' time: one process used one core.
opencl_parts() {
    local exe part name status=0
    local -a filters pids
    exe=$(awk '$1 ~ /\/tests\/opencl_engine\.rs$/ { print $2 }' "$1")
    # the two longest files alone, then every other file of the binary (--skip: a new file of
    # tests cannot fall between the parts)
    for part in opencl_conformance opencl_twolevel rest; do
        case $part in
            rest) filters=(--skip opencl_conformance:: --skip opencl_twolevel::) ;;
            *) filters=("$part::") ;;
        esac
        name="tests/opencl_engine.rs:$part"
        run_binary "$exe" "$name" "target/test-log-opencl-$part.txt" "${filters[@]}" &
        pids+=($!)
    done
    for part in "${pids[@]}"; do wait "$part" || status=1; done
    return $status
}

# the_rest LIST: every other test binary, `suite` first (the longest), one after another, into
# target/test-log-rest-*.txt. `suite` runs four tests at a time: most of its time is waiting on
# processes (servers, browsers, paced input), not CPU.
the_rest() {
    local src exe name status=0 i=0
    local -a threads
    while read -r src exe; do
        name=${src#"$PWD"/}
        [[ $name == tests/opencl_engine.rs ]] && continue
        threads=()
        [[ $name == tests/suite.rs ]] && threads=(--test-threads 4)
        i=$((i + 1))
        run_binary "$exe" "$name" "target/test-log-rest-$i.txt" "${threads[@]}" || status=1
    done < <(grep '/tests/suite\.rs ' "$1"; grep -v '/tests/suite\.rs ' "$1")
    return $status
}

# stage NAME CMD...: runs CMD, adds its wall time to $times
stage() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "stage $name $((SECONDS - start)) s" >> "$times"
}

# check NAME CMD...: runs CMD into target/test-log-NAME.txt, adds its wall time to $times and,
# when it fails, one line naming it to $checks: a failed check does not stop the tests, and the
# summary counts it as a failure
checks=target/test-checks.txt
: > "$checks"
check() {
    local name=$1 start=$SECONDS out="target/test-log-$1.txt"
    shift
    if ! "$@" > "$out" 2>&1; then
        local first
        first=$(grep -m 1 -E '^(error|warning|Diff in)' "$out" || tail -n 1 "$out")
        echo "FAILED $name: ${first:0:300} (see $out)" >> "$checks"
    fi
    echo "stage $name $((SECONDS - start)) s" >> "$times"
}

check fmt cargo fmt --check
# (before the build: beside the tests it only took their cores, session 27)
check clippy cargo clippy --release --all-targets --quiet -- -D warnings
# the build on its own, so its time is apart from the tests'; it lists the test binaries it made
built=target/test-binaries.txt
stage build build_tests "$built"

# The OpenCL engine's tests (CPU work: PoCL compiling kernels) beside the rest (mostly waiting on
# processes: servers, browsers, paced input), so together they take little more than the longer
# one. Each binary's log is written whole; the summary reads them all.
start=$SECONDS
rm -f target/test-log-opencl-*.txt target/test-log-rest-*.txt
set +e
opencl_parts "$built" &
opencl=$!
the_rest "$built"
rest_status=$?
wait "$opencl"
opencl_status=$?
set -e
cat target/test-log-rest-*.txt target/test-log-opencl-*.txt > "$log"
echo "stage tests $((SECONDS - start)) s" >> "$times"
exec python3 scripts/test_summary.py "$log" "$((rest_status | opencl_status))" "$times" "$checks"
