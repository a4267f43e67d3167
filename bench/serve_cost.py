#!/usr/bin/env python3
"""What `--serve` with 10 WebSocket clients costs (issue 12's targets), in one command:

1. File job: a big f32 file (frame 4096, f32 spectra into a file next to it) with and without
   `--serve` and 10 clients (each a page-sized view: width 1024), runs alternated, medians of
   --runs. The clients connect while fftd starts (they retry from before it is launched), so they
   are watching for the whole job; each must receive rows. Throughput from fftd's `--stats` line,
   and fftd's CPU time (user + system, from wait4), which is far less noisy than the wall clock on
   a shared host: the cost of the server, the display folds and the sessions, in CPU seconds.
2. Live path: a paced input (`--realtime`, 48 kHz, frame 1024, hop 256: 188 frames/s) for
   --live-seconds, with and without `--serve` + 10 clients; p99 frame-to-sink latency from
   `--stats`. With --mic-conf (an ALSA file-plugin config, see docs/mic.md), the same through
   `--mic` as well.

    python3 bench/serve_cost.py [--fftd target/release/fftd] [--runs 5] [--mib 1024]

Needs numpy and websocket-client (pip install websocket-client)."""
import argparse, os, re, signal, socket, statistics, subprocess, tempfile, threading, time

import numpy as np
import websocket

ap = argparse.ArgumentParser()
ap.add_argument("--fftd", default="target/release/fftd")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--mib", type=int, default=1024, help="file job input size")
ap.add_argument("--dir", default="/dev/shm")
ap.add_argument("--clients", type=int, default=10)
ap.add_argument("--live-seconds", type=float, default=20.0)
ap.add_argument("--mic-conf", help="ALSA config whose default PCM is a file plugin")
ap.add_argument("--device", default="cpu")
a = ap.parse_args()
work = tempfile.mkdtemp(prefix="fftd-serve-", dir=a.dir)
STATS = re.compile(r"\(([\d.e+]+) samples/s over ([\d.]+) s\).*p99 ([\d.]+) ms")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client(threading.Thread):
    """A page-like reader: connects (retrying until fftd listens), counts display rows."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port, self.stop, self.rows, self.bytes = port, stop, 0, 0

    def run(self):
        ws = None
        while ws is None and not self.stop.is_set():
            try:
                ws = websocket.create_connection(
                    f"ws://127.0.0.1:{self.port}/ws?width=1024", timeout=1)
            except OSError:
                time.sleep(0.002)
        while ws is not None and not self.stop.is_set():
            try:
                m = ws.recv()
            except (websocket.WebSocketTimeoutException, TimeoutError):
                continue
            except Exception:
                return
            if isinstance(m, bytes):
                self.rows += 1
                self.bytes += len(m)


def run_fftd(args, serve):
    """Runs fftd (with `--serve` and clients when asked); returns (samples/s, p99 ms, client rows,
    fftd's CPU seconds)."""
    cmd = [a.fftd, *args, "--stats", "--quiet", "--device", a.device]
    stop, clients = threading.Event(), []
    if serve:
        port = free_port()
        cmd += ["--serve", f"127.0.0.1:{port}"]
        clients = [Client(port, stop) for _ in range(a.clients)]
        for c in clients:
            c.start()
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    stats = None
    for line in p.stderr:
        m = STATS.search(line)
        if m:
            stats = m
        if "input finished" in line:
            p.send_signal(signal.SIGINT)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    if p.returncode != 0 or stats is None:
        raise SystemExit(f"fftd failed ({p.returncode}): {' '.join(cmd)}")
    cpu = usage.ru_utime + usage.ru_stime
    rows = [c.rows for c in clients]
    if serve and min(rows) == 0:
        raise SystemExit(f"a client received no rows: {rows}")
    return float(stats.group(1)), float(stats.group(3)), rows, cpu


def compare(name, args, runs, key):
    plain, served, rows, cpu_plain, cpu_served = [], [], [], [], []
    for _ in range(runs):
        r = run_fftd(args, False)
        plain.append(r[key])
        cpu_plain.append(r[3])
        s = run_fftd(args, True)
        served.append(s[key])
        cpu_served.append(s[3])
        rows.append(min(s[2]))
    p, s = statistics.median(plain), statistics.median(served)
    unit = "samples/s" if key == 0 else "ms p99"
    runs_of = lambda values: ", ".join(f"{v:.4g}" for v in values)
    print(f"{name}: without --serve {p:.4g} {unit} (runs {runs_of(plain)})")
    print(f"{name}: with --serve + {a.clients} clients {s:.4g} {unit} (runs {runs_of(served)}); "
          f"fewest rows a client got per run: {rows}")
    cp, cs = statistics.median(cpu_plain), statistics.median(cpu_served)
    print(f"{name}: fftd CPU seconds without {cp:.3f} (runs {runs_of(cpu_plain)}), with "
          f"{cs:.3f} (runs {runs_of(cpu_served)}): {100 * (cs / cp - 1):+.1f} %")
    return p, s


big = os.path.join(work, "x.f32")
np.random.default_rng(0).standard_normal(a.mib << 18, dtype=np.float32).tofile(big)
out = os.path.join(work, "out.f32")
job = ["--file", big, "--frame", "4096", "--format", "f32", "--output", out]
run_fftd(job, False)  # warm-up: page cache
p, s = compare("file job", job, a.runs, 0)
print(f"file job: throughput with --serve = {s / p:.3f} x without (cost {100 * (1 - s / p):.1f} %)")

live_in = os.path.join(work, "live.f32")
np.random.default_rng(1).standard_normal(int(48000 * (a.live_seconds + 1)), dtype=np.float32).tofile(live_in)
live = ["--file", live_in, "--rate", "48000", "--frame", "1024", "--hop", "256", "--realtime",
        "--duration", str(a.live_seconds), "--format", "f32", "--output", os.devnull]
p, s = compare("live (--realtime)", live, max(1, a.runs // 2), 1)
print(f"live (--realtime): p99 latency with --serve {s - p:+.3f} ms")
if a.mic_conf:
    os.environ["ALSA_CONFIG_PATH"] = a.mic_conf
    mic = ["--mic", "--frame", "1024", "--hop", "256", "--duration", str(a.live_seconds),
           "--format", "f32", "--output", os.devnull]
    p, s = compare("live (--mic, ALSA file plugin)", mic, max(1, a.runs // 2), 1)
    print(f"live (--mic): p99 latency with --serve {s - p:+.3f} ms")
os.remove(big)
