#!/usr/bin/env bash
# Runs the delta server on its embedded default (a SQLite file) with the demo dataset loaded.
#   Scripts/serve-demo.sh [--port 8080] [any other `deltasnap serve` option]
# Writes are enabled with the secret in $DELTASNAP_WRITE_TOKEN (default: demo-secret), and the
# operator's console at http://127.0.0.1:8080/console/ signs in with it.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
swift build --product deltasnap
bin="$(swift build --show-bin-path)/deltasnap"
db="${DELTASNAP_DB:-demo.sqlite}"
if [ ! -f "$db" ]; then
  # The demo database has a fixed identity, so its tokens match the committed Snapshots/demo.snapshot.
  "$bin" import --db "$db" --collection widgets --database-id "$(cat Scripts/demo/database-id)" Scripts/demo/widgets.json
fi
export DELTASNAP_WRITE_TOKEN="${DELTASNAP_WRITE_TOKEN:-demo-secret}"
echo "serve-demo: write token is \$DELTASNAP_WRITE_TOKEN=$DELTASNAP_WRITE_TOKEN" >&2
exec "$bin" serve --db "$db" --console "$@"
