#!/usr/bin/env python3
"""What `--stats` and `--trace` cost (docs/perf.md): runs a baseline fftd and this build without
flags, with `--stats`, `--trace` and both, interleaved in rotating order (one warm-up round not
counted), and prints a markdown row per variant: median wall and CPU time (user + system of all
the process's threads, from wait4), ranges, and the change against this build without flags.

    python3 scripts/stats_trace_ab.py BASE_FFTD THIS_FFTD INPUT.f32 ROUNDS [more fftd flags]
"""
import os, statistics, subprocess, sys, tempfile, time
base, br, inp = sys.argv[1], sys.argv[2], sys.argv[3]
rounds, extra = int(sys.argv[4]), sys.argv[5:]
trace = os.path.join(tempfile.mkdtemp(), "t.json")
common = ["--file", inp, "--input-format", "f32", "--rate", "48000", "--frame", "1024", "--hop", "512",
          "--format", "f32", "--quiet", "--output", "/dev/null"] + extra
variants = [
    ("baseline, no flags", base, []),
    ("branch, no flags", br, []),
    ("branch, --stats", br, ["--stats"]),
    ("branch, --trace", br, ["--trace", trace]),
    ("branch, --stats --trace", br, ["--stats", "--trace", trace]),
]
times = {v[0]: [] for v in variants}
cpu = {v[0]: [] for v in variants}
for r in range(rounds + 1):
    order = variants[r % len(variants):] + variants[:r % len(variants)]
    for name, exe, flags in order:
        t = time.perf_counter()
        p = subprocess.Popen([exe] + common + flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        dt = time.perf_counter() - t
        cpu[name].append(ru.ru_utime + ru.ru_stime) if r > 0 else None
        assert p.returncode == 0, (name, p.returncode)
        if r > 0:  # round 0 warms caches
            times[name].append(dt)
ref = statistics.median(times["branch, no flags"])
cref = statistics.median(cpu["branch, no flags"])
for name, _, _ in variants:
    v = times[name]; m = statistics.median(v)
    c = cpu[name]; cm = statistics.median(c)
    print(f"| {name} | {m*1e3:.0f} ms | {min(v)*1e3:.0f}–{max(v)*1e3:.0f} ms | {100*(m/ref-1):+.1f}% | {cm*1e3:.0f} ms | {min(c)*1e3:.0f}–{max(c)*1e3:.0f} ms | {100*(cm/cref-1):+.1f}% |")
