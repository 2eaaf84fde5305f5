#!/usr/bin/env bash
# Installs what DeltaSnapshot needs from Debian's packages, only when missing.
#   Scripts/setup.sh           build and run: zlib1g-dev, libsqlite3-dev
#   Scripts/setup.sh --test    also what the test suite runs for real: nginx and Varnish (the caching proxies), gzip, script, xz,
#                              PostgreSQL (the second store backend), and for the TypeScript client Node, its compiler
#                              (node-typescript), Chromium and its driver (selenium comes from PyPI: Scripts/lib/selenium-venv.sh)
#   Scripts/setup.sh --bench   also the benchmark tools and baselines: nginx, wrk, gzip, curl, GNU time, sqlite3, PostgreSQL
#   Scripts/setup.sh --postgres  PostgreSQL's server alone
set -euo pipefail

packages=(zlib1g-dev libsqlite3-dev)
case "${1:-}" in
  --test) packages+=(nginx-light varnish gzip bsdutils xz-utils postgresql nodejs node-typescript chromium chromium-driver python3-venv) ;;
  --bench) packages+=(nginx-light varnish wrk gzip curl time sqlite3 xz-utils postgresql) ;;
  --postgres) packages+=(postgresql) ;;
  "") ;;
  *) echo "setup.sh: unknown option ${1} (use --test, --bench or --postgres)" >&2; exit 2 ;;
esac

if ! command -v swift >/dev/null 2>&1; then
  echo "setup.sh: the Swift toolchain (6.1 or newer) is not on PATH: install it from swift.org first" >&2
  exit 1
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: missing ${missing[*]} and no apt-get here: install them with your system's package manager" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup.sh: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
