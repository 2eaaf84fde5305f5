#!/usr/bin/env bash
# The whole test suite: installs missing system packages, starts a throwaway PostgreSQL server
# (Scripts/postgres.sh), builds, runs every test, the store and server tests on both backends.
# Extra arguments go to `swift test` (for example --filter ConvergenceTests).
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh --test
DELTASNAP_TEST_POSTGRES="$(Scripts/postgres.sh)"
export DELTASNAP_TEST_POSTGRES
swift build --build-tests
swift test --skip-build "$@"
