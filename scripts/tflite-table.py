#!/usr/bin/env python3
"""The README's TFLite table: every model of models/fetch_tflite.py's
manifest through `tandem-wearable split-check` on its real input, with its
outputs compared with LiteRT's (`--expected NAME=FILE.npy` for every
output; they agree when every output is within 1e-3 of its largest
magnitude, or of 0.01 for scores near 0) and sampled cuts checked against
the unsplit run (the split checks' own tolerance); the models the manifest
marks (MediaPipe's custom ops) must be
refused (exit 2, naming the op).

Usage: python3 scripts/tflite-table.py [--cuts N] [--engine tract|onnxruntime|auto]
[--bin target/debug/tandem-wearable] (after `python3 models/fetch_tflite.py`
and a build; `--engine auto` checks every pairing of the two engines, with
$ORT_DYLIB_PATH set). Prints a Markdown
table; exits 1 when a model fails its check or is not refused as expected.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuts", type=int, default=8)
    ap.add_argument("--engine", default="tract")
    ap.add_argument("--bin", default=os.path.join(root, "target", "debug", "tandem-wearable"))
    ap.add_argument("--cache", default=os.path.join(root, "models", "cache", "tflite"))
    args = ap.parse_args()
    manifest = json.load(open(os.path.join(args.cache, "tflite.json")))
    rows = ["| model (wheel) | TFLite KiB | ONNX layers | outputs vs LiteRT: worst \\|d\\| / max \\|LiteRT\\| "
            "(\\|d\\|, max \\|LiteRT\\| where that is below 0.01) | cuts checked | split: worst / tolerance | result |",
            "|---|---:|---:|---:|---:|---:|---|"]
    failed = []
    for m in manifest["models"]:
        path = os.path.join(args.cache, m["file"])
        kib = os.path.getsize(path) // 1024
        wheel = f"{m['package']} {m['version']}"
        if m["refuse"]:
            o = subprocess.run([args.bin, "inspect", "--model", path], capture_output=True, text=True)
            refused = o.returncode == 2 and m["refuse"] in o.stderr
            msg = o.stderr.strip().splitlines()[-1] if o.stderr.strip() else ""
            msg = msg[msg.find("cannot translate"):] if "cannot translate" in msg else msg
            rows.append(f"| {m['name']} ({wheel}) | {kib} | | | | | "
                        f"{'refused: ' + msg.replace('|', '/') if refused else 'NOT REFUSED (exit %d)' % o.returncode} |")
            if not refused:
                failed.append(m["name"])
            continue
        import numpy as np

        cmd = [args.bin, "split-check", "--model", path, "--cuts", str(args.cuts), "--engine", args.engine]
        for name, f in zip(m["input_names"], m["inputs"]):
            x = np.load(os.path.join(args.cache, f))
            # Symbolic dimensions (the audio models' batch and length) take the input's.
            cmd += ["--input", f"{name}={os.path.join(args.cache, f)}",
                    "--input-shape", f"{name}={','.join(str(d) for d in x.shape)}"]
        for name, f in zip(m["output_names"], m["outputs"]):
            cmd += ["--expected", f"{name}={os.path.join(args.cache, f)}"]
        t = time.time()
        o = subprocess.run(cmd, capture_output=True, text=True)
        took = time.time() - t
        try:
            j = json.loads(o.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            rows.append(f"| {m['name']} ({wheel}) | {kib} | | | | | FAILED (exit {o.returncode}): "
                        f"{o.stderr.strip().splitlines()[-1] if o.stderr.strip() else ''} |")
            failed.append(m["name"])
            continue
        layers = subprocess.run([args.bin, "inspect", "--model", path] + cmd[cmd.index("--input-shape"):][:2],
                                capture_output=True, text=True)
        found = re.search(r": (\d+) layers", layers.stdout)
        n_layers = found.group(1) if found else "?"
        worst = max(j["expected"], key=lambda c: c["max_abs_over_scale"])
        vs_litert = f"{worst['max_abs_over_scale']:.1e}"
        if worst["scale"] < 0.01:
            vs_litert += f" ({worst['max_abs']:.1e}, {worst['scale']:.1e})"
        split_ok = j["ok"] or (j.get("expected_output_ok") is False and j["worst_tolerance_ratio"] <= 1.0)
        # Agreement with LiteRT: every output within 1e-3 of its scale
        # (a scale of at least 0.01: scores near 0 are compared absolutely).
        litert_ok = all(c["max_abs"] <= 1e-3 * max(c["scale"], 0.01) for c in j["expected"])
        rows.append(f"| {m['name']} ({wheel}) | {kib} | {n_layers} | {vs_litert} | "
                    f"{j['cuts_checked']} | {j['worst_tolerance_ratio']:.3f} | "
                    f"{'matches LiteRT' if litert_ok else 'DIFFERS FROM LiteRT'}, "
                    f"{'splits exactly' if split_ok else 'SPLIT MISMATCH'} ({took:.0f} s) |")
        if not (split_ok and litert_ok):
            failed.append(m["name"])
    print("\n".join(rows))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
