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
