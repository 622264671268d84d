#!/usr/bin/env bash
# The main job, for now: generate the model zoo, inspect MobileNet v1's
# layer DAG, then run it split at every one of its cuts and compare each
# with the unsplit model.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p tandem-bench -p tandem-wearable -p tandem-models
target/release/tandem-models gen --out models/cache/zoo
target/release/tandem-wearable inspect --model models/cache/zoo/mobilenet_v1.onnx
target/release/tandem-wearable split-check --model models/cache/zoo/mobilenet_v1.onnx
target/release/tandem-wearable split-check --model models/cache/zoo/wavenet.onnx --cuts 50 --seed 1
# Partition MobileNet v1 for a Wear OS watch + Pixel 8 Pro over a 1 Mbit/s
# link with a 200 ms latency hint (an emulated pair: host-profiled layer
# times x each device profile's slowdown; energy is model-based).
target/release/tandem-wearable plan --model models/cache/zoo/mobilenet_v1.onnx \
  --wearable watch-w5 --handheld pixel-8-pro --bandwidth 1mbit --latency-hint 200ms
