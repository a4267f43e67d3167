#!/usr/bin/env bash
# Regenerates docs/img/serve.png, the README's picture of the live page: serves a demo signal (a
# sweep, two tones, short bursts over a noise floor) with `fftd --realtime --serve`, opens the page
# in headless chromium and saves a screenshot (tests/serve_browser.py --demo). Needs what
# `scripts/deps.sh --test` installs; takes about 20 s after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
python3 tests/serve_browser.py --fftd "${CARGO_TARGET_DIR:-target}/release/fftd" --demo docs/img/serve.png
