#!/usr/bin/env bash
# Runs `tandem-wearable split-check` (release) on every zoo and light model:
# all cuts of chains, 50 sampled cuts (plus both trivial ones) of DAGs. The
# light models are fed their ONNX-runner input and their unsplit output is
# compared with the shipped one. Prints one JSON line per model.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p tandem-bench -p tandem-wearable -p tandem-models
target/release/tandem-models ensure >/dev/null
for m in mnist mobilenet_v1 lstm_har text_rnn text_rnn_lstm wavenet deepear; do
  target/release/tandem-wearable split-check --model "models/cache/zoo/$m.onnx" --cuts 50 2>/dev/null | tail -1
done
for n in bvlc_alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512; do
  l="models/cache/light/light_$n"
  target/release/tandem-wearable split-check --model "$l.onnx" --cuts 50 \
    --input "${l}_input_0.pb" --expected "${l}_output_0.pb" 2>/dev/null | tail -1
done
