#!/usr/bin/env python3
"""Runs `fftd --mic ...` against a real-time paced virtual microphone, with no sound card.

ALSA's `file` plugin with a `null` slave has no clock: reading a regular file, capture runs far
faster than real time. Here its `infile` is a FIFO that this script writes at the pace of a real
device (one 512-frame period of a 1 kHz sine every 512/rate s, absolute deadlines), so fftd sees
live-rate input and its `--stats` latency means what it would mean with a microphone.

    python3 scripts/paced_mic.py [--rate 48000] [--seconds 22] -- FFTD_ARGS...

FFTD_ARGS must include --mic and should stop the run (--duration, --max-frames). The FIFO carries
mono f32 (pass --channels 1). fftd's own stderr (the --stats line) is passed through.
"""
import argparse, math, os, struct, subprocess, sys, tempfile, threading, time

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rate", type=int, default=48000)
    p.add_argument("--seconds", type=float, default=22.0)
    p.add_argument("--fftd", default="target/release/fftd")
    p.add_argument("fftd_args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    args = [x for x in a.fftd_args if x != "--"]
    period = 512  # frames per write; equal to fftd's capture period at 48 kHz (reads are whole)
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "mic.f32")
        os.mkfifo(fifo)
        conf = os.path.join(d, "asound.conf")
        with open(conf, "w") as f:
            f.write('pcm.!default {\n type file\n slave.pcm { type null }\n file "/dev/null"\n'
                    f' infile "{fifo}"\n format "raw"\n}}\n')
        n = int(a.rate * a.seconds)
        chunks = [struct.pack(f"<{period}f", *(0.5 * math.sin(2 * math.pi * 1000 * (k + i) / a.rate)
                                               for i in range(period)))
                  for k in range(0, a.rate, period)]  # one second of sine, repeated
        done = threading.Event()

        def writer():
            k = 0
            while k < n and not done.is_set():
                fd = os.open(fifo, os.O_WRONLY)  # blocks until fftd opens the device
                start = time.monotonic() - k / a.rate
                try:
                    while k < n and not done.is_set():
                        delay = start + k / a.rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                        os.write(fd, chunks[(k // period) % len(chunks)])
                        k += period
                except BrokenPipeError:
                    pass  # fftd closed a probe of the device; wait for the next open
                os.close(fd)

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        env = dict(os.environ, ALSA_CONFIG_PATH=conf)
        r = subprocess.run([a.fftd] + args, env=env, timeout=a.seconds + 30)
        done.set()
        try:  # unblock a writer waiting in open()
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass
        sys.exit(r.returncode)

if __name__ == "__main__":
    main()
