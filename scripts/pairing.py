"""Pairs a fresh handheld keystore with a fresh wearable keystore through
the real binaries, as a user would (`tandem-handheld pair` prints a code,
`tandem-wearable pair` types it). Imported by the scripts that start
their own handhelds: serve with `--keys HANDHELD`, run wearables with
`--keys WEARABLE`."""
import contextlib
import os
import shutil
import subprocess
import sys


def pair(root, target, out):
    """Keystores under OUT/keys: returns (handheld_dir, wearable_dir)."""
    keys = os.path.join(out, "keys")
    shutil.rmtree(keys, ignore_errors=True)
    h, w = os.path.join(keys, "handheld"), os.path.join(keys, "wearable")
    p = subprocess.Popen([f"{target}/tandem-handheld", "pair", "--listen", "127.0.0.1:0", "--keys", h,
                          "--timeout", "30"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    addr = p.stdout.readline().strip().removeprefix("listening on ")
    code = p.stdout.readline().strip().removeprefix("pairing code: ")
    r = subprocess.run([f"{target}/tandem-wearable", "pair", "--connect", addr, "--code", code, "--keys", w],
                       cwd=root, capture_output=True, text=True)
    if r.returncode != 0 or p.wait() != 0:
        sys.exit(f"pairing failed: {r.stderr[-1000:]} {p.stderr.read()[-1000:]}")
    return h, w


@contextlib.contextmanager
def handheld(root, target, args):
    """A `tandem-handheld serve --listen 127.0.0.1:0 ARGS` process: yields
    the address it listens on; stopped on leaving the block."""
    p = subprocess.Popen([f"{target}/tandem-handheld", "serve", "--listen", "127.0.0.1:0"] + args, cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = p.stdout.readline().strip()
        if not line.startswith("listening on "):
            sys.exit(f"the handheld did not start: {line}")
        yield line.removeprefix("listening on ")
    finally:
        p.terminate()
        p.wait()
