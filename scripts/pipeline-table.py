#!/usr/bin/env python3
"""Runs `tandem-bench pipeline` over each link and prints the results.md
table of pipelined streams (rows between <!-- pipe --> markers).

Usage: scripts/pipeline-table.py [--frames N] [--links none,wifi-good,ble-2m] [--repeats N] [--from DIR]
Needs the dev build (`scripts/test.sh` builds it). Each link's JSON lines
are kept in target/pipeline/LINK.jsonl; `--from DIR` prints the table again
from such files without running anything. With `--link none` both devices
share this host's two cores and a sub-millisecond stage's run lasts a
quarter of a second, so its pipelined run is repeated (3 times unless
`--repeats` says) and the row is the median run's, the range beside it;
over an emulated link the link paces the frames and one run is kept.
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--links", default="none,wifi-good,ble-2m")
    ap.add_argument("--repeats", type=int, help="pipelined runs per row (default: 3 with `none`, else 1)")
    ap.add_argument("--from", dest="saved", help="print the table from DIR/LINK.jsonl, running nothing")
    args = ap.parse_args()
    bench = ROOT / "target/debug/tandem-bench"
    if not args.saved and not bench.exists():
        sys.exit(f"{bench} is missing: build it first (cargo build -p tandem-bench)")
    out = ROOT / "target/pipeline"
    out.mkdir(parents=True, exist_ok=True)
    print("| link | model | cut (watch/all) | stages ms (watch, up, phone, down) | tensors alone on the air ms (up, down) "
          "| sequential f/s | pipelined f/s (whole run) | pipelined f/s (steady) | ideal f/s | whole run / ideal "
          "| **steady / ideal** | pipelined / sequential | offloaded, pipelined | cores busy, pipelined |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    below = []
    for link in args.links.split(","):
        if args.saved:
            lines = (pathlib.Path(args.saved) / f"{link}.jsonl").read_text().splitlines()
        else:
            repeats = args.repeats or (3 if link == "none" else 1)
            run = subprocess.run([str(bench), "pipeline", "--link", link, "--frames", str(args.frames),
                                  "--repeats", str(repeats)],
                                 cwd=ROOT, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"tandem-bench pipeline --link {link} failed:\n{run.stderr[-2000:]}")
            lines = run.stdout.splitlines()
        rows = [json.loads(l) for l in lines if l.startswith("{")]
        if not args.saved:
            (out / f"{link}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for r in rows:
            s, a = r["stage_ms"], r["tensors_air_ms"]
            stages = ", ".join(f"{s[k]:.2f}" for k in ("wearable", "up", "handheld", "down"))
            runs = r.get("steady_over_ideal_runs", [])
            spread = f" ({min(runs):.3f}–{max(runs):.3f}, {len(runs)} runs)" if len(runs) > 1 else ""
            print(f"| {link} | {r['model']} | {r['cut_prefix_layers']}/{r['layers']} | {stages} "
                  f"| {a['up']:.2f}, {a['down']:.2f} | {r['sequential_fps']:.1f} | {r['pipelined_fps']:.1f} "
                  f"| {r['pipelined_steady_fps']:.1f} | {r['ideal_fps']:.1f} | {r['pipelined_over_ideal']:.3f} "
                  f"| **{r['steady_over_ideal']:.3f}**{spread} | {r['pipelined_over_sequential']:.2f} "
                  f"| {r['offloaded']}/{r['frames']} | {r['pipelined_cores_busy']:.2f} of {r['host_cores']} |",
                  flush=True)
            if max(s.values()) >= 0.5 and r["steady_over_ideal"] < r["goal_over_ideal"]:
                mixed = "" if r["offloaded"] in (0, r["frames"]) else f" ({r['offloaded']}/{r['frames']} offloaded)"
                below.append(f"{r['model']} over {link}: {r['steady_over_ideal']:.3f}{mixed}")
    print(f"\nrows with a stage of 0.5 ms or more below the goal: {', '.join(below) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main()
