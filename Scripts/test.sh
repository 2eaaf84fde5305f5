#!/usr/bin/env bash
# The whole test suite: installs missing system packages, builds, runs every test.
# Extra arguments go to `swift test` (for example --filter ConvergenceTests).
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh --test
swift build --build-tests
swift test --skip-build "$@"
