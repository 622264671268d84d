#!/usr/bin/env python3
"""What a cut switch costs a stream, with and without building plans ahead.

PP-OCR's int8 classifier streams at 5 frames/s over an emulated Wi-Fi link
whose rate steps 5 -> 1.3 -> 0.3 -> 5 Mbit/s (Tandem's best cut differs at
5 and at 1.3 Mbit/s: two offloading cuts, then the watch alone, then back),
against one `tandem-handheld serve` holding the model. Two ways, each run
twice, interleaved, the same frames:

  ahead   Tandem's default: a new cut's plans are built in the background on
          both sides (the planner's runners-up too) while frames keep running
          at the cut in force; the switch happens once both are ready
  inline  --no-prepare-ahead: the first frame at a new cut builds its plans
          (the wearable's prefix inside the frame, the handheld's suffix
          before it answers), as the other strategies do

Per run: latency p50 / p95 / max, cut switches, the longest wait from a
decision to the first frame at its cut, and plan building inside frames on
the watch. Latency is wall-clock on this VM (the watch dilated 8x).

Usage: scripts/switch-stall.py [--out target/switch-stall] [--frames 150]
(the binaries built, as by scripts/demo.sh; the real models fetched, as by
scripts/test.sh). Writes OUT/runs.jsonl, OUT/frames/*.jsonl and OUT/report.md.
"""
import argparse
import json
import os
import subprocess
import sys

import pairing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = os.path.join(ROOT, "target", "debug")
MODEL = "ppocr_cls_int8"
SCHEDULE = "# Wi-Fi stepping down and back (seconds up_mbit)\n0 5\n8 1.3\n16 0.3\n24 5\n"
WAYS = {"ahead": [], "inline": ["--no-prepare-ahead"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="target/switch-stall")
    ap.add_argument("--frames", type=int, default=150)
    a = ap.parse_args()
    out = os.path.join(ROOT, a.out)
    os.makedirs(os.path.join(out, "frames"), exist_ok=True)
    manifest = os.path.join(ROOT, "models/cache/real/real.json")
    if not os.path.exists(manifest):
        sys.exit("the real models are not fetched: run scripts/test.sh first")
    entry = next(e for e in json.load(open(manifest))["models"] if e["name"] == MODEL)
    args = []
    for spec in entry["input_shapes"]:
        args += ["--input-shape", spec]
    args += ["--input", f"models/cache/real/{entry['inputs'][0]}"]
    schedule = os.path.join(out, "schedule.txt")
    open(schedule, "w").write(SCHEDULE)
    runs = []
    handheld_keys, wearable_keys = pairing.pair(ROOT, T, out)
    for run in (1, 2):
        for way, extra in WAYS.items():
            # A fresh handheld per run: no suffix plan is cached from an earlier run.
            with pairing.handheld(ROOT, T, ["--models", "models/cache/real", "--keys", handheld_keys]) as addr:
                frames = os.path.join(out, "frames", f"{way}-run{run}.jsonl")
                cmd = [f"{T}/tandem-wearable", "stream", "--model", f"models/cache/real/{MODEL}.onnx",
                       "--connect", addr, "--keys", wearable_keys, "--link", "wifi-good", "--schedule", schedule,
                       "--profile", "watch-w5", "--slowdown", "profile", "--strategy", "tandem",
                       "--fps", "5", "--frames", str(a.frames), "--warmup", "1",
                       "--frames-out", frames] + extra + args
                r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{way} run {run} failed: {r.stderr[-2000:]}")
            s = json.loads(r.stdout.strip().splitlines()[-1])
            lat = [json.loads(l)["latency_ms"] for l in open(frames)]
            row = {"way": way, "run": run, "p50_ms": s["p50_ms"], "p95_ms": s["p95_ms"],
                   "max_ms": max(lat), "cut_switches": s["cut_switches"],
                   "switch_wait_max_ms": s["switch_wait_max_ms"], "plan_build_ms": s["plan_build_ms"],
                   "plan_build_max_ms": s["plan_build_max_ms"], "offloaded": s["offloaded"],
                   "frames": s["frames"]}
            runs.append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(out, "runs.jsonl"), "w") as f:
        for r in runs:
            f.write(json.dumps(r) + "\n")
    md = ("| way | run | p50 ms | p95 ms | max ms | cut switches | longest switch wait ms | "
          "plan building in frames ms (most in one) | offloaded / frames |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in runs:
        md += (f"| {r['way']} | {r['run']} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['max_ms']:.1f} | "
               f"{r['cut_switches']} | {r['switch_wait_max_ms']:.0f} | {r['plan_build_ms']:.0f} "
               f"({r['plan_build_max_ms']:.0f}) | {r['offloaded']} / {r['frames']} |\n")
    open(os.path.join(out, "report.md"), "w").write(md)
    print(md)


if __name__ == "__main__":
    main()
