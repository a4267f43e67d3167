#!/usr/bin/env python3
"""A simulated RTL-SDR behind rtl_tcp's protocol, for trying fftd's rtl_tcp:// input and
--sweep without a dongle (docs/radio.md).

It listens on HOST:PORT (default 127.0.0.1:1234), sends rtl_tcp's 12-byte dongle-info header
(RTL0, an R820T, 29 gain steps), obeys set-sample-rate (0x02) and set-frequency (0x01), and
streams unsigned 8-bit I/Q paced at the rate: a sky of carriers at fixed radio frequencies (by
default the FM broadcast band's stations below), each passed when it lies within 45 % of the
rate of the tuned centre, plus a little noise. Like a real dongle it has transfers in flight: a
retune takes effect only behind the QUEUED transfers already made, so the first samples after a
retune are stale (fftd's --settle leaves them out).

    python3 scripts/rtl_tcp_sky.py &
    fftd --file rtl_tcp://127.0.0.1:1234 --sweep 88M:108M:10k --crop 0.2 --average 1s \\
         --sweeps 1 --format rtl-power --output fm.csv

Options: --port N, --host H, --tones HZ:AMPLITUDE,... (amplitude in cu8 codes, at most ~120).
Serves one client at a time, until interrupted.
"""
import argparse
import collections
import socket
import struct
import threading
import time

import numpy as np

# stations of a made-up FM band (Hz, amplitude in codes)
DEFAULT_TONES = "88.5e6:40,91.3e6:25,94.7e6:60,98.1e6:35,101.1e6:50,104.5e6:30,107.9e6:45"
CHUNK = 16384  # samples per transfer (rtl_tcp's are 131072; smaller keeps latency low)
QUEUED = 4     # transfers made before the one being sent: stale samples after a retune


def parse_tones(text):
    tones = []
    for part in text.split(","):
        hz, amplitude = part.split(":")
        tones.append((float(hz), float(amplitude)))
    return tones


class Dongle:
    def __init__(self):
        self.rate = 2_048_000.0
        self.centre = 100e6
        self.lock = threading.Lock()

    def commands(self, conn):
        while True:
            data = b""
            while len(data) < 5:
                more = conn.recv(5 - len(data))
                if not more:
                    return
                data += more
            code, value = struct.unpack(">BI", data)
            with self.lock:
                if code == 0x02:
                    self.rate = float(value)
                elif code == 0x01:
                    self.centre = float(value)


def transfer(first, centre, rate, tones, rng):
    t = (first + np.arange(CHUNK)) / rate
    iq = np.zeros(CHUNK, dtype=np.complex128)
    for hz, amplitude in tones:
        offset = hz - centre
        if abs(offset) < 0.45 * rate:
            iq += amplitude * np.exp(2j * np.pi * offset * t)
    iq += rng.normal(0.0, 1.0, CHUNK) + 1j * rng.normal(0.0, 1.0, CHUNK)
    out = np.empty(2 * CHUNK)
    out[0::2], out[1::2] = iq.real + 127.5, iq.imag + 127.5
    return np.clip(np.rint(out), 0, 255).astype(np.uint8).tobytes()


def serve(conn, tones):
    dongle = Dongle()
    conn.sendall(b"RTL0" + struct.pack(">II", 5, 29))
    threading.Thread(target=dongle.commands, args=(conn,), daemon=True).start()
    time.sleep(0.05)  # the client's first commands (rate, frequency) arrive before streaming
    rng = np.random.default_rng(1)
    queue, made, sent, began = collections.deque(), 0, 0, time.monotonic()
    while True:
        with dongle.lock:
            centre, rate = dongle.centre, dongle.rate
        queue.append(transfer(made, centre, rate, tones, rng))
        made += CHUNK
        if len(queue) <= QUEUED:
            continue
        wait = sent / rate - (time.monotonic() - began)
        if wait > 0:
            time.sleep(wait)
        conn.sendall(queue.popleft())
        sent += CHUNK


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1234)
    parser.add_argument("--tones", default=DEFAULT_TONES)
    args = parser.parse_args()
    tones = parse_tones(args.tones)
    listener = socket.create_server((args.host, args.port))
    print(f"rtl_tcp sky on {args.host}:{args.port}", flush=True)
    while True:
        conn, _ = listener.accept()
        try:
            serve(conn, tones)
        except OSError:
            pass
        finally:
            conn.close()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
