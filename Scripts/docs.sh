#!/usr/bin/env bash
# Builds the DeltaClient DocC catalog (Sources/DeltaClient/DeltaClient.docc) with
# swift-docc-plugin, failing on any warning (a broken symbol link, a missing article):
#   Scripts/docs.sh [OUTPUT_DIR]     default: ${TMPDIR:-/tmp}/deltasnap-docs
# Open OUTPUT_DIR/index.html through a static file server (docc's pages load their data by URL).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${TMPDIR:-/tmp}/deltasnap-docs}"
# --disable-sandbox: the plugin writes to the output directory, outside the package.
swift package --disable-sandbox --allow-writing-to-directory "$out" generate-documentation --target DeltaClient \
  --warnings-as-errors --output-path "$out" >&2
echo "docs: DeltaClient documentation in $out"
