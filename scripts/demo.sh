#!/usr/bin/env bash
# The paired demo: a handheld process and a slowed wearable process on this
# machine, over TCP loopback through an emulated Bluetooth LE link.
#
# - The two pair first, as a user would: `tandem-handheld pair` prints a
#   6-digit code, `tandem-wearable pair` types it (SPAKE2, then Noise); every
#   link after that is encrypted and authenticated (scripts/handheld.sh).
# - The handheld (`tandem-handheld serve`) serves the model zoo as a Pixel 8 Pro.
# - The wearable (`tandem-wearable stream`) is a Wear OS watch: its compute is
#   dilated to the watch profile's slowdown (8x this host), and its link is
#   emulated BLE 2M (1.3 Mbit/s, 10 ms one way, MTU 244) both ways.
# - For each model it streams frames four ways: wearable-only, handheld-only,
#   partitioned (the planner's cut, one frame at a time), and partitioned +
#   pipelined (the stream objective, frames overlapped).
# - Then link encodings against raw tensors (scripts/encodings-goal.py, six
#   ways, one frame at a time, up to 5 frames): MNIST and MobileNet, and,
#   once scripts/test.sh has fetched them, three real models on real inputs.
#
# Latency and throughput are measured wall-clock times of the emulated run;
# energy is model-based (busy time x profile power + radio time x radio power).
#
# Environment: LINK (default ble-2m), FRAMES (default 30), MODELS (zoo names),
# BUILD_ONLY=1 (build, then stop: CI checks that this compiles nothing after the tests),
# NO_BUILD=1 (run what is built: CI's demos run beside each other), OUT (default target/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
LINK=${LINK:-ble-2m}
FRAMES=${FRAMES:-30}
MODELS=${MODELS:-"text_rnn_lstm mnist deepear mobilenet_v1_1.0_128"}

# The dev profile (dependencies at opt-level 2, ours at 1, see Cargo.toml):
# the same artifacts as `scripts/test.sh`, so tract is built once for both.
[ -n "${NO_BUILD:-}" ] || cargo build --locked -p tandem-wearable -p tandem-models -p tandem-handheld
[ -z "${BUILD_ONLY:-}" ] || exit 0
T=target/debug
$T/tandem-models gen --out models/cache/zoo $MODELS >/dev/null

OUT=${OUT:-target/demo}
mkdir -p "$OUT"
: >"$OUT/demo.jsonl"
. scripts/handheld.sh
start_handheld "$OUT" --models models/cache/zoo
echo "handheld listening on $ADDR (paired, encrypted); wearable: watch-w5 (8x slowdown) over emulated $LINK"

for m in $MODELS; do
  for way in wearable-only handheld-only partitioned pipelined; do
    case $way in
      wearable-only) args=(--placement wearable --no-pipeline) ;;
      handheld-only) args=(--placement handheld --no-pipeline) ;;
      partitioned) args=(--placement auto --no-pipeline) ;;
      pipelined) args=(--placement auto) ;;
    esac
    echo "  $m: $way" >&2
    $T/tandem-wearable stream --model "models/cache/zoo/$m.onnx" --connect "$ADDR" --keys "$KEYS" --link "$LINK" \
      --profile watch-w5 --slowdown profile --frames "$FRAMES" "${args[@]}" 2>>"$OUT/wearable.err" |
      tail -n 1 | python3 -c "import json,sys; j=json.load(sys.stdin); j['way']='$way'; print(json.dumps(j))" \
        >>"$OUT/demo.jsonl"
  done
done

# Also kept per link, for scripts/readme-tables.py.
cp "$OUT/demo.jsonl" "$OUT/demo-${LINK//-/}.jsonl"

python3 - "$OUT/demo.jsonl" "$LINK" <<'EOF'
import json, sys
path = sys.argv[1]
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print(f"Paired demo: watch-w5 (8x slowdown) + pixel-8-pro over emulated {sys.argv[2]}, {rows[0]['frames']} frames each")
print("energy is model-based (busy time x profile power + radio time x radio power)")
head = f"{'model':<22} {'way':<14} {'frames/s':>9} {'p50 ms':>9} {'p95 ms':>9} {'offloaded':>9} {'cut':>9} {'watch mJ/f':>11} {'phone mJ/f':>11}"
print(head)
print("-" * len(head))
for r in rows:
    cut = f"{r['last_prefix_layers']}/{r['layers']}"
    print(f"{r['model']:<22} {r['way']:<14} {r['throughput_fps']:>9.2f} {r['p50_ms']:>9.1f} {r['p95_ms']:>9.1f} "
          f"{r['offloaded']:>9} {cut:>9} {r['wearable_j_per_frame']*1e3:>11.2f} {r['handheld_j_per_frame']*1e3:>11.2f}")
print(f"\ncut = layers on the watch / layers (last frame); rows as JSON in {path}")
EOF

# Link encodings against raw, in their own processes (a handheld per models directory).
ENC_MODELS=mnist,mobilenet_v1_1.0_128,oww_embedding,ppocr_cls,ppocr_cls_int8
echo
echo "Link encodings against raw tensors over emulated $LINK (one frame at a time; energy model-based):"
python3 scripts/encodings-goal.py --links "$LINK" --models "$ENC_MODELS" --frames $((FRAMES < 5 ? FRAMES : 5)) \
  --out "$OUT/encodings" 2>>"$OUT/wearable.err"
