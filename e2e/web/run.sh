#!/usr/bin/env bash
# Runs the dashboard's end-to-end tests: headless Chromium (Debian's
# `chromium` package, never a downloaded browser) driven by the pinned
# playwright-core, against real `conclave serve` processes.
#
#   bash e2e/web/run.sh [scenario…]     # start hitl remote abort crash auth scale files … (default: all)
#
# Builds the binary from this checkout, runs dashboard.mjs (which starts,
# kills -9 and restarts the servers it needs), and prints the folder of
# screenshots and bench.json (CI artifacts: set E2E_WEB_OUT to choose it).
# UPDATE_DOCS_SCREENSHOT=1 also copies the dashboard's screenshot to
# docs/dashboard.png. Works offline once `npm ci` has installed
# playwright-core (it runs `npm ci` itself when node_modules is missing).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
out="${E2E_WEB_OUT:-$root/e2e/web/artifacts}"

chromium="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$chromium" ] || { echo "no Chromium at $chromium: apt-get install -y chromium"; exit 1; }
"$chromium" --version 2>/dev/null || true

if [ ! -d "$here/node_modules/playwright-core" ]; then
  (cd "$here" && npm ci --no-audit --no-fund)
fi

echo "== the reducer's unit tests (node --test)"
(cd "$here" && node --test state.test.mjs timeline.test.mjs interrupts.test.mjs)

echo "== building conclave"
(cd "$root" && go build -o "$tmp/conclave" ./cmd/conclave && go build -o "$tmp/keygen" ./e2e/web/keygen)

docs=""
if [ -n "${UPDATE_DOCS_SCREENSHOT:-}" ]; then docs="$root/docs/dashboard.png"; fi
echo "== screenshots: $out"
cd "$here"
KEYGEN="$tmp/keygen" UPDATE_DOCS_SCREENSHOT="$docs" CHROMIUM="$chromium" node dashboard.mjs "$tmp/conclave" "$out" "$@"
