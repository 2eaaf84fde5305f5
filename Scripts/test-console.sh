#!/usr/bin/env bash
# The operator's console in headless Chromium (Tests/Console/console_browser.py), against the
# deltasnap just built: once on SQLite, once on PostgreSQL (Scripts/postgres.sh's server, database
# deltasnap_console, with a second server writing to it). Scripts/test.sh runs it after the Swift tests.
#   Scripts/test-console.sh [path/to/deltasnap] [--screenshots DIR]   (DIR: docs/console refreshes the docs' pictures)
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh --test
. Scripts/lib/selenium-venv.sh
bin="${DELTASNAP_BIN:-$(swift build --show-bin-path)/deltasnap}"
if [ "$#" -gt 0 ] && [ "${1#--}" = "$1" ]; then bin="$1"; shift; fi
[ -x "$bin" ] || { echo "test-console.sh: no deltasnap at $bin: build it first (swift build)" >&2; exit 1; }
screenshots=()
if [ "${1:-}" = "--screenshots" ]; then screenshots=(--screenshots "$2"); fi
echo "test-console.sh: SQLite"
"$venv/bin/python" Tests/Console/console_browser.py "$bin" "${screenshots[@]}"
server="$(Scripts/postgres.sh)"
psql "$server" -q -c "CREATE DATABASE deltasnap_console" 2>/dev/null || true
echo "test-console.sh: PostgreSQL, two servers on one database"
"$venv/bin/python" Tests/Console/console_browser.py "$bin" --postgres "${server/\/postgres\?//deltasnap_console?}"
