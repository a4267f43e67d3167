#!/usr/bin/env python3
"""Fleet throughput on this machine: nats-server (JetStream, file store on loopback; one server,
or with --cluster a 3-node cluster with R3 streams), `fftd publish` and 3 workers, and one local
run publishing its rows itself (`--output nats://`), each with rows batched into messages
(`--rows-per-message max`, the default) and with one message per row (`--rows-per-message 1`),
against a local `fftd --file` of the same recording written to a file.

Reports rows/s, samples/s and MB/s (of f32 rows: rows x bins x 4 bytes) for each, from the
publisher's start until the spectra stream holds every message, read from the server's
monitoring endpoint /jsz, and the ratio of each time to the local run's; for the fleet also how
long `fftd publish` took, the CPU time it used and the CPU time the server(s) used meanwhile
(where the samples' way into the broker spends its time). --shards N sets up the work stream
over N streams (fftd fleet setup --shards; 1 is the single stream of fftd before shards);
--connections N is `fftd publish --connections N` (1: every shard on one connection, as fftd
publish before issue 28's third pass; default one per shard). Needs nats-server
(scripts/deps.sh --test) and a release build.

    python3 bench/fleet.py [--samples 8000000] [--frame 1024] [--hop 512] [--workers 3] [--runs 3]
                           [--worker-device cpu] [--nats-server nats-server] [--memory] [--warmup 0.5]
                           [--cluster] [--layouts max,1] [--publishers 1] [--shards N] [--connections N]

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


def cpu_seconds(pid):
    """User + system CPU seconds of a running process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def frames_of(samples, n, hop):
    return 1 if samples <= n else -(-(samples - n) // hop) + 1


def wait_listening(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nats-server did not listen on {port}")


def expected_messages(args, rows, layout):
    """Messages the spectra stream holds once every row is stored: one per row, or each block's
    rows split greedily into messages of at most the payload budget (fftd's rules for a server's
    default max_payload of 1 MiB, less 4 KiB for headers)."""
    if layout == "1":
        return rows
    budget = (1 << 20) - 4096
    fit = (min(budget, 1 << 20) // 4 - args.frame) // args.hop + 1  # fftd publish's blocks:
    block = 1 << (min(fit, 65536, (1 << 26) // args.frame).bit_length() - 1)  # a power of two
    per_message = max(1, budget // ((args.frame // 2 + 1) * 4 + 20))
    if layout != "max":
        per_message = min(per_message, int(layout))
    full, last = divmod(rows, block)
    return full * -(-block // per_message) + -(-last // per_message)


@contextlib.contextmanager
def nats_server(args):
    """nats-server(s) with JetStream on free loopback ports and the fleet's streams set up;
    yields (each node's address, the first node's monitoring port)."""
    tmp = tempfile.mkdtemp(prefix="fftd-fleet-bench-")
    nodes = 3 if args.cluster else 1
    ports, mport = [free_port() for _ in range(nodes)], free_port()
    cports = [free_port() for _ in range(nodes)]
    routes = ",".join(f"nats://127.0.0.1:{p}" for p in cports)
    servers = []
    try:
        for i in range(nodes):
            cmd = [args.nats_server, "-js", "-a", "127.0.0.1", "-p", str(ports[i]),
                   "-sd", os.path.join(tmp, f"store{i}")]
            if i == 0:
                cmd += ["-m", str(mport)]
            if args.cluster:
                cmd += ["-n", f"node{i}", "-cluster", f"nats://127.0.0.1:{cports[i]}", "-cluster_name", "bench",
                        "-routes", routes]
            servers.append(subprocess.Popen(cmd, stderr=subprocess.DEVNULL))
        for p in ports:
            wait_listening(p)
        urls = [f"nats://127.0.0.1:{p}" for p in ports]
        setup = [FFTD, "fleet", "setup", "--server", "nats://" + ",".join(f"127.0.0.1:{p}" for p in ports)]
        setup += ["--memory"] if args.memory else []
        setup += ["--replicas", "3"] if args.cluster else []
        setup += ["--shards", str(args.shards)] if args.shards else []
        for attempt in range(60):  # a cluster first elects its JetStream meta leader
            if subprocess.run(setup, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.5)
        else:
            subprocess.run(setup, check=True)
        yield urls, mport, servers
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def split_input(args, path):
    """The input, or with --publishers K > 1 its K consecutive parts (files made once)."""
    k = args.publishers
    if k <= 1:
        return [path]
    size = args.samples // k
    parts = [f"{path[:-len('.f32')]}-part{i}of{k}.f32" for i in range(k)]
    for i, part in enumerate(parts):
        if not os.path.exists(part):
            with open(path, "rb") as src, open(part, "wb") as dst:
                src.seek(i * size * 4)
                dst.write(src.read((size if i < k - 1 else args.samples - i * size) * 4))
    return parts


def address(urls, first):
    """Every node, `first` first: nats://a:1,b:2 (a worker fails over to the others)."""
    hosts = [u[len("nats://"):] for u in urls]
    return "nats://" + ",".join(hosts[first:] + hosts[:first])


def fleet_run(args, path, rows, layout):
    with nats_server(args) as (urls, mport, servers):
        framing = ["--frame", str(args.frame), "--hop", str(args.hop)]
        workers = [subprocess.Popen([FFTD, "--file", f"{address(urls, i % len(urls))}/FRAMES/workers",
                                     "--output", f"{address(urls, i % len(urls))}/spectra.bench",
                                     "--device", args.worker_device, "--format", "f32",
                                     "--rows-per-message", layout, *framing])
                   for i in range(args.workers)]
        time.sleep(args.warmup)  # connected and fetching (a GPU worker also builds its programs)
        started = time.perf_counter()
        server_cpu = sum(cpu_seconds(s.pid) for s in servers)
        # one publisher, or --publishers K each with a part of the input (a connection each)
        parts = split_input(args, path)
        connections = ["--connections", str(args.connections)] if args.connections else []
        publishers = [subprocess.Popen([FFTD, "publish", "--file", part, "--rate", "48000",
                                        "--to", f"{address(urls, 0)}/frames.bench", *framing, *connections])
                      for part in parts]
        publish_cpu = 0.0
        for publisher in publishers:
            _, status, usage = os.wait4(publisher.pid, 0)
            publisher.returncode = os.waitstatus_to_exitcode(status)
            if publisher.returncode != 0:
                for w in workers:
                    w.kill()
                sys.exit(f"fftd publish failed ({publisher.returncode})")
            publish_cpu += usage.ru_utime + usage.ru_stime
        published = time.perf_counter() - started
        want = sum(expected_messages(args, frames_of(os.path.getsize(part) // 4, args.frame, args.hop), layout)
                   for part in parts)
        while (stored := stream_messages(mport, "SPECTRA")) < want:
            if time.perf_counter() - started > 300:
                for w in workers:
                    w.kill()
                sys.exit(f"the fleet stored {stored} of {want} messages in 300 s")
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        server_cpu = sum(cpu_seconds(s.pid) for s in servers) - server_cpu
        for w in workers:
            w.send_signal(signal.SIGINT)
        for w in workers:
            w.wait(timeout=30)
        return elapsed, published, publish_cpu, server_cpu


def direct_run(args, path, rows, layout):
    """One local run publishing its rows itself (--output nats://): it exits once every row is
    acknowledged, and the stream is checked to hold them all."""
    with nats_server(args) as (urls, mport, _):
        started = time.perf_counter()
        subprocess.run([FFTD, "--file", path, "--rate", "48000", "--frame", str(args.frame), "--hop", str(args.hop),
                        "--device", "cpu", "--format", "f32", "--output", f"{address(urls, 0)}/spectra.bench",
                        "--rows-per-message", layout, "--quiet"], check=True)
        elapsed = time.perf_counter() - started
        # the first node's monitoring port: in a cluster it may be a follower still catching up
        # with what the leader acknowledged (not timed)
        stored, deadline = stream_messages(mport, "SPECTRA"), time.monotonic() + 10
        while layout == "1" and stored < rows and time.monotonic() < deadline:
            time.sleep(0.05)
            stored = stream_messages(mport, "SPECTRA")
        if layout == "1" and stored != rows:
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
    p.add_argument("--cluster", action="store_true", help="a 3-node cluster on loopback, R3 streams")
    p.add_argument("--layouts", default="max,1", help="--rows-per-message values to measure")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds the workers get to start")
    p.add_argument("--shards", type=int, default=None,
                   help="fleet setup --shards N: streams the work is spread over [default: fftd's]")
    p.add_argument("--connections", type=int, default=None,
                   help="fftd publish --connections N (1: every shard on one connection) [default: fftd's, one per shard]")
    p.add_argument("--publishers", type=int, default=1,
                   help="fftd publish processes at once, each with 1/K of the input (K connections into the work stream)")
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
    bins = args.frame // 2 + 1
    mb = rows * bins * 4 / 1e6
    local = statistics.median(local_run(args, path) for _ in range(args.runs))
    store = "memory" if args.memory else "file"
    where = "3-node cluster, R3" if args.cluster else "1 server"
    where += f", {args.shards if args.shards else 'default'} work shard(s)"
    where += f", {args.connections if args.connections else 'default'} publish connection(s)"
    print(f"input: {args.samples} f32 samples, frame {args.frame} hop {args.hop}: {rows} rows of {bins} bins "
          f"({mb:.1f} MB of f32 rows); {where}, {store} store; median of {args.runs} runs each")

    def line(name, t, extra=""):
        print(f"{name:44s} {t:7.3f} s  {rows / t:10.0f} rows/s  {args.samples / t / 1e6:7.2f} Msamples/s  "
              f"{mb / t:7.1f} MB/s  {t / local:6.2f}x local{extra}")

    line("local fftd --file (to a file)", local)
    for layout in args.layouts.split(","):
        fleet = [fleet_run(args, path, rows, layout) for _ in range(args.runs)]
        fleet_s = statistics.median(f[0] for f in fleet)
        publish_s = statistics.median(f[1] for f in fleet)
        publish_cpu = statistics.median(f[2] for f in fleet)
        server_cpu = statistics.median(f[3] for f in fleet)
        who = "publish" if args.publishers <= 1 else f"{args.publishers} publishers"
        line(f"fleet {who} + {args.workers} workers, rows/msg {layout}", fleet_s,
             f"  (publish alone {publish_s:.3f} s, its CPU {publish_cpu:.2f} s; nats-server CPU {server_cpu:.2f} s)")
        direct = statistics.median(direct_run(args, path, rows, layout) for _ in range(args.runs))
        line(f"local --output nats://, rows/msg {layout}", direct)


if __name__ == "__main__":
    sys.exit(main())
