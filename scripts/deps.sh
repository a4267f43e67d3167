#!/usr/bin/env bash
# Makes sure the system packages fftd builds and runs with are present; with --test also what the
# test suite compares against or drives (sox, numpy, scipy, librosa, prometheus-client, pandas,
# sigmf, chromium, selenium):
#   libasound2-dev pkg-config            cpal (ALSA) for --mic
#   pocl-opencl-icd ocl-icd-opencl-dev   a real OpenCL runtime on the CPU (PoCL), for the OpenCL tests
#   clinfo                               to see what OpenCL finds
#   gcc, python3                         only where missing (a minimal Debian image)
#   sox (--test)                         writes the WAV files (A-law, mu-law, 64-bit float, EXTENSIBLE,
#                                        pipes) the WAV reader is tested against
#   libsox-fmt-mp3 ffmpeg (--test)       encode the MP3, Ogg, M4A/AAC, ALAC, CAF and Opus files the
#                                        compressed-audio reader is tested with (tests/audio_inputs.rs;
#                                        sox alone writes FLAC, AIFF and Ogg but not MP3)
#   chromium chromium-driver (--test)    a headless browser for the live page of --serve
#                                        (tests/serve_browser.rs)
#   nats-server (--test)                 a NATS server with JetStream for the fleet tests
#                                        (tests/fleet.rs start their own on loopback)
#   openssl (--test)                     makes the CA and certificates of the TLS fleet tests
#                                        (tests/fleet_auth.rs; not in a minimal Debian image)
#   pulseaudio libasound2-plugins        a PulseAudio server the test starts and kills, and ALSA's
#     (--test)                           `pulse` plugin: a microphone that fails mid-capture and
#                                        comes back (tests/retry.rs)
#   libsoapysdr0.8                       SoapySDR, loaded at run time for soapy:// inputs (fftd starts
#     soapysdr0.8-module-redpitaya       without it); the Red Pitaya module is the real module the
#     (--test)                           tests drive, against a loopback server speaking its protocol
#                                        (tests/soapy.rs)
#   systemd (--test)                     systemd-analyze: packaging/fftd.service verifies and scores
#                                        below 2.0 in `security` (tests/daemon.rs; CI=true fails
#                                        without it)
# and (--test) python3 with numpy, scipy, librosa and soundfile, for the tests that compare against
# them (soundfile: libsndfile's decode of MP3 and Ogg, tests/audio_inputs.rs; nats-py: the Python
# subscriber of docs/fleet.md, tests/fleet.rs)
# (librosa: the mel filter banks of --bands, tests/bands_librosa.rs; pandas: read_csv of nan/inf
# values, tests/honest_numbers.rs), and selenium 4, which drives
# chromium through chromedriver (never downloading a browser or a driver itself).
# As root it installs what is missing; otherwise it prints the exact command and exits 1.
set -euo pipefail

testing=false
[[ "${1:-}" == "--test" ]] && testing=true
packages=(libasound2-dev pkg-config pocl-opencl-icd ocl-icd-opencl-dev clinfo)
$testing && packages+=(sox libsox-fmt-mp3 ffmpeg chromium chromium-driver nats-server openssl
    pulseaudio libasound2-plugins systemd libsoapysdr0.8 soapysdr0.8-module-redpitaya)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# a minimal Debian has neither a C compiler (mimalloc, alsa-sys) nor python3 (the demo's consumers)
command -v cc >/dev/null || missing+=(gcc libc6-dev)
command -v python3 >/dev/null || missing+=(python3)
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        echo "deps: installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "deps: missing system packages; run:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

if ! command -v cargo >/dev/null; then
    echo "deps: no Rust toolchain; install it with:" >&2
    echo "  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2
    exit 1
fi

if $testing; then
    if ! python3 -c "import numpy, scipy.signal, librosa, prometheus_client, pandas, soundfile, nats" 2>/dev/null; then
        echo "deps: installing numpy, scipy, librosa, prometheus-client, pandas, soundfile and nats-py for python3" >&2
        python3 -m pip install --quiet numpy scipy librosa prometheus-client pandas soundfile nats-py || {
            echo "deps: could not install them; run: python3 -m pip install numpy scipy librosa prometheus-client pandas soundfile" >&2
            exit 1
        }
    fi
    # sigmf: tests/radio.rs writes its SigMF recordings with the reference Python package
    if ! python3 -c "import sigmf" 2>/dev/null; then
        echo "deps: installing sigmf for python3" >&2
        python3 -m pip install --quiet sigmf || {
            echo "deps: could not install sigmf; run: python3 -m pip install sigmf" >&2
            exit 1
        }
    fi
    if ! python3 -c "import selenium" 2>/dev/null; then
        echo "deps: installing selenium 4 for python3" >&2
        python3 -m pip install --quiet 'selenium==4.*' || {
            echo "deps: could not install selenium; run: python3 -m pip install 'selenium==4.*'" >&2
            exit 1
        }
    fi
fi
