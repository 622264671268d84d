#!/usr/bin/env python3
"""Issue 14's goal, measured: link encodings against raw tensors, on real processes.

For each model (the demo's zoo models on random inputs; the real models on
their real inputs, with their cards) and each emulated link, one
`tandem-wearable stream` per way against one `tandem-handheld serve` (which
holds the models, so nothing is pushed), one frame at a time:

  wearable-only       every layer on the watch
  handheld-raw        every layer on the phone, raw input (DeepWear's offload)
  tandem-raw          the planner, raw tensors (DeepWear-style split)
  tandem-lossless     the planner, lossless encodings (the default: bit-exact)
  handheld-compressed every layer on the phone, the input in its best
                      encoding within the accuracy budget (SC2's baseline)
  tandem-lossy        the planner, lossy encodings within the budget

The watch is watch-w5 dilated 8x; the phone is this host (pixel-8-pro).
Latency is measured wall-clock (p50 of the measured frames); energy per
frame is model-based (busy time x profile power + radio time x radio power).

Checks, per model and link (5% tolerance for this VM's noise):
  lossless: tandem-lossless <= min(wearable-only, handheld-raw) * 1.05
  lossy:    tandem-lossy <= min(wearable-only, handheld-raw, handheld-compressed) * 1.05

Usage: scripts/encodings-goal.py [--links ble-2m,wifi-good] [--frames 10]
       [--models NAME,...] [--out target/encodings]
(the binaries built, as by scripts/demo.sh; the real models fetched, as by
scripts/test.sh, else only the zoo models run)
Writes OUT/goal.jsonl (one line per run) and OUT/goal.md (the tables).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import pairing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = os.path.join(ROOT, "target", "debug")
ZOO = ["text_rnn_lstm", "mnist", "deepear", "mobilenet_v1_1.0_128"]
WAYS = ["wearable-only", "handheld-raw", "tandem-raw", "tandem-lossless", "handheld-compressed", "tandem-lossy"]
# The accuracy budget per real model kind: a classifier's or detector's
# answer (argmax: per row of the last axis; for YOLOv8's [1, 4 + classes,
# anchors] the best anchor of each box coordinate and class), else 1%.
ARGMAX_KINDS = {"yolo", "keyword", "ocr_cls"}


def way_args(way, budget):
    lossy = ["--encodings", "lossy", "--accuracy", budget]
    return {
        "wearable-only": ["--placement", "wearable"],
        "handheld-raw": ["--placement", "handheld", "--encodings", "raw"],
        "tandem-raw": ["--placement", "auto", "--encodings", "raw"],
        "tandem-lossless": ["--placement", "auto", "--encodings", "lossless"],
        "handheld-compressed": ["--placement", "handheld"] + lossy,
        "tandem-lossy": ["--placement", "auto"] + lossy,
    }[way]


def models(names):
    """(name, model file, stream args, accuracy budget, handheld's models dir)."""
    out = []
    zoo = [m for m in ZOO if not names or m in names]
    if zoo:
        subprocess.run([f"{T}/tandem-models", "gen", "--out", "models/cache/zoo"] + zoo, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    for m in zoo:
        out.append((m, f"models/cache/zoo/{m}.onnx", [], "rel:0.01", "models/cache/zoo"))
    manifest_path = os.path.join(ROOT, "models/cache/real/real.json")
    if not os.path.exists(manifest_path):
        print("(the real models are not fetched: scripts/test.sh fetches them)", file=sys.stderr)
        return out
    for e in json.load(open(manifest_path))["models"]:
        if not e["inputs"]:
            continue  # refused by tract (Silero VAD's If): nothing to run
        args = []
        for spec in e["input_shapes"]:
            args += ["--input-shape", spec]
        args += ["--input", f"models/cache/real/{e['inputs'][0]}"]
        card = f"models/cards/{e['name']}.toml"
        if card_fits(card, e["input_shapes"]):
            args += ["--card", card]
        budget = "argmax" if e["kind"] in ARGMAX_KINDS else "rel:0.01"
        out.append((e["name"], f"models/cache/real/{e['file']}", args, budget, "models/cache/real"))
    return [m for m in out if not names or m[0] in names]


def card_fits(card, specs):
    """Whether the model's card exists and feeds the shapes the real input has
    (openWakeWord's mel card feeds 1760-sample chunks; its test input is 4 s)."""
    import tomllib

    path = os.path.join(ROOT, card)
    if not os.path.exists(path):
        return False
    with open(path, "rb") as f:
        inputs = tomllib.load(f).get("input", [])
    want = {n: [int(d) for d in dims.split(",")] for n, dims in (s.split("=") for s in specs)}
    return all(i.get("shape") in (None, want.get(i["name"])) for i in inputs)


def serve(models_dir, log, keys):
    p = subprocess.Popen([f"{T}/tandem-handheld", "serve", "--listen", "127.0.0.1:0", "--models", models_dir,
                          "--keys", keys],
                         stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT)
    line = p.stdout.readline()
    if not line.startswith("listening on "):
        sys.exit(f"the handheld did not start: {line}")
    return p, line.split()[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", default="ble-2m,wifi-good")
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "encodings"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    todo = models([n for n in args.models.split(",") if n])
    log = open(os.path.join(args.out, "processes.err"), "w")
    rows = []
    started = time.time()
    handhelds = {}
    handheld_keys, wearable_keys = pairing.pair(ROOT, T, args.out)
    try:
        for link in args.links.split(","):
            for name, path, extra, budget, models_dir in todo:
                if models_dir not in handhelds:
                    handhelds[models_dir] = serve(models_dir, log, handheld_keys)
                addr = handhelds[models_dir][1]
                for way in WAYS:
                    cmd = [f"{T}/tandem-wearable", "stream", "--model", path, "--connect", addr, "--keys", wearable_keys, "--link", link,
                           "--profile", "watch-w5", "--slowdown", "profile", "--frames", str(args.frames),
                           "--warmup", "1", "--no-pipeline"] + extra + way_args(way, budget)
                    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                    log.write(r.stderr)
                    if r.returncode != 0 or not r.stdout.strip():
                        sys.exit(f"{name} {way} over {link} failed:\n{r.stderr[-2000:]}")
                    j = json.loads(r.stdout.strip().splitlines()[-1])
                    j.update(way=way, link=link, budget=budget if "lossy" in way_args(way, budget) else None)
                    rows.append(j)
                    print(f"[{time.time() - started:6.0f} s] {link} {name} {way}: p50 {j['p50_ms']:.1f} ms, "
                          f"{j['offloaded']}/{j['frames']} offloaded", file=sys.stderr, flush=True)
    finally:
        for p, _ in handhelds.values():
            p.terminate()
    with open(os.path.join(args.out, "goal.jsonl"), "w") as f:
        for j in rows:
            f.write(json.dumps(j) + "\n")
    with open(os.path.join(args.out, "goal.md"), "w") as f:
        f.write(report(rows, args.frames))
    print(report(rows, args.frames))


def same_cut(ways, tandem, best_p50):
    """Whether Tandem ran the best baseline's cut (every layer where it ran
    them, each frame): then their difference is this VM's noise."""
    best = next(w for w in WAYS if ways[w]["p50_ms"] == best_p50)
    a, b = ways[tandem], ways[best]
    return (a["last_prefix_layers"], a["offloaded"] > 0) == (b["last_prefix_layers"], b["offloaded"] > 0) \
        and a["cut_switches"] == 0


def report(rows, frames):
    out = []
    by = {}
    for j in rows:
        by.setdefault((j["link"], j["model"]), {})[j["way"]] = j
    verdicts = {"lossless": [0, 0], "lossy": [0, 0], "split": []}
    for link in dict.fromkeys(j["link"] for j in rows):
        out.append(f"\n#### {link}: p50 ms per frame (watch mJ per frame, model-based); * = offloaded, "
                   f"the cut as watch layers / all\n")
        out.append("| model | " + " | ".join(WAYS) + " | lossless goal | lossy goal |")
        out.append("|---|" + "---:|" * len(WAYS) + "---|---|")
        for (l, model), ways in by.items():
            if l != link or len(ways) != len(WAYS):
                continue
            p50 = {w: ways[w]["p50_ms"] for w in WAYS}
            cells = []
            for w in WAYS:
                j = ways[w]
                cut = f"{j['last_prefix_layers']}/{j['layers']}"
                mark = "*" if j["offloaded"] else ""
                cells.append(f"{p50[w]:.1f}{mark} ({j['wearable_j_per_frame'] * 1e3:.1f}) {cut}")
            best_raw = min(p50["wearable-only"], p50["handheld-raw"])
            best_all = min(best_raw, p50["handheld-compressed"])
            ok1 = p50["tandem-lossless"] <= best_raw * 1.05 or same_cut(ways, "tandem-lossless", best_raw)
            ok2 = p50["tandem-lossy"] <= best_all * 1.05 or same_cut(ways, "tandem-lossy", best_all)
            verdicts["lossless"][0 if ok1 else 1] += 1
            verdicts["lossy"][0 if ok2 else 1] += 1
            lossy = ways["tandem-lossy"]
            if 0 < lossy["last_prefix_layers"] < lossy["layers"] and p50["tandem-lossy"] < best_all:
                verdicts["split"].append(f"{model} over {link}")
            g1 = f"{'met' if ok1 else 'MISSED'} ({p50['tandem-lossless'] / best_raw:.2f}x)"
            g2 = f"{'met' if ok2 else 'MISSED'} ({p50['tandem-lossy'] / best_all:.2f}x)"
            out.append(f"| {model} | " + " | ".join(cells) + f" | {g1} | {g2} |")
    out.append(f"\n{frames} measured frames per run after 1 warm-up; goal ratios are Tandem's p50 over the best "
               f"baseline's (met: at most 1.05, or the same cut as that baseline, where the difference is noise).")
    out.append(f"Lossless goal met in {verdicts['lossless'][0]} of {sum(verdicts['lossless'])} (model, link) pairs; "
               f"lossy goal in {verdicts['lossy'][0]} of {sum(verdicts['lossy'])}.")
    split = ", ".join(verdicts["split"]) or "none"
    out.append(f"Split with lossy encodings and faster than all three baselines: {split}.")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
