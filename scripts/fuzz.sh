#!/usr/bin/env bash
# Fuzzes Tandem's decoders and state machines with cargo-fuzz (libFuzzer,
# on the nightly toolchain). Seeds each target's corpus from valid samples
# (proto/examples/fuzz_seeds.rs), builds the targets once (the protocol's
# need no tract: a small nightly build; naming device_profile, schedule or
# model_loader builds tract and the runtime too), runs each for SECONDS
# (default 30), and prints one JSON line per target: executions, coverage
# (libFuzzer's edge `cov` and feature `ft` counts), corpus size, crashes.
# A crash stops the run with libFuzzer's report; its input is kept in
# fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Default targets: the protocol's five (frame decoder, both sessions,
# encrypted records, pairing), which build without tract. CI runs
# `scripts/fuzz.sh 30`. device_profile, schedule and model_loader (tract's
# ONNX parser: slow per input) are run by name, with a nightly tract build.
set -euo pipefail
cd "$(dirname "$0")/.."
PER=${1:-30}
shift || true
TARGETS=${*:-frame_decoder handheld_session wearable_session secure_records pairing}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
cargo run --locked -q -p tandem-proto --example fuzz_seeds
cd fuzz
FEATURES=()
for t in $TARGETS; do
  case $t in device_profile | schedule | model_loader) FEATURES=(--features heavy) ;; esac
done
cargo +nightly fuzz build -O "${FEATURES[@]}"
mkdir -p target/logs
for t in $TARGETS; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log=target/logs/$t.log
  if ! cargo +nightly fuzz run -O "${FEATURES[@]}" "$t" "corpus/$t" -- -max_total_time="$PER" -rss_limit_mb=2048 \
      -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz target $t failed:" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
  python3 - "$t" "$log" "$PER" "corpus/$t" <<'PY'
import json, os, re, sys
t, log, per, corpus = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(log, errors="replace").read()
stat = dict(re.findall(r"stat::(\w+):\s+(\d+)", text))
last = re.findall(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", text)
execs, cov, ft, corp = (map(int, last[-1]) if last else (0, 0, 0, 0))
print(json.dumps({"target": t, "seconds": per, "executions": int(stat.get("number_of_executed_units", execs)),
                  "cov": cov, "ft": ft, "corpus": len(os.listdir(corpus)), "crashes": 0}))
PY
done
