#!/usr/bin/env bash
# Runs the AG-UI conformance scripts against a real `conclave serve`.
#
#   cd conformance/agui && npm ci && ./run.sh
#
# Builds the binary from this checkout, starts it on a free loopback port,
# waits for /healthz, runs every scenario with node, stops the server and
# exits non-zero if any scenario failed. Works offline once `npm ci` has
# installed the pinned @ag-ui/client (it runs `npm ci` itself when
# node_modules is missing).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
pid=""

cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

if [ ! -d "$here/node_modules/@ag-ui/client" ]; then
  (cd "$here" && npm ci --no-audit --no-fund)
fi

echo "== building conclave"
(cd "$root" && go build -o "$tmp/conclave" ./cmd/conclave)

echo "== starting conclave serve"
"$tmp/conclave" serve --addr 127.0.0.1:0 --data "$tmp/data" --log-level info 2>"$tmp/server.log" &
pid=$!
addr=""
for _ in $(seq 1 200); do
  addr="$(sed -n 's/.*msg="conclave listening" addr=\([^ ]*\).*/\1/p' "$tmp/server.log" | head -n1)"
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log"; echo "conclave serve exited"; exit 1; }
  sleep 0.05
done
[ -n "$addr" ] || { cat "$tmp/server.log"; echo "conclave serve did not report its address"; exit 1; }
url="http://$addr"

healthy=""
for _ in $(seq 1 100); do
  if node -e 'fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$url/healthz"; then
    healthy=1
    break
  fi
  sleep 0.05
done
[ -n "$healthy" ] || { cat "$tmp/server.log"; echo "$url/healthz never answered 200"; exit 1; }
echo "conclave serve at $url"

passed=0
failed=0
for script in council.mjs parallel.mjs abort.mjs hitl.mjs features.mjs files.mjs; do
  echo "== node $script"
  if (cd "$here" && node "$script" "$url"); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done

if [ "$failed" -gt 0 ]; then
  echo "== server log"
  cat "$tmp/server.log"
fi
echo "agui conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
