#!/usr/bin/env python3
"""Fetch the ONNX "light" test models for Tandem.

The onnx==1.23.2 wheel ships onnx/backend/test/data/light/light_<name>.onnx and
light_<name>_output_0.pb (expected outputs) but no inputs. ONNX's test runner
generates the input deterministically (Runner.generate_dummy_data with
random=False): for the first non-initializer graph input, unknown dims -> 1,
value = (np.arange(n).reshape(shape) / n).astype(np.float32).

This script:
  1. downloads the wheel with `pip download --no-deps` into <cache>/wheel
     (skipped when the models are already extracted or the wheel is there);
  2. extracts the 9 models and their expected outputs into <cache>/light with
     the standard library's zipfile;
  3. writes light_<name>_input_0.pb next to each model, using onnx's own
     generator when `onnx` is importable. Without onnx it says so and leaves the
     inputs to the Rust side (tandem_models::ensure_models writes any missing
     input with the same formula).

Files are written atomically (temporary file + rename), so concurrent runs are
safe. Usage: python3 models/fetch_light.py [--cache DIR]
"""

import argparse
import glob
import os
import subprocess
import sys
import zipfile

ONNX_VERSION = "1.23.2"
MODELS = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]
WHEEL_PREFIX = "onnx/backend/test/data/light/"


def atomic_write(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def shipped_files():
    for m in MODELS:
        yield f"light_{m}.onnx"
        yield f"light_{m}_output_0.pb"


def find_wheel(wheel_dir):
    wheels = sorted(glob.glob(os.path.join(wheel_dir, f"onnx-{ONNX_VERSION}-*.whl")))
    return wheels[0] if wheels else None


def download_wheel(wheel_dir):
    wheel = find_wheel(wheel_dir)
    if wheel:
        return wheel
    os.makedirs(wheel_dir, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        f"onnx=={ONNX_VERSION}",
        "-d",
        wheel_dir,
    ]
    print("fetch_light: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    wheel = find_wheel(wheel_dir)
    if not wheel:
        sys.exit(f"fetch_light: pip download left no onnx-{ONNX_VERSION} wheel in {wheel_dir}")
    return wheel


def extract(wheel, light_dir):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for f in shipped_files():
            member = WHEEL_PREFIX + f
            if member not in names:
                sys.exit(f"fetch_light: {member} is not in {wheel}")
            atomic_write(os.path.join(light_dir, f), z.read(member))


def write_inputs(light_dir):
    missing = [
        m for m in MODELS if not os.path.exists(os.path.join(light_dir, f"light_{m}_input_0.pb"))
    ]
    if not missing:
        return
    try:
        import onnx
        from onnx import numpy_helper
        from onnx.backend.test.runner import Runner
    except ImportError as e:
        print(
            f"fetch_light: onnx is not importable ({e}); leaving the inputs of "
            f"{', '.join(missing)} to the Rust side",
            file=sys.stderr,
        )
        return
    for m in missing:
        model = onnx.load(os.path.join(light_dir, f"light_{m}.onnx"))
        inits = {i.name for i in model.graph.initializer}
        first = next(i for i in model.graph.input if i.name not in inits)
        value = Runner.generate_dummy_data(first, seed=0, name=m, random=False)
        tensor = numpy_helper.from_array(value, name=first.name)
        atomic_write(os.path.join(light_dir, f"light_{m}_input_0.pb"), tensor.SerializeToString())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", default=os.path.join(here, "cache"), help="cache directory")
    args = ap.parse_args()
    light_dir = os.path.join(args.cache, "light")
    os.makedirs(light_dir, exist_ok=True)
    if not all(os.path.exists(os.path.join(light_dir, f)) for f in shipped_files()):
        wheel = download_wheel(os.path.join(args.cache, "wheel"))
        extract(wheel, light_dir)
    write_inputs(light_dir)
    print(f"fetch_light: light models ready in {light_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
