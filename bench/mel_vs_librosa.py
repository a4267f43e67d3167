#!/usr/bin/env python3
"""CPU route with `--bands mel:128` against librosa.feature.melspectrogram on the same WAV file,
this machine. fftd: the whole job (read the WAV, frames, FFT, mel bands, write .npy to /dev/shm);
librosa: melspectrogram on the samples already in memory (center=False, same n_fft, hop, window,
power=2, 128 slaney mels), and also with the WAV read by scipy.io.wavfile first. Medians.

    python3 bench/mel_vs_librosa.py --fftd target/release/fftd
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import scipy.io.wavfile
import librosa

ap = argparse.ArgumentParser()
ap.add_argument("--fftd", default="target/release/fftd")
ap.add_argument("--seconds", type=int, default=600)
ap.add_argument("--rate", type=int, default=22050)
ap.add_argument("--runs", type=int, default=5)
a = ap.parse_args()

work = tempfile.mkdtemp(dir="/dev/shm")
wav = os.path.join(work, "x.wav")
y = (np.random.RandomState(1).randn(a.seconds * a.rate) * 3000).astype(np.int16)
scipy.io.wavfile.write(wav, a.rate, y)
out = os.path.join(work, "o.npy")


def median_time(fn):
    fn()
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


print(f"{a.seconds} s of 16-bit mono WAV at {a.rate} Hz, 128 mels, {os.cpu_count()} cores, medians of {a.runs}")
for n_fft, hop in ((2048, 512), (1024, 256)):
    def fftd():
        subprocess.run([a.fftd, "--file", wav, "--frame", str(n_fft), "--hop", str(hop), "--tail", "drop",
                        "--bands", "mel:128", "--scale", "power", "--format", "npy", "--output", out,
                        "--device", "cpu", "--quiet"], check=True)

    samples = y.astype(np.float32) / 32768

    def lib():
        librosa.feature.melspectrogram(y=samples, sr=a.rate, n_fft=n_fft, hop_length=hop, center=False,
                                       power=2.0, n_mels=128)

    def lib_with_read():
        rate, data = scipy.io.wavfile.read(wav)
        librosa.feature.melspectrogram(y=data.astype(np.float32) / 32768, sr=rate, n_fft=n_fft,
                                       hop_length=hop, center=False, power=2.0, n_mels=128)

    f, l, lr = median_time(fftd), median_time(lib), median_time(lib_with_read)
    got = np.load(out)
    want = librosa.feature.melspectrogram(y=samples, sr=a.rate, n_fft=n_fft, hop_length=hop, center=False,
                                          power=2.0, n_mels=128).T
    err = np.max(np.abs(got - want)) / np.max(want)
    print(f"n_fft {n_fft} hop {hop}: fftd {f:.3f} s, librosa {l:.3f} s ({l / f:.2f}x), "
          f"librosa with the WAV read {lr:.3f} s ({lr / f:.2f}x); max error {err:.1e} of the peak", flush=True)
os.remove(wav)
os.remove(out)
os.rmdir(work)
