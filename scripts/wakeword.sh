#!/usr/bin/env bash
# The wake-word app on real speech: espeak-ng says "alexa", and
# `tandem-wearable wakeword` runs openWakeWord's models on it, first on the
# watch alone, then with the speech embedding on a `tandem-handheld serve`
# process over emulated BLE 2M. Needs espeak-ng, and the real models
# (models/fetch_real.py, which scripts/test.sh runs).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 models/fetch_real.py >/dev/null
cargo build --locked -q -p tandem-wearable -p tandem-handheld
T=target/debug R=models/cache/real
mkdir -p target/wakeword
espeak-ng -v en-us -s 140 -w target/wakeword/alexa.wav "alexa"
args=(--wav target/wakeword/alexa.wav --mel $R/oww_melspectrogram.onnx --embedding $R/oww_embedding.onnx
      --keyword $R/oww_alexa.onnx --keyword $R/oww_hey_jarvis.onnx --cards models/cards)
echo "== on the watch alone"
$T/tandem-wearable wakeword "${args[@]}"
echo "== the embedding on a handheld, over emulated BLE 2M"
. scripts/handheld.sh
start_handheld target/wakeword
$T/tandem-wearable wakeword "${args[@]}" --connect "$ADDR" --keys "$KEYS" --link ble-2m --placement handheld
