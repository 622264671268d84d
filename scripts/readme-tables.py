#!/usr/bin/env python3
"""Refreshes the paired-runtime tables of docs/results.md (and the README's
headline demo table) from the JSON lines the demo and the benches wrote
(target/demo, target/paired, target/encodings). A table whose JSON lines
are missing is left as it is. With arguments, only the tables named
(`demo-ble`, `encodings-goal`, ...) are refreshed."""
import json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent


def demo(path):
    out = ["| model | way | frames/s | p50 ms | p95 ms | offloaded | cut (watch/all) | watch mJ/frame | phone mJ/frame |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for line in open(path):
        r = json.loads(line)
        out.append(f"| {r['model']} | {r['way']} | {r['throughput_fps']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                   f"{r['offloaded']}/{r['frames']} | {r['last_prefix_layers']}/{r['layers']} | "
                   f"{r['wearable_j_per_frame'] * 1e3:.2f} | {r['handheld_j_per_frame'] * 1e3:.2f} |")
    return "\n".join(out)


def pipe(paths):
    out = ["| link | model | cut (watch/all) | stages ms (watch, up, phone, down) | tensors alone on the air ms (up, down) | sequential f/s | pipelined f/s (whole run) | pipelined f/s (steady) | ideal f/s | whole run / ideal | **steady / ideal** | pipelined / sequential |",
           "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for path in paths:
        for line in open(path):
            j = json.loads(line)
            st = j['stage_ms']
            out.append(f"| {j['link']} | {j['model']} | {j['cut_prefix_layers']}/{j['layers']} | "
                       f"{st['wearable']:.2f}, {st['up']:.2f}, {st['handheld']:.2f}, {st['down']:.2f} | "
                       f"{j['tensors_air_ms']['up']:.2f}, {j['tensors_air_ms']['down']:.2f} | "
                       f"{j['sequential_fps']:.1f} | {j['pipelined_fps']:.1f} | {j['pipelined_steady_fps']:.1f} | "
                       f"{j['ideal_fps']:.1f} | {j['pipelined_over_ideal']:.3f} | **{j['steady_over_ideal']:.3f}** | "
                       f"{j['pipelined_over_sequential']:.2f} |")
    return "\n".join(out)


def emulation(path):
    out = ["| profile | up achieved / configured | down achieved / configured | one-way delay measured / configured |",
           "|---|---:|---:|---:|"]
    for line in open(path):
        j = json.loads(line)
        out.append(f"| {j['profile']} | {j['up_achieved_bps'] / 1e6:.3f} / {j['up_configured_bps'] / 1e6:.1f} Mbit/s ({j['up_ratio']:.3f}) | "
                   f"{j['down_achieved_bps'] / 1e6:.3f} / {j['down_configured_bps'] / 1e6:.1f} Mbit/s ({j['down_ratio']:.3f}) | "
                   f"{j['delay_mean_ms']:.2f} / {j['delay_configured_ms']:.0f} ms ({j['delay_ratio']:.3f}) |")
    return "\n".join(out)


def loopback(path):
    out = ["| path | GB/s (median of rounds) | rounds | share of raw TCP | goal |", "|---|---:|---|---:|---:|"]
    for line in open(path):
        j = json.loads(line)
        rounds = ", ".join(f"{r:.2f}" for r in j["gb_per_s_rounds"])
        goal = f"≥ {j['goal_ratio']}" if j.get("goal_ratio") else ""
        out.append(f"| {j['path']} | {j['gb_per_s']:.2f} | {rounds} | {j['ratio_to_raw_tcp']:.2f} | {goal} |")
    return "\n".join(out)


def encodings_bench(path):
    """`tandem-bench encodings`' lines on real inputs as one row per (model, cut): each
    encoding's ratio over the cut's tensors (raw over encoded bytes), and
    the lossy ones' largest error."""
    cols = [("shuffle-lz4", "shuffle-lz4", False), ("sparse-lz4", "sparse-lz4", False),
            ("sensor type (u8/i16-lz4)", ("u8-lz4", "i16-lz4"), False), ("f16", "f16", True),
            ("int8", "int8", True), ("int8 per channel", "int8-channel", True), ("int8 + LZ4", "int8-lz4", True),
            ("jpeg-90", "jpeg-90", True), ("jpeg-75", "jpeg-75", True)]
    rows, order = {}, []
    for line in open(path):
        j = json.loads(line)
        if "summary" in j or "skipped" in j or not j["real_input"]:
            continue  # the zoo's random inputs and the light models' ramps: not data to judge on
        key = (j["model"], j["cut"])
        if key not in rows:
            rows[key] = {"input": j["is_model_input"] and j["cut"].startswith("0/"), "enc": {}}
            order.append(key)
        e = rows[key]["enc"].setdefault(j["encoding"], [0, 0, 0.0])
        e[0] += j["raw_bytes"]
        e[1] += j["encoded_bytes"]
        err = j["max_rel_err"]
        e[2] = max(e[2], float("inf") if err is None else err)  # JSON has no inf: null
    out = ["| model | cut (watch/all) | crossing raw KB | " + " | ".join(c[0] for c in cols) + " |",
           "|---|---:|---:|" + "---:|" * len(cols)]
    for key in order:
        r = rows[key]
        cells = []
        for _, names, lossy in cols:
            names = names if isinstance(names, tuple) else (names,)
            found = [r["enc"][n] for n in names if n in r["enc"]]
            if not found:
                cells.append("–")
                continue
            raw, enc, err = found[0]
            err_s = "inf" if err == float("inf") else f"{err:.1e}"
            cells.append(f"{raw / max(enc, 1):.2f}×" + (f" ({err_s})" if lossy else ""))
        raw_kb = r["enc"]["raw"][0] / 1e3 if "raw" in r["enc"] else 0
        cut = key[1] + (" (input)" if r["input"] else "")
        out.append(f"| {key[0]} | {cut} | {raw_kb:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def encodings_speed(path):
    """Each encoding's median encode and decode speed over the tensors of at least 100 KB."""
    speeds = {}
    for line in open(path):
        j = json.loads(line)
        if "summary" in j or "skipped" in j or j["raw_bytes"] < 100_000:
            continue
        speeds.setdefault(j["encoding"], ([], []))
        speeds[j["encoding"]][0].append(j["encode_mb_s"])
        speeds[j["encoding"]][1].append(j["decode_mb_s"])
    med = lambda v: sorted(v)[len(v) // 2]
    out = ["| encoding | tensors | encode MB/s (median) | decode MB/s (median) |", "|---|---:|---:|---:|"]
    for e, (enc, dec) in speeds.items():
        out.append(f"| {e} | {len(enc)} | {med(enc):.0f} | {med(dec):.0f} |")
    return "\n".join(out)


def encodings_goal(path):
    """The tables `scripts/encodings-goal.py` wrote."""
    return path.read_text().strip()


t = root / "target"
def maybe(table, paths):
    """The table from `paths`, or None when one of them is missing."""
    return table(paths) if all(p.exists() for p in paths) else None


tables = {
    "demo-ble": maybe(lambda p: demo(p[0]), [t / "demo/demo-ble2m.jsonl"]),
    # CI writes its Wi-Fi demo beside the other (OUT=target/demo-wifi).
    "demo-wifi": maybe(lambda p: demo(p[0]), [t / "demo/demo-wifigood.jsonl"])
    or maybe(lambda p: demo(p[0]), [t / "demo-wifi/demo-wifigood.jsonl"]),
    "loopback": maybe(lambda p: loopback(p[0]), [t / "paired/loopback.jsonl"]),
    "emulation": maybe(lambda p: emulation(p[0]), [t / "paired/emulation.jsonl"]),
    "pipe": maybe(pipe, [t / f"paired/pipeline-{l}.jsonl" for l in ["none", "wifi-good", "ble-2m"]]),
    "encodings-bench": maybe(lambda p: encodings_bench(p[0]), [t / "encodings/bench.jsonl"]),
    "encodings-speed": maybe(lambda p: encodings_speed(p[0]), [t / "encodings/bench.jsonl"]),
    "encodings-goal": maybe(lambda p: encodings_goal(p[0]), [t / "encodings/goal.md"]),
}
only = set(sys.argv[1:])
unknown = only - set(tables)
if unknown:
    sys.exit(f"unknown tables {sorted(unknown)}; known: {sorted(tables)}")
for page, keys in [(root / "docs/results.md", list(tables)), (root / "README.md", ["demo-ble"])]:
    text = page.read_text()
    for key in [k for k in keys if not only or k in only]:
        table = tables[key]
        if table is None:
            continue
        text, n = re.subn(rf"<!-- {key} -->.*?<!-- /{key} -->", f"<!-- {key} -->\n{table}\n<!-- /{key} -->", text, flags=re.S)
        if n != 1:
            sys.exit(f"marker {key} found {n} times in {page}")
    page.write_text(text)
