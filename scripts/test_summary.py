#!/usr/bin/env python3
"""The suite's summary (scripts/test.sh): reads the log of `cargo test --no-fail-fast`, adds each
test binary's time to the times file, names every failed test and every binary that ended
without a result (a crash, a signal), and ends with one line `N passed, N failed`.

Usage: test_summary.py LOG CARGO_STATUS TIMES_FILE [CHECKS_FILE]; CHECKS_FILE holds one line per
failed check (fmt, clippy), each counted as a failure. Exits 0 only when nothing failed and cargo
itself succeeded."""
import re
import sys

RUNNING = re.compile(r"^\s+(?:Running|Doc-tests)\s+(\S+)")
RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored;.*finished in ([\d.]+)s"
)
FAILED_TEST = re.compile(r"^test (\S+) \.\.\. FAILED")
# a failed test's captured output: "---- NAME stdout ----", then its panic's place and message
OUTPUT_OF = re.compile(r"^---- (\S+) stdout ----")
PANIC = re.compile(r"^thread '[^']*' \(?\d*\)? ?panicked at (\S+):$")
# how much of a failure's message the summary shows (CI shows the end of the output)
SHOWN = 300


def main() -> int:
    log_path, cargo_status, times_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    passed = failed = ignored = 0
    binaries = []  # (name, seconds or None)
    failures = []
    reasons = {}  # test name: where it panicked and the first line of the message
    current = output_of = None
    with open(log_path, encoding="utf-8", errors="replace") as log:
        for line in log:
            if m := RUNNING.match(line):
                if current is not None:
                    binaries.append((current, None))
                current = m.group(1)
            elif m := RESULT.match(line):
                passed += int(m.group(1))
                failed += int(m.group(2))
                ignored += int(m.group(3))
                binaries.append((current or "?", float(m.group(4))))
                current = None
            elif m := FAILED_TEST.match(line):
                failures.append(f"{current}: {m.group(1)}")
            elif m := OUTPUT_OF.match(line):
                output_of = m.group(1)
            elif output_of and (m := PANIC.match(line)):
                message = next(log, "").strip()
                reasons.setdefault(output_of, f"at {m.group(1)}: {message}"[:SHOWN])
    if current is not None:
        binaries.append((current, None))
    no_result = [name for name, secs in binaries if secs is None]
    with open(times_path, "a", encoding="utf-8") as times:
        for name, secs in sorted(binaries, key=lambda b: -(b[1] or 0.0)):
            shown = "no result" if secs is None else f"{secs:.1f} s"
            times.write(f"binary {name} {shown}\n")
    for failure in failures:
        reason = reasons.get(failure.rsplit(": ", 1)[-1])
        print(f"FAILED {failure}" + (f" ({reason})" if reason else ""))
    for name in no_result:
        print(f"FAILED {name}: the binary ended without a result (crash or signal; see the log)")
    failed += len(no_result)
    checks = read_checks(sys.argv[4]) if len(sys.argv) > 4 else []
    for check in checks:
        print(check)
    failed += len(checks)
    if cargo_status != 0 and failed == 0:
        print(f"cargo test exited with {cargo_status} though no test failed (see the log)")
        failed = 1
    print(f"({ignored} ignored; {len(binaries)} test binaries; times in {times_path})")
    print(stage_times(times_path))
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def read_checks(checks_path: str) -> list:
    """The failed checks' lines (`FAILED NAME: ...`), one per check."""
    with open(checks_path, encoding="utf-8", errors="replace") as checks:
        return [line.rstrip("\n") for line in checks if line.strip()]


def stage_times(times_path: str) -> str:
    """One line of the stages' wall times from the times file (`stage NAME N s` lines)."""
    with open(times_path, encoding="utf-8") as times:
        stages = [line.split()[1:3] for line in times if line.startswith("stage ")]
    return "stages: " + ", ".join(f"{name} {secs} s" for name, secs in stages)


if __name__ == "__main__":
    sys.exit(main())
