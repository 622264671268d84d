#!/usr/bin/env bash
# Reproduces the predictor results in docs/results.md on this machine:
#   1. a generic layer sweep (BUDGET, default 240 s),
#   2. a model-specific sweep (EvoLP's layer pool) around each family's base
#      model (MODEL_BUDGET each, default 10 s); held-out variants are never swept,
#   3. held-out R² per layer class, then whole-model, prefix and suffix
#      latency of the zoo, the 16 MobileNet variants and the pruned CNNs,
#      predicted by FLOPs, DT+LR and EvoLP (before/after evolution) vs measured.
# Outputs land in target/predict/ (datasets, predictors.json, eval.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p tandem-bench -p tandem-wearable -p tandem-models
W=target/release/tandem-wearable
OUT=target/predict
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl
target/release/tandem-models ensure >/dev/null
"$W" sweep --out "$OUT/generic.jsonl" --budget "${BUDGET:-240s}"
for m in mobilenet_v1 mnist wavenet deepear lstm_har text_rnn text_rnn_lstm; do
  "$W" sweep --mode model --model "models/cache/zoo/$m.onnx" --out "$OUT/model-$m.jsonl" \
    --budget "${MODEL_BUDGET:-10s}"
done
"$W" predict fit --data "$OUT"/*.jsonl --out "$OUT/predictors.json" >/dev/null
"$W" predict eval --data "$OUT"/*.jsonl --set full --details | tee "$OUT/eval.txt"
