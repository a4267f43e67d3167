#!/usr/bin/env python3
"""Fleet throughput on this machine: one local nats-server (JetStream, file store on loopback),
`fftd publish` and 3 workers, and one local run publishing its rows itself (`--output nats://`),
against a local `fftd --file` of the same recording written to a file.

Reports the local run's rows/s and samples/s, the fleet's aggregate (from the publisher's start
until the spectra stream holds every row, read from the server's monitoring endpoint /jsz), and
the ratio. Needs nats-server (scripts/deps.sh --test) and a release build.

    python3 bench/fleet.py [--samples 8000000] [--frame 1024] [--hop 512] [--workers 3] [--runs 3]
                           [--worker-device cpu] [--nats-server nats-server] [--memory] [--warmup 0.5]

FFTD names the fftd binary (default target/release/fftd).
"""
import argparse, contextlib, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

FFTD = os.environ.get("FFTD", os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "fftd"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stream_messages(mport, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/jsz?streams=true", timeout=5) as r:
        jsz = json.load(r)
    for account in jsz.get("account_details", []):
        for stream in account.get("stream_detail", []):
            if stream["name"] == name:
                return stream["state"]["messages"]
    return 0


def frames_of(samples, n, hop):
    return 1 if samples <= n else -(-(samples - n) // hop) + 1


@contextlib.contextmanager
def nats_server(args):
    """A nats-server with JetStream on free loopback ports and the fleet's streams set up; yields
    (its address, its monitoring port)."""
    tmp = tempfile.mkdtemp(prefix="fftd-fleet-bench-")
    port, mport = free_port(), free_port()
    server = subprocess.Popen([args.nats_server, "-js", "-a", "127.0.0.1", "-p", str(port), "-m", str(mport),
                               "-sd", os.path.join(tmp, "store")], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        url = f"nats://127.0.0.1:{port}"
        setup = [FFTD, "fleet", "setup", "--server", url] + (["--memory"] if args.memory else [])
        subprocess.run(setup, check=True, stdout=subprocess.DEVNULL)
        yield url, mport
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def fleet_run(args, path, rows):
    with nats_server(args) as (url, mport):
        framing = ["--frame", str(args.frame), "--hop", str(args.hop)]
        workers = [subprocess.Popen([FFTD, "--file", f"{url}/FRAMES/workers", "--output", f"{url}/spectra.bench",
                                     "--device", args.worker_device, "--format", "f32", *framing])
                   for _ in range(args.workers)]
        time.sleep(args.warmup)  # connected and fetching (a GPU worker also builds its programs)
        started = time.perf_counter()
        subprocess.run([FFTD, "publish", "--file", path, "--rate", "48000", "--to", f"{url}/frames.bench", *framing],
                       check=True)
        published = time.perf_counter() - started
        while stream_messages(mport, "SPECTRA") < rows:
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        for w in workers:
            w.send_signal(signal.SIGINT)
        for w in workers:
            w.wait(timeout=30)
        return elapsed, published


def direct_run(args, path, rows):
    """One local run publishing its rows itself (--output nats://): it exits once every row is
    acknowledged, and the stream is checked to hold them all."""
    with nats_server(args) as (url, mport):
        started = time.perf_counter()
        subprocess.run([FFTD, "--file", path, "--rate", "48000", "--frame", str(args.frame), "--hop", str(args.hop),
                        "--device", "cpu", "--format", "f32", "--output", f"{url}/spectra.bench", "--quiet"],
                       check=True)
        elapsed = time.perf_counter() - started
        stored = stream_messages(mport, "SPECTRA")
        if stored != rows:
            sys.exit(f"--output nats:// stored {stored} rows, expected {rows}")
        return elapsed


def local_run(args, path):
    out = tempfile.NamedTemporaryFile(suffix=".f32", delete=False).name
    started = time.perf_counter()
    subprocess.run([FFTD, "--file", path, "--rate", "48000", "--frame", str(args.frame), "--hop", str(args.hop),
                    "--device", "cpu", "--format", "f32", "--output", out, "--quiet"], check=True)
    elapsed = time.perf_counter() - started
    os.unlink(out)
    return elapsed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=8_000_000)
    p.add_argument("--frame", type=int, default=1024)
    p.add_argument("--hop", type=int, default=512)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--worker-device", default="cpu", help="each worker's --device (cpu, gpu, opencl:P:D)")
    p.add_argument("--nats-server", default="nats-server", help="the nats-server binary")
    p.add_argument("--memory", action="store_true", help="streams in memory instead of files")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds the workers get to start")
    args = p.parse_args()
    path = os.path.join(tempfile.gettempdir(), f"fftd-fleet-bench-{args.samples}.f32")
    if not os.path.exists(path):
        try:
            import numpy
            numpy.random.default_rng(1).uniform(-1, 1, args.samples).astype("<f4").tofile(path)
        except ImportError:
            import array, random
            rnd = random.Random(1)
            array.array("f", (rnd.uniform(-1, 1) for _ in range(args.samples))).tofile(open(path, "wb"))
    rows = frames_of(args.samples, args.frame, args.hop)
    local = statistics.median(local_run(args, path) for _ in range(args.runs))
    fleet = [fleet_run(args, path, rows) for _ in range(args.runs)]
    direct = statistics.median(direct_run(args, path, rows) for _ in range(args.runs))
    fleet_s = statistics.median(f[0] for f in fleet)
    publish_s = statistics.median(f[1] for f in fleet)
    print(f"input: {args.samples} f32 samples, frame {args.frame} hop {args.hop}: {rows} rows of {args.frame // 2 + 1} bins")
    print(f"local fftd --file:        {local:7.3f} s  {rows / local:10.0f} rows/s  {args.samples / local / 1e6:7.2f} Msamples/s")
    store = "memory" if args.memory else "file"
    print(f"fleet ({args.workers} workers --device {args.worker_device}, 1 server, {store} store): {fleet_s:7.3f} s  {rows / fleet_s:10.0f} rows/s  "
          f"{args.samples / fleet_s / 1e6:7.2f} Msamples/s  (publish alone {publish_s:.3f} s)")
    print(f"local fftd --output nats://: {direct:7.3f} s  {rows / direct:10.0f} rows/s  {args.samples / direct / 1e6:7.2f} Msamples/s")
    print(f"fleet / local time: {fleet_s / local:.2f}x; --output nats:// / local time: {direct / local:.2f}x "
          f"(median of {args.runs} runs each)")


if __name__ == "__main__":
    sys.exit(main())
