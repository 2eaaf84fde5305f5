#!/usr/bin/env bash
# The TypeScript client's demo page beside the demo server: compiles clients/typescript, serves
# the repository's files on 127.0.0.1:8000 (the page, the client, Snapshots/demo.snapshot) and
# runs Scripts/serve-demo.sh on 127.0.0.1:8080 with that origin allowed (CORS) and the demo's
# client key for the page's offline writes. Open the URL it prints; stop with Ctrl-C.
#   Scripts/serve-web-demo.sh [--web-port 8000] [any other `deltasnap serve` option]
set -euo pipefail
cd "$(dirname "$0")/.."
web_port=8000
if [ "${1:-}" = "--web-port" ]; then web_port="$2"; shift 2; fi
command -v tsc >/dev/null || Scripts/setup.sh --test
(cd clients/typescript && tsc -p .)
python3 -m http.server "$web_port" --bind 127.0.0.1 >/dev/null 2>&1 &
web=$!
trap 'kill $web 2>/dev/null' EXIT
export DELTASNAP_CLIENT_KEY="${DELTASNAP_CLIENT_KEY:-demo-key-123}"
echo "serve-web-demo: open http://127.0.0.1:$web_port/clients/typescript/demo/?key=$DELTASNAP_CLIENT_KEY" >&2
Scripts/serve-demo.sh --allow-origin "http://127.0.0.1:$web_port" --client-writable widgets "$@"
