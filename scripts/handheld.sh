# Sourced by the scripts that need a handheld: `start_handheld DIR [ARGS...]`
# pairs a fresh handheld keystore (DIR/keys/handheld) with a fresh wearable
# keystore (DIR/keys/wearable) on the code `tandem-handheld pair` prints, as
# a user would, then starts `target/debug/tandem-handheld serve` on a free
# loopback port with ARGS and that keystore (it serves paired wearables
# only, over encrypted links). It logs to DIR/handheld.out and .err, stops
# the handheld on exit, and sets ADDR, and KEYS for the wearable's `--keys`
# (or exits with the handheld's stderr when something fails within 10 s).
wait_line() { # FILE PREFIX: the rest of the first line of FILE starting with PREFIX
  local v=
  for _ in $(seq 100); do
    v=$(sed -n "s/^$2//p" "$1" 2>/dev/null | head -n 1)
    [ -n "$v" ] && break
    sleep 0.1
  done
  echo "$v"
}

start_handheld() {
  local dir=$1
  shift
  rm -rf "$dir/keys"
  mkdir -p "$dir"
  target/debug/tandem-handheld pair --listen 127.0.0.1:0 --keys "$dir/keys/handheld" --timeout 30 \
    >"$dir/pair.out" 2>"$dir/pair.err" &
  local pairing=$! addr code
  addr=$(wait_line "$dir/pair.out" "listening on ")
  code=$(wait_line "$dir/pair.out" "pairing code: ")
  [ -n "$code" ] || { echo "the handheld did not start pairing:" >&2; cat "$dir/pair.err" >&2; exit 1; }
  target/debug/tandem-wearable pair --connect "$addr" --code "$code" --keys "$dir/keys/wearable" >&2
  wait $pairing || { echo "pairing failed:" >&2; cat "$dir/pair.err" >&2; exit 1; }
  KEYS=$dir/keys/wearable
  target/debug/tandem-handheld serve --listen 127.0.0.1:0 --keys "$dir/keys/handheld" "$@" \
    >"$dir/handheld.out" 2>"$dir/handheld.err" &
  HANDHELD=$!
  trap 'kill $HANDHELD 2>/dev/null || true' EXIT
  ADDR=$(wait_line "$dir/handheld.out" "listening on ")
  [ -n "$ADDR" ] || { echo "the handheld did not start:" >&2; cat "$dir/handheld.err" >&2; exit 1; }
}
