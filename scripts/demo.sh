#!/usr/bin/env bash
# Installs what is missing, builds fftd and analyses the bundled examples.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== checking system packages (scripts/deps.sh)"
scripts/deps.sh
echo "== building fftd (cargo build --release: a first build compiles ~300 crates, several minutes on 2 cores)"
cargo build --release
fftd=target/release/fftd

echo "== examples/input.txt: the classic one-sample-per-line input, whole signal as one frame"
$fftd --file examples/input.txt --frame whole --rate 8000 --format csv --meta target/input.meta.json | cut -c1-160
echo
echo "== examples/tones.wav: 440 Hz + 1 kHz + 3.5 kHz at 16 kHz; strongest bins of the first frame (frame 1024, hop 256, dB)"
$fftd --file examples/tones.wav --frame 1024 --hop 256 --scale db --format ndjson --max-frames 1 --stats |
    python3 -c '
import json, sys
db = json.loads(sys.stdin.readline())["bins"]
hz = 16000 / 1024
peaks = [k for k in range(1, len(db) - 1) if db[k] >= db[k - 1] and db[k] > db[k + 1]]
for k in sorted(sorted(peaks, key=lambda k: -db[k])[:3]):
    print(f"  bin {k:4d}  {k*hz:7.1f} Hz  {db[k]:6.1f} dB")
'
echo
echo "== the same file as float32 spectra into a consumer (examples/consume.py)"
$fftd --file examples/tones.wav --frame 4096 --hop 1024 --format f32 | python3 examples/consume.py 2049 16000
echo
echo "== a spectrogram image of examples/chirp.py's signal (chirp, tone, pulses, a click): target/spectrogram.png"
python3 examples/chirp.py target/chirp.wav
$fftd --file target/chirp.wav --frame 1024 --hop 256 --format png --output target/spectrogram.png --meta target/spectrogram.json
python3 -c 'import json; i = json.load(open("target/spectrogram.json"))["inputs"][0]; print("  %d frames drawn into %s" % (i["frames"], i["output"]))'
