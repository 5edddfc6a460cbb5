#!/usr/bin/env bash
# Compiles the generated TypeScript declarations of the event catalogue
# (docs/schema/events.d.ts) and a client that narrows events by type, with
# the pinned TypeScript compiler, under --strict.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
npm ci --no-audit --no-fund --loglevel=error
./node_modules/.bin/tsc --version
./node_modules/.bin/tsc --strict --noEmit --module nodenext --moduleResolution nodenext ../../docs/schema/events.d.ts client.ts
echo "schema check: docs/schema/events.d.ts and client.ts compile"
