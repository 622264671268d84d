#!/usr/bin/env python3
"""The dependencies that only run while building, which Cargo.toml builds
unoptimized in the dev profile.

A crate is build-only when no workspace crate reaches it at run time: it is
reached only through a build script's dependencies, a proc macro, or
cbindgen (a dev-dependency whose one use, `ffi/tests/header.rs`, generates
the C header). The features resolved are those CI builds: the defaults and
the BLE transport, on this machine's platform.

  python3 scripts/build_only_crates.py           prints the lines for Cargo.toml
  python3 scripts/build_only_crates.py --check   fails when Cargo.toml's list differs

A crate missing from the list only builds slower; a listed crate that the
runtime uses runs unoptimized, so `--check` fails on both (CI runs it).
"""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run-time crates that Cargo.toml builds unoptimized on purpose (the BLE
# stack: it waits on D-Bus and the radio), not build-only ones.
UNOPTIMIZED_AT_RUN_TIME = {"bluez-generated", "bluez-async", "btleplug", "bluer", "dbus"}
# The packages with the `ble` feature (CI's lint builds it).
BLE = ("tandem", "tandem-wearable", "tandem-handheld")
# Dev-dependencies that only generate code (treated as build-time roots).
CODE_GENERATORS = {"cbindgen"}


def build_only() -> list[str]:
    """Package specs (name, or name@version where several versions resolve)."""
    host = next(
        line.split()[1]
        for line in subprocess.check_output(["rustc", "-vV"], text=True).splitlines()
        if line.startswith("host:")
    )
    meta = json.loads(
        subprocess.check_output(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", host]
            + ["--features", ",".join(f"{p}/ble" for p in BLE)],
            cwd=ROOT,
        )
    )
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    members = set(meta["workspace_members"])

    def proc_macro(pid: str) -> bool:
        return any("proc-macro" in t["kind"] for t in packages[pid]["targets"])

    run_time, build_roots = set(), []
    stack = list(members)
    while stack:
        pid = stack.pop()
        if pid in run_time:
            continue
        run_time.add(pid)
        for dep in nodes[pid]["deps"]:
            kinds = {k["kind"] for k in dep["dep_kinds"]}
            target = dep["pkg"]
            if "build" in kinds:
                build_roots.append(target)
            if kinds & {None, "dev"}:
                generator = proc_macro(target) or packages[target]["name"] in CODE_GENERATORS
                (build_roots if generator else stack).append(target)
    build, stack = set(), build_roots
    while stack:
        pid = stack.pop()
        if pid in build:
            continue
        build.add(pid)
        stack.extend(dep["pkg"] for dep in nodes[pid]["deps"])
    only = build - run_time
    assert only, "no build-only crate found"
    specs = set()
    for pid in only:
        name, version = packages[pid]["name"], packages[pid]["version"]
        # A name alone where every version of it resolved is build-only.
        every = all(other in only for other in nodes if packages[other]["name"] == name)
        specs.add(name if every else f"{name}@{version}")
    return sorted(specs, key=str.lower)


def listed() -> set[str]:
    """Cargo.toml's dev-profile packages at opt-level 0."""
    profile = tomllib.loads((ROOT / "Cargo.toml").read_text())["profile"]["dev"]["package"]
    return {name for name, settings in profile.items() if settings.get("opt-level") == 0}


def main() -> int:
    specs = build_only()
    if "--check" not in sys.argv[1:]:
        for spec in specs:
            print(f'"{spec}".opt-level = 0' if "@" in spec else f"{spec}.opt-level = 0")
        return 0
    have = listed() - UNOPTIMIZED_AT_RUN_TIME
    missing, extra = sorted(set(specs) - have), sorted(have - set(specs))
    for spec in missing:
        print(f"build-only, not unoptimized in Cargo.toml: {spec}", file=sys.stderr)
    for spec in extra:
        print(f"unoptimized in Cargo.toml, but not build-only: {spec}", file=sys.stderr)
    if missing or extra:
        print("update [profile.dev.package] from `python3 scripts/build_only_crates.py`", file=sys.stderr)
        return 1
    print(f"{len(specs)} build-only crates, all unoptimized")
    return 0


if __name__ == "__main__":
    sys.exit(main())
