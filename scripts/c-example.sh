#!/usr/bin/env bash
# Builds Tandem's C library and runs the C example (ffi/examples/hello.c)
# on MNIST, locally; with a handheld address as $1 (see `tandem-handheld
# serve`), split with it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked -q --workspace
target/debug/tandem-models gen mnist >/dev/null
cc -std=c99 -Wall -Werror -I include ffi/examples/hello.c \
  -L target/debug -ltandem_ffi -Wl,-rpath,"$PWD/target/debug" -o target/hello
target/hello models/cache/zoo/mnist.onnx "$@"
