#!/usr/bin/env bash
# Writes the console's script and style (Sources/DeltaServer/Console/Assets/console.js and
# console.css, the files to edit) into Swift literals compiled into the server:
# ConsoleAssets+Script.swift and ConsoleAssets+Style.swift. ConsoleTests fails while they differ.
#   Scripts/console-assets.sh
set -euo pipefail
cd "$(dirname "$0")/../Sources/DeltaServer/Console"
write() {  # write SOURCE SWIFT PROPERTY DOC
  local source="$1" swift="$2" property="$3" doc="$4"
  if grep -q '"##' "$source"; then echo "console-assets.sh: $source holds \"## , which would end the Swift literal" >&2; exit 1; fi
  {
    echo "extension ConsoleAssets {"
    echo "    /// $doc (written from Assets/$(basename "$source") by Scripts/console-assets.sh: edit that file)."
    echo "    static let $property = ##\"\"\""
    sed -e 's/^\(.\)/        \1/' "$source"
    echo "        \"\"\"##"
    echo "}"
  } >"$swift"
}
write Assets/console.js ConsoleAssets+Script.swift scriptText "The console's script: fills each page from the console's JSON"
write Assets/console.css ConsoleAssets+Style.swift styleText "The console's style"
