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
args=(--model $R/nudenet_320n.onnx --images target/detect/images)
echo "== on the watch alone"
$T/tandem-wearable detect "${args[@]}" | sed -n 1p
echo "== on a handheld"
$T/tandem-handheld serve --listen 127.0.0.1:0 >target/detect/handheld.log 2>&1 &
handheld=$!
trap 'kill $handheld 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  addr=$(sed -n 's/^listening on //p' target/detect/handheld.log)
  [ -n "$addr" ] && break
  sleep 0.1
done
$T/tandem-wearable detect "${args[@]}" --connect "$addr" --placement handheld | sed -n 1p
