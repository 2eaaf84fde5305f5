#!/usr/bin/env bash
# The TypeScript client's tests (clients/typescript): compiles it with Debian's tsc, then runs
# its Node tests (every conformance vector, and the replica against real `deltasnap serve`
# processes) and its browser suite in headless Chromium (clients/typescript/test/browser.py).
# Needs the deltasnap binary of the Swift build: Scripts/test.sh runs this after building.
#   Scripts/test-typescript.sh [path/to/deltasnap]
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh --test
. Scripts/lib/selenium-venv.sh
DELTASNAP_BIN="${1:-${DELTASNAP_BIN:-$(swift build --show-bin-path)/deltasnap}}"
export DELTASNAP_BIN="$(realpath "$DELTASNAP_BIN")"
[ -x "$DELTASNAP_BIN" ] || { echo "test-typescript.sh: no deltasnap at $DELTASNAP_BIN: build it first (swift build)" >&2; exit 1; }
node_major=$(node --version | sed 's/^v\([0-9]*\).*/\1/')
[ "$node_major" -ge 20 ] || { echo "test-typescript.sh: Node 20 or newer is needed (found $(node --version)); install it from nodejs.org or NodeSource" >&2; exit 1; }
cd clients/typescript
rm -rf dist
tsc -p .
echo "test-typescript.sh: Node $(node --version), tsc $(tsc --version | cut -d' ' -f2)"
node --test dist/test/*.test.js
"$venv/bin/python" test/browser.py "$DELTASNAP_BIN"
