# Sourced by the browser test scripts: selenium from PyPI in a venv of its own (Debian's system
# Python refuses pip installs), at $SELENIUM_VENV or under $TMPDIR; sets $venv.
venv="${SELENIUM_VENV:-${TMPDIR:-/tmp}/deltasnap-selenium}"
if ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
  python3 -m venv "$venv" || { echo "$(basename "$0"): python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check "selenium>=4.20" >&2
fi
