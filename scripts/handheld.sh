# Sourced by the scripts that need a handheld: `start_handheld DIR [ARGS...]`
# starts `target/debug/tandem-handheld serve` on a free loopback port with
# ARGS, logs to DIR/handheld.out and .err, stops it on exit, and sets ADDR
# (or exits with its stderr when it does not start within 10 s).
start_handheld() {
  local dir=$1
  shift
  target/debug/tandem-handheld serve --listen 127.0.0.1:0 "$@" >"$dir/handheld.out" 2>"$dir/handheld.err" &
  HANDHELD=$!
  trap 'kill $HANDHELD 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    grep -q "listening on" "$dir/handheld.out" 2>/dev/null && break
    sleep 0.1
  done
  ADDR=$(sed -n 's/^listening on //p' "$dir/handheld.out")
  [ -n "$ADDR" ] || { echo "the handheld did not start:" >&2; cat "$dir/handheld.err" >&2; exit 1; }
}
