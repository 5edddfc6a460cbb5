#!/usr/bin/env bash
# A2A conformance: runs the Node scripts of this directory, which drive the
# official A2A client (@a2a-js/sdk, pinned in package.json), against a real
# `conclave serve`. Exits non-zero if any script fails, if the server logs
# an error or panics, or if it does not stop cleanly. See README.md.
#
#   conformance/a2a/run.sh            # every script
#   conformance/a2a/run.sh council    # some of them
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
server_pid=""

cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "== a2a conformance: node $(node --version), npm $(npm --version 2>/dev/null)"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)

echo "== a2a conformance: go build ./cmd/conclave"
(cd "$root" && go build -o "$tmp/conclave" ./cmd/conclave)

# remote.mjs starts a conclave of its own (the A2A client side).
export CONCLAVE_BIN="$tmp/conclave"

"$tmp/conclave" serve --addr 127.0.0.1:0 --data "$tmp/data" --log-level info 2>"$tmp/server.log" &
server_pid=$!

# The address comes from the log line: msg="conclave listening" addr=HOST:PORT
addr=""
for _ in $(seq 1 300); do
  addr="$(sed -n 's/.*msg="conclave listening" addr=\([^ ]*\).*/\1/p' "$tmp/server.log" | head -n 1)"
  [ -n "$addr" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$tmp/server.log" >&2
    echo "FAIL: conclave serve exited before listening" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$addr" ]; then
  cat "$tmp/server.log" >&2
  echo "FAIL: conclave serve did not report its address within 30 s" >&2
  exit 1
fi
base="http://$addr"

# Wait for /healthz (node's fetch: no curl needed).
if ! node -e '
  const url = process.argv[1] + "/healthz";
  const deadline = Date.now() + 30000;
  (async () => {
    for (;;) {
      try { if ((await fetch(url)).ok) return; } catch {}
      if (Date.now() > deadline) { process.stderr.write("healthz never answered 200\n"); process.exit(1); }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();' "$base"; then
  cat "$tmp/server.log" >&2
  exit 1
fi
echo "== a2a conformance: conclave serve at $base"

if [ "$#" -gt 0 ]; then
  scripts=("$@")
else
  scripts=()
  for f in "$here"/*.mjs; do
    name="$(basename "$f" .mjs)"
    [ "$name" = lib ] || scripts+=("$name")
  done
fi

failed=0
passed=0
for s in "${scripts[@]}"; do
  if node "$here/$s.mjs" "$base"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done

# Stop the server gracefully; it must exit 0.
kill -TERM "$server_pid"
if ! wait "$server_pid"; then
  echo "FAIL: conclave serve did not stop cleanly" >&2
  failed=$((failed + 1))
fi
server_pid=""
if grep -E 'level=ERROR|^panic:|DATA RACE' "$tmp/server.log" >&2; then
  echo "FAIL: conclave serve logged the errors above" >&2
  failed=$((failed + 1))
fi

echo "a2a-conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
