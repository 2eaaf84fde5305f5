#!/usr/bin/env bash
# Builds an app's package that depends on DeltaClient alone: Tests/Consumer/Package.swift,
# pointed at this repository, with the README's library example (the first Swift block under
# "## In an app") as its Sources/App/main.swift. ConsumerPackageTests runs this and checks what
# was fetched and compiled; Scripts/test.sh runs it once in its build phase, so that the test
# itself only rebuilds what changed since (swift-crypto's C sources alone take about two minutes
# of CPU on two cores).
#   Scripts/consumer.sh [DIRECTORY]    (default: .build/consumer; a relative one is taken from
#                                       the repository's root)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
directory="${1:-$root/.build/consumer}"
mkdir -p "$directory/Sources/App"
manifest="$(cat Tests/Consumer/Package.swift)"
# Quoted, the replacement is literal (a path with & or | in it stays as it is).
printf '%s\n' "${manifest//DELTASNAP_ROOT/"$root"}" > "$directory/Package.swift.new"
awk '/^## In an app$/ { section = 1; next }
     section && !code && /^```swift$/ { code = 1; next }
     code && /^```$/ { exit }
     code { print }' README.md > "$directory/Sources/App/main.swift.new"
if [ ! -s "$directory/Sources/App/main.swift.new" ]; then
  echo "consumer.sh: README.md has no Swift example under \"## In an app\"" >&2
  exit 1
fi
# Files that did not change keep their dates, so that SwiftPM rebuilds nothing for them.
for file in Package.swift Sources/App/main.swift; do
  if cmp -s "$directory/$file.new" "$directory/$file"; then rm "$directory/$file.new"; else mv "$directory/$file.new" "$directory/$file"; fi
done
exec swift build --package-path "$directory" --scratch-path "$directory/.build"
