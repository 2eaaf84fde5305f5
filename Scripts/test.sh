#!/usr/bin/env bash
# The whole test suite: installs missing system packages, starts a throwaway PostgreSQL server
# (Scripts/postgres.sh), builds (failing on any warning from the project's own sources; with the
# app's package of Scripts/consumer.sh), runs every test, the store and server tests on both
# backends, then, side by side, the TypeScript client's tests in Node and in headless Chromium
# (Scripts/test-typescript.sh) and the console's in Chromium (Scripts/test-console.sh; neither
# when a --filter is given).
# Extra arguments go to `swift test` (for example --filter ConvergenceTests).
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh --test
DELTASNAP_TEST_POSTGRES="$(Scripts/postgres.sh)"
export DELTASNAP_TEST_POSTGRES
log="$(mktemp)"
typescript="" console=""
# On the way out, a browser suite still running (test.sh interrupted) is stopped, and what it
# printed so far is shown: its output is kept apart until it ends.
finish() {
  for job in typescript console; do
    if [ -n "${!job}" ] && kill "${!job}" 2>/dev/null; then
      echo "test.sh: stopped Scripts/test-$job.sh; what it printed:" >&2
      cat "$log.$job" >&2 || true
    fi
  done
  rm -f "$log" "$log.app" "$log.typescript" "$log.console"
}
trap finish EXIT
started=$SECONDS
swift build --build-tests 2>&1 | tee "$log"
# The app's package ConsumerPackageTests checks (Scripts/consumer.sh) is built here, with the
# rest: the test then only rebuilds what changed.
if [ "$#" -eq 0 ] && ! Scripts/consumer.sh >"$log.app" 2>&1; then
  cat "$log.app"
  echo "test.sh: the app's package that depends on DeltaClient alone did not build (Scripts/consumer.sh)" >&2
  exit 1
fi
built=$SECONDS
# Dependencies may warn; the project's own targets may not. An incremental build shows only the
# files it compiled: CI builds from scratch, so it sees every file.
if grep -E "^$PWD/(Sources|Tests)/[^:]+:[0-9]+:[0-9]+: warning:" "$log" | sort -u; then
  echo "test.sh: the warnings above come from the project's own sources: fix them" >&2
  exit 1
fi
# A long run's failures scroll away among thousands of lines: on failure, say them again at the end.
status=0
swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
  echo "test.sh: the tests failed (exit $status); every issue recorded, again:" >&2
  grep -a "✘" "$log" | cut -c1-600 >&2 || true
fi
# The TypeScript client and the console, against the deltasnap just built (a filtered run is
# about Swift tests only): side by side, since each mostly waits on its browser and servers;
# each one's output is kept apart and shown whole once it ends.
if [ "$#" -eq 0 ]; then
  # Their selenium, installed once here rather than by both of them at once.
  . Scripts/lib/selenium-venv.sh
  bin="$(swift build --show-bin-path)/deltasnap"
  Scripts/test-typescript.sh "$bin" >"$log.typescript" 2>&1 &
  typescript=$!
  Scripts/test-console.sh "$bin" >"$log.console" 2>&1 &
  console=$!
  wait "$typescript" || status=$?
  typescript=""
  cat "$log.typescript"
  wait "$console" || status=$?
  console=""
  cat "$log.console"
fi
# The build and the tests timed apart (issue 40 counts the tests alone, after the build).
echo "test.sh: build $((built - started)) s, tests $((SECONDS - built)) s, exit $status" >&2
exit "$status"
