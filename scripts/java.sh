#!/usr/bin/env bash
# Tandem's Java API (package dev.tandem), built and tested end to end:
#   1. builds libtandem_jni.so (target/debug) and the binaries the tests
#      compare with (tandem-wearable, tandem-handheld, tandem-models);
#   2. compiles java/src/main with javac --release 11 (Android's Java) into
#      target/java/classes and packs target/java/tandem.jar;
#   3. runs javadoc with doclint (a missing or broken doc fails);
#   4. pairs a wearable keystore with a handheld keystore through the real
#      binaries, starts `tandem-handheld serve` on loopback, and runs the
#      Java tests (java/src/test, a plain-Java runner) and the example
#      (java/examples) against it over an emulated BLE link.
# Needs a JDK 11 or later (OpenJDK 17 here: apt-get install openjdk-17-jdk-headless),
# and the real and TFLite models (models/cache/real and models/cache/tflite:
# `python3 models/fetch_real.py` and `python3 models/fetch_tflite.py`, run here
# when missing, as scripts/test.sh runs them). Exits non-zero on any failure.
#
# Usage: scripts/java.sh            everything
#        TANDEM_JAVA_ONLY=NAME scripts/java.sh   only the tests whose name contains NAME
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$(date +%s)

command -v javac >/dev/null && command -v java >/dev/null && command -v javadoc >/dev/null || {
  echo "scripts/java.sh needs a JDK (javac, java, javadoc): sudo apt-get install -y openjdk-17-jdk-headless" >&2
  exit 1
}

echo "== cargo build (tandem-jni, tandem-wearable, tandem-handheld, tandem-models)" >&2
cargo build --locked -q -p tandem-jni -p tandem-wearable -p tandem-handheld -p tandem-models
lib=$root/target/debug
test -f "$lib/libtandem_jni.so" || { echo "no $lib/libtandem_jni.so" >&2; exit 1; }

# Models: the zoo's MNIST (generated), a real model (fetched, pinned).
"$lib/tandem-models" gen mnist >/dev/null
mnist=$root/models/cache/zoo/mnist.onnx
real=$root/models/cache/real/ppocr_cls.onnx
real_input=$root/models/cache/real/ppocr_cls_input_0.pb
real_shape=x=1,3,48,192
# A TFLite model (MediaPipe's short-range face detector, translated to ONNX
# where it loads) on its real input: the astronaut photo.
tflite=$root/models/cache/tflite/face_detection_short_range.tflite
tflite_input=$root/models/cache/tflite/face_detection_short_range.in0.npy
if [ ! -f "$real" ] || [ ! -f "$real_input" ] || [ ! -f "$tflite" ] || [ ! -f "$tflite_input" ]; then
  echo "== fetching the real and TFLite models (models/fetch_real.py, models/fetch_tflite.py)" >&2
  # espeak-ng speaks the real models' audio inputs (as scripts/test.sh installs it).
  if ! command -v espeak-ng >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null
    else
      echo "scripts/java.sh needs espeak-ng to fetch the real models: sudo apt-get install -y espeak-ng" >&2
      exit 1
    fi
  fi
  python3 -m pip install --quiet --disable-pip-version-check onnx==1.23.2 onnxruntime==1.20.1 pillow==11.0.0 ai-edge-litert==2.3.0
  python3 models/fetch_real.py
  python3 models/fetch_tflite.py
fi

out=$root/target/java
mkdir -p "$out"
# One run at a time in this tree (they share target/java).
exec 9>"$out/.lock"
flock 9
rm -rf "$out/classes" "$out/test-classes" "$out/example-classes" "$out/javadoc" "$out/work"
mkdir -p "$out/classes" "$out/test-classes" "$out/example-classes" "$out/work"

echo "== javac --release 11" >&2
javac --release 11 -Xlint:all -Werror -d "$out/classes" java/src/main/java/dev/tandem/*.java
jar --create --file "$out/tandem.jar" -C "$out/classes" .
echo "== javadoc (doclint)" >&2
javadoc -quiet --release 11 -Xdoclint:all -Xwerror -d "$out/javadoc" \
  -sourcepath java/src/main/java dev.tandem >/dev/null
javac --release 11 -Xlint:all -Werror -cp "$out/classes" -d "$out/test-classes" java/src/test/java/dev/tandem/*.java
javac --release 11 -Xlint:all -Werror -cp "$out/tandem.jar" -d "$out/example-classes" java/examples/*.java

# A paired handheld, as a user sets one up: `tandem-handheld pair` prints an
# address and a code, `tandem-wearable pair` types the code.
work=$out/work
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
# Waits up to 60 s for "PREFIX..." in FILE; prints the rest of the line.
wait_line() {
  local file=$1 prefix=$2
  for _ in $(seq 600); do
    if line=$(grep -m1 "^$prefix" "$file" 2>/dev/null); then
      echo "${line#"$prefix"}"
      return 0
    fi
    sleep 0.1
  done
  echo "no '$prefix' line in $file:" >&2
  cat "$file" >&2
  return 1
}
echo "== pairing a wearable keystore with a handheld" >&2
"$lib/tandem-handheld" pair --listen 127.0.0.1:0 --timeout 60 --keys "$work/keys/handheld" >"$work/pair.out" 2>"$work/pair.err" &
pair_pid=$!
pids+=("$pair_pid")
pair_addr=$(wait_line "$work/pair.out" "listening on ")
code=$(wait_line "$work/pair.out" "pairing code: ")
"$lib/tandem-wearable" pair --connect "$pair_addr" --code "$code" --keys "$work/keys/wearable" >/dev/null
wait "$pair_pid"

mkdir -p "$work/models"
cp "$mnist" "$real" "$tflite" "$work/models/"
"$lib/tandem-handheld" serve --listen 127.0.0.1:0 --keys "$work/keys/handheld" --models "$work/models" \
  >"$work/serve.out" 2>"$work/serve.err" &
pids+=("$!")
addr=$(wait_line "$work/serve.out" "listening on ")
echo "== handheld serving on $addr (keystore $work/keys/handheld)" >&2

props=(
  -Djava.library.path="$lib"
  -Dtandem.wearable="$lib/tandem-wearable"
  -Dtandem.mnist="$mnist"
  -Dtandem.real="$real" -Dtandem.realInput="$real_input" -Dtandem.realShape="$real_shape"
  -Dtandem.handheld="$addr" -Dtandem.keys="$work/keys/wearable" -Dtandem.link=ble-2m
  -Dtandem.tflite="$tflite" -Dtandem.tfliteInput="$tflite_input"
  -Dtandem.work="$work"
  -Dtandem.only="${TANDEM_JAVA_ONLY:-}"
)
echo "== Java tests" >&2
# -Xcheck:jni only warns (on the JVM's stdout) of a misused JNI call, such as
# local references past the frame's capacity (which ART aborts on): a warning fails the run.
java -Xcheck:jni "${props[@]}" -cp "$out/classes:$out/test-classes" dev.tandem.InterpreterTest 2>&1 |
  tee "$work/java-tests.log"
if grep -E "WARNING: JNI|WARNING in native method" "$work/java-tests.log" >/dev/null; then
  echo "scripts/java.sh: -Xcheck:jni warned (see above): a JNI defect" >&2
  exit 1
fi

echo "== Java example (java/examples/TandemExample.java)" >&2
java -Djava.library.path="$lib" -cp "$out/tandem.jar:$out/example-classes" TandemExample \
  "$mnist" "$addr" "$work/keys/wearable" ble-2m

echo "== scripts/java.sh: all passed in $(($(date +%s) - started)) s" >&2
