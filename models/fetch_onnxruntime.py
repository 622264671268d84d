#!/usr/bin/env python3
"""Fetch onnxruntime's shared library for Tandem's second engine.

The onnxruntime==1.20.1 wheel on PyPI ships the C library the `ort` crate
loads at run time, as onnxruntime/capi/libonnxruntime.so.1.20.1. This script:
  1. downloads the wheel for this machine with `pip download --no-deps` into
     <cache>/wheel (skipped when it is there), and checks its SHA-256 against
     the pins below (a wheel with no pin for this platform is refused);
  2. extracts the library, its LICENSE (MIT) and ThirdPartyNotices.txt into
     <cache>/onnxruntime with the standard library's zipfile.

Files are written atomically (temporary file + rename).
Usage: python3 models/fetch_onnxruntime.py [--cache DIR]
"""

import argparse
import glob
import hashlib
import os
import subprocess
import sys
import zipfile

VERSION = "1.20.1"
LIBRARY = f"libonnxruntime.so.{VERSION}"
# SHA-256 of each wheel this project has used, by file name.
PINS = {
    "onnxruntime-1.20.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl":
        "5eec64c0269dcdb8d9a9a53dc4d64f87b9e0c19801d9321246a53b7eb5a7d1bc",
}
MEMBERS = {
    f"onnxruntime/capi/{LIBRARY}": LIBRARY,
    "onnxruntime/LICENSE": "LICENSE",
    "onnxruntime/ThirdPartyNotices.txt": "ThirdPartyNotices.txt",
}


def atomic_write(path, data):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def find_wheel(wheel_dir):
    wheels = sorted(glob.glob(os.path.join(wheel_dir, f"onnxruntime-{VERSION}-*.whl")))
    return wheels[0] if wheels else None


def download_wheel(wheel_dir):
    wheel = find_wheel(wheel_dir)
    if wheel:
        return wheel
    os.makedirs(wheel_dir, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           f"onnxruntime=={VERSION}", "-d", wheel_dir]
    print("fetch_onnxruntime: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    wheel = find_wheel(wheel_dir)
    if not wheel:
        sys.exit(f"fetch_onnxruntime: pip download left no onnxruntime-{VERSION} wheel in {wheel_dir}")
    return wheel


def check_pin(wheel):
    name = os.path.basename(wheel)
    want = PINS.get(name)
    if want is None:
        sys.exit(f"fetch_onnxruntime: no SHA-256 pin for {name} (pinned: {', '.join(PINS)})")
    with open(wheel, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != want:
        sys.exit(f"fetch_onnxruntime: {name} has SHA-256 {got}, pinned {want}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", default=os.path.join(here, "cache"), help="cache directory")
    args = ap.parse_args()
    out = os.path.join(args.cache, "onnxruntime")
    if os.path.exists(os.path.join(out, LIBRARY)):
        return
    wheel = download_wheel(os.path.join(args.cache, "wheel"))
    check_pin(wheel)
    os.makedirs(out, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        # The library last: its presence says the rest is there.
        for member, target in sorted(MEMBERS.items(), key=lambda m: m[1] == LIBRARY):
            if member not in names:
                sys.exit(f"fetch_onnxruntime: {member} is not in {wheel}")
            atomic_write(os.path.join(out, target), z.read(member))
    print(f"fetch_onnxruntime: {os.path.join(out, LIBRARY)}", file=sys.stderr)


if __name__ == "__main__":
    main()
