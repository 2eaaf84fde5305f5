#!/usr/bin/env bash
# Builds the DeltaClient DocC catalog (Sources/DeltaClient/DeltaClient.docc) with the toolchain's
# docc, failing on any warning (a broken symbol link, a missing article):
#   Scripts/docs.sh [OUTPUT_DIR]     default: ${TMPDIR:-/tmp}/deltasnap-docs
# Open OUTPUT_DIR/index.html through a static file server (docc's pages load their data by URL).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${TMPDIR:-/tmp}/deltasnap-docs}"
graphs="$(mktemp -d)"
trap 'rm -rf "$graphs"' EXIT
# The symbol graphs of DeltaClient and what it re-exports to apps, from a build of that target alone.
swift build --target DeltaClient -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" >&2
# Only the project's own modules: swift-crypto's graphs (DeltaCore hashes with it) carry links to
# Apple's documentation that docc cannot resolve here.
find "$graphs" -name '*.symbols.json' ! -name 'Delta*' -delete
docc convert Sources/DeltaClient/DeltaClient.docc --additional-symbol-graph-dir "$graphs" \
  --fallback-display-name DeltaClient --fallback-bundle-identifier DeltaClient \
  --output-path "$out" --warnings-as-errors >&2
echo "docs: DeltaClient documentation in $out"
