#!/bin/sh
# Regenerates src/op_names.rs (crate tandem-tflite-schema) from schema.fbs.
#
# schema.fbs is TensorFlow's TFLite schema (Apache-2.0), from
# tensorflow/compiler/mlir/lite/schema/schema.fbs; the copy here was taken from
# the same path in github.com/tensorflow/tflite-micro at commit
# 90b983c2b3f1480642e040bbd2ddb37b998f3424 (2026-08-20).
#
# The readers themselves (the 2.8 MB planus generates) are not committed:
# build.rs generates them into OUT_DIR at build time.
set -eu
cd "$(dirname "$0")"
{
    echo "//! The names of TFLite's builtin operators by code, taken from schema.fbs by"
    echo "//! tflite/schema/regenerate.sh (do not edit)."
    echo
    echo "/// The schema's name of builtin operator \`code\` (\`CONV_2D\`)."
    echo "pub fn builtin_name(code: i32) -> Option<&'static str> {"
    echo "    Some(match code {"
    sed -n '/^enum BuiltinOperator/,/^}/p' schema.fbs \
        | sed -nE 's/^ *([A-Z0-9_]+) *= *([0-9]+).*/        \2 => "\1",/p'
    echo "        _ => return None,"
    echo "    })"
    echo "}"
} > src/op_names.rs
