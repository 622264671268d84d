#!/usr/bin/env bash
# The detector app on a real photo: NudeNet's YOLOv8n through
# `tandem-wearable detect`, first on the watch alone, then with the model
# on a `tandem-handheld serve` process (TCP loopback). Needs the real
# models and photos (models/fetch_real.py, which scripts/test.sh runs).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 models/fetch_real.py >/dev/null
cargo build --locked -q -p tandem-wearable -p tandem-handheld
T=target/debug R=models/cache/real
mkdir -p target/detect/images
cp $R/photos/astronaut.png target/detect/images/
args=(--model $R/nudenet_320n.onnx --card models/cards/nudenet_320n.toml --images target/detect/images)
echo "== on the watch alone"
$T/tandem-wearable detect "${args[@]}" | sed -n 1p
echo "== on a handheld"
. scripts/handheld.sh
start_handheld target/detect
$T/tandem-wearable detect "${args[@]}" --connect "$ADDR" --keys "$KEYS" --placement handheld | sed -n 1p
