#!/usr/bin/env python3
"""Writes the signal of the README's spectrogram example as a 16-bit mono WAV (standard library
only): 6 s at 16 kHz of a linear chirp from 100 Hz to 7.5 kHz, a steady 1 kHz tone 20 dB below it,
a 3.5 kHz tone switched on and off every half second, one 2 ms click at 4 s and a faint noise floor
(-80 dB). Usage: python3 examples/chirp.py OUT.wav"""
import math
import random
import struct
import sys
import wave

RATE = 16000
SECONDS = 6.0


def sample(i, rng):
    t = i / RATE
    f0, f1 = 100.0, 7500.0
    chirp = 0.5 * math.sin(2 * math.pi * (f0 * t + (f1 - f0) * t * t / (2 * SECONDS)))
    tone = 0.05 * math.sin(2 * math.pi * 1000.0 * t)
    pulsed = 0.1 * math.sin(2 * math.pi * 3500.0 * t) if int(t * 2) % 2 == 1 else 0.0
    click = 0.5 * rng.uniform(-1, 1) if 4.0 <= t < 4.002 else 0.0
    noise = 1e-4 * rng.uniform(-1, 1)
    return chirp + tone + pulsed + click + noise


def main():
    rng = random.Random(1)
    n = int(RATE * SECONDS)
    data = [max(-32768, min(32767, round(sample(i, rng) * 32767))) for i in range(n)]
    with wave.open(sys.argv[1], "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(struct.pack(f"<{n}h", *data))


if __name__ == "__main__":
    main()
