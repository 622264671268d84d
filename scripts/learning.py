#!/usr/bin/env python3
"""Predictions that learn, over time: a stream against a handheld whose
profile lies (issue 17's online evolution), and its figure.

The handheld runs suffixes 32x slower than this host (`--slowdown 32`) but
sends a profile 32x faster than that (`--profile-scale 0.03125`): it
claims this host's speed. The watch runs 16x slower than this host.
MobileNet v1 0.25 at 128, FRAMES frames one at a time, every frame on the
handheld, over loopback TCP with paired keys. The wearable's per-frame
predictions start from the lie and learn from each measured frame.

Usage: scripts/learning.py [--out target/learning] [--frames 60]
        [--figure docs/img/learning]
(it builds the three binaries it runs, in the dev profile, as
scripts/demo.sh and scripts/test.sh do). Writes OUT/frames.jsonl,
OUT/errors.jsonl, the figure FIGURE.svg and .png, and prints the stream's
summary line (`prediction_error_first_pct`, `_last_pct`).
"""
import argparse
import json
import os
import subprocess
import sys

import pairing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = os.path.join(ROOT, "target", "debug")
MODEL = "models/cache/zoo/mobilenet_v1_0.25_128.onnx"




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="target/learning")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--figure", default="docs/img/learning")
    a = ap.parse_args()
    out = os.path.join(ROOT, a.out)
    os.makedirs(out, exist_ok=True)
    subprocess.run(["cargo", "build", "--locked", "-p", "tandem-wearable", "-p", "tandem-handheld", "-p",
                    "tandem-bench"], cwd=ROOT, check=True)
    if not os.path.exists(os.path.join(ROOT, MODEL)):
        sys.exit(f"{MODEL} is missing: run scripts/test.sh (or scripts/demo.sh) first")
    handheld_keys, wearable_keys = pairing.pair(ROOT, T, out)
    frames = os.path.join(out, "frames.jsonl")
    serve = ["--models", "models/cache/zoo", "--keys", handheld_keys, "--slowdown", "32",
             "--profile-scale", "0.03125"]
    with pairing.handheld(ROOT, T, serve) as addr:
        r = subprocess.run([f"{T}/tandem-wearable", "stream", "--model", MODEL, "--connect", addr,
                            "--keys", wearable_keys, "--frames", str(a.frames), "--warmup", "0",
                            "--slowdown", "16", "--placement", "handheld", "--no-pipeline",
                            "--frames-out", frames], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"the stream failed: {r.stderr[-2000:]}")
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    fig_dir, name = os.path.split(os.path.join(ROOT, a.figure))
    p = subprocess.run([f"{T}/tandem-bench", "plot-learning", "--frames", frames, "--out", fig_dir, "--name", name],
                       cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"plot-learning failed: {p.stderr[-2000:]}")
    open(os.path.join(out, "errors.jsonl"), "w").write(p.stdout)
    keep = ("frames", "offloaded", "p50_ms", "prediction_error_first_pct", "prediction_error_last_pct")
    print(json.dumps({k: summary.get(k) for k in keep}))
    for line in p.stdout.splitlines()[:4]:
        print(line)


if __name__ == "__main__":
    main()
