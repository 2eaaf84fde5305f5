#!/usr/bin/env bash
# Bakes Snapshots/NAME.snapshot from a running server, for an app build (an Xcode Run Script
# phase, a CI job). Bakes into a temporary file, verifies it, and only then replaces the old
# snapshot, atomically. Any failure stops the build with one line saying why.
#   Scripts/bake-snapshot.sh [--allow-stale] URL NAME
#     URL   the collection's full-dataset URL, http://HOST:PORT/api/COLLECTION
#     NAME  the snapshot's name: writes Snapshots/NAME.snapshot
#     --allow-stale  when the server cannot be reached, keep the previous snapshot and warn
# Uses $DELTASNAP (the deltasnap binary) when set, else builds it from this package. With
# $DELTASNAP_WRITE_TOKEN set, the server records the baked token, so deltasnap compact keeps it valid.
set -uo pipefail
cd "$(dirname "$0")/.."
allow_stale=0
if [ "${1:-}" = "--allow-stale" ]; then allow_stale=1; shift; fi
if [ $# -ne 2 ]; then
  echo "error: bake-snapshot: usage: Scripts/bake-snapshot.sh [--allow-stale] URL NAME" >&2
  exit 2
fi
url="$1" name="$2"
case "$name" in *[!A-Za-z0-9_-]*|"") echo "error: bake-snapshot: NAME must match [A-Za-z0-9_-]+ (got '$name')" >&2; exit 2 ;; esac
target="Snapshots/$name.snapshot"
bin="${DELTASNAP:-}"
if [ -z "$bin" ]; then
  if ! swift build --product deltasnap >/dev/null 2>&1; then
    echo "error: bake-snapshot: cannot build deltasnap (run swift build --product deltasnap to see why)" >&2
    exit 1
  fi
  bin="$(swift build --show-bin-path)/deltasnap"
fi
temporary="Snapshots/.$name.snapshot.baking-$$"
trap 'rm -f "$temporary"' EXIT
if ! output=$("$bin" bake --url "$url" --out "$temporary" 2>&1); then
  reason=$(printf '%s\n' "$output" | grep -v '^$' | tail -n 1 | sed 's/^Error: //')
  if [ "$allow_stale" -eq 1 ] && [ -f "$target" ] && printf '%s' "$output" | grep -q "cannot reach the server"; then
    echo "warning: bake-snapshot: kept the previous $target: $reason" >&2
    exit 0
  fi
  echo "error: bake-snapshot: $reason" >&2
  exit 1
fi
if ! output=$("$bin" verify "$temporary" 2>&1); then
  echo "error: bake-snapshot: the new snapshot does not verify: $(printf '%s' "$output" | tail -n 1 | sed 's/^Error: //')" >&2
  exit 1
fi
mv -f "$temporary" "$target"
trap - EXIT
echo "bake-snapshot: $target updated ($(printf '%s' "$output" | sed 's/^.*: ok, //'))"
