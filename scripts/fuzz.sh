#!/usr/bin/env bash
# Fuzzes Tandem's decoders and state machines with cargo-fuzz (libFuzzer,
# on the nightly toolchain). Seeds each target's corpus from valid samples
# (proto/examples/fuzz_seeds.rs), builds the targets once (the protocol's
# need no tract; onnx_graphs builds tract; naming device_profile, schedule
# or model_loader builds the runtime too), runs each for SECONDS
# (default 30), and prints one JSON line per target: executions, coverage
# (libFuzzer's edge `cov` and feature `ft` counts), corpus size, crashes.
# A crash stops the run with libFuzzer's report; its input is kept in
# fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Default targets: the protocol's five (frame decoder, both sessions,
# encrypted records, pairing), which build without tract, and onnx_graphs
# (generated graphs under the model size checks: a nightly tract build, no
# runtime). CI runs the protocol's five for 12 s each, FUZZ_BUILD=dev (onnx_graphs' tract
# build was 9 min of CI). device_profile, schedule and model_loader
# (tract's ONNX parser on raw bytes: slow per input) are run by name, with
# the runtime built too.
#
# FUZZ_BUILD=dev (CI's smoke): our crates built unoptimized, the
# cryptography at opt-level 1 (fuzz/Cargo.toml), with debug assertions and
# without AddressSanitizer (`--dev -s none`). They build in 126 s of CPU
# instead of 250 s, and run fewer inputs a second (3 s from the same
# corpus: frame_decoder 5.3k/s against 51k/s with AddressSanitizer in the
# release build, pairing 1.6k/s against 3.0k/s, secure_records 97/s
# against 324/s), a smoke's worth; our crates forbid `unsafe`, so
# AddressSanitizer watches only the dependencies' unsafe code. The default
# (release, AddressSanitizer) is for runs that fuzz for real.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${FUZZ_BUILD:-release} in
  release) FUZZ_FLAGS=(-O) ;;
  dev) FUZZ_FLAGS=(--dev -s none) ;;
  *) echo "FUZZ_BUILD is release or dev, not ${FUZZ_BUILD}" >&2; exit 2 ;;
esac
PER=${1:-30}
shift || true
TARGETS=${*:-frame_decoder handheld_session wearable_session secure_records pairing onnx_graphs}
# CI lints our crates through a workspace wrapper (stable's clippy-driver,
# .ci/run): the nightly builds and cargo-fuzz's install go without it.
no_lint() { env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS "$@"; }
command -v cargo-fuzz >/dev/null || no_lint cargo install cargo-fuzz --locked --version 0.13.2
# Built with the workspace's features, as the tests and CI's examples step
# build them: with `-p tandem-proto` alone, the dependencies' features
# differ and a clean CI rebuilt them for 4 minutes. NO_BUILD=1: they are
# built (CI, whose lints hold cargo's lock on target/ meanwhile).
[ -n "${NO_BUILD:-}" ] || cargo build --locked -q --workspace --examples
"${CARGO_TARGET_DIR:-target}"/debug/examples/fuzz_seeds
cd fuzz
FEATURES=()
want=()
for t in $TARGETS; do
  case $t in
    device_profile | schedule | model_loader) want+=(heavy) ;;
    onnx_graphs) want+=(graphs) ;;
  esac
done
if [ ${#want[@]} -gt 0 ]; then
  FEATURES=(--features "$(printf '%s\n' "${want[@]}" | sort -u | paste -sd, -)")
fi
no_lint cargo +nightly fuzz build "${FUZZ_FLAGS[@]}" "${FEATURES[@]}"
mkdir -p target/logs
# One target per core at a time (FUZZ_JOBS; default: the cores, at most 4).
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$JOBS" -gt 4 ] && JOBS=4
run_one() {
  local t=$1 log=target/logs/$1.log
  mkdir -p "corpus/$t" "artifacts/$t"
  if no_lint cargo +nightly fuzz run "${FUZZ_FLAGS[@]}" "${FEATURES[@]}" "$t" "corpus/$t" -- -max_total_time="$PER" -rss_limit_mb=2048 \
      -print_final_stats=1 >"$log" 2>&1; then
    echo ok >"target/logs/$t.status"
  else
    echo failed >"target/logs/$t.status"
  fi
}
for t in $TARGETS; do
  rm -f "target/logs/$t.status"
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  run_one "$t" &
done
wait
failed=0
for t in $TARGETS; do
  log=target/logs/$t.log
  if [ "$(cat "target/logs/$t.status" 2>/dev/null)" != ok ]; then
    echo "fuzz target $t failed:" >&2
    tail -n 60 "$log" >&2
    failed=1
    continue
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
exit $failed
