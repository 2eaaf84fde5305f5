#!/usr/bin/env bash
# Fuzzes the HTTP API against its OpenAPI description with schemathesis (PyPI, the version pinned
# below): a live `deltasnap serve` on loopback over the demo data, tested through the description
# it serves at GET /openapi.json (so what is tested is what the server serves), twice: with the
# owner's secret as the bearer token, then with the client key. Fails on any 5xx and on any answer
# the description does not allow (status code, content type, headers, body schema).
#   Scripts/schemathesis.sh                    the full run: 100 test cases per operation and phase
#                                              (about a minute and a half on 2 cores)
#   Scripts/schemathesis.sh --quick            the short run CI makes: 10 (about 30 seconds)
#   Scripts/schemathesis.sh --max-examples N   N test cases per operation and phase
#   Scripts/schemathesis.sh --seed N           draws a run's inputs again (every run prints its
#                                              seed; stateful sequences follow the server's answers)
#   Scripts/schemathesis.sh --schema FILE      tests FILE instead of what the server serves (for
#                                              docs/openapi.yaml being edited, before regenerating)
# Builds nothing: the server is $DELTASNAP_BIN, else $(swift build --show-bin-path)/deltasnap.
# schemathesis goes into a venv under ${TMPDIR:-/tmp} (or $SCHEMATHESIS_VENV), installed when missing.
# Logs and reports: ${SCHEMATHESIS_DIR:-${TMPDIR:-/tmp}/deltasnap-schemathesis}. The last line sums up.
#
# Checks (settings in Scripts/schemathesis.toml): not_a_server_error, status_code_conformance,
# content_type_conformance, response_headers_conformance, response_schema_conformance,
# negative_data_rejection, missing_required_header, ignored_auth, use_after_free,
# ensure_resource_availability, object_level_authorization, allow_header_conformance. Excluded:
#   positive_data_acceptance (ST202)  a valid-looking request the server rightly refuses (body id
#                                     not the path id, another database's token): not expressible
#   unsupported_method (ST204)        an unrouted method is 404 not-found, never 405, by design
#   negative_data_rejection (ST201) on GET/HEAD /api/{collection}, PUT/DELETE /api/{collection}/{id}:
#                                     headers not read in some requests (validators, Delta-Client
#                                     on a cacheable read; If-None-Match beside If-Match) are
#                                     rightly accepted whatever their value
#   made-up query parameters          not generated: unknown parameters are ignored, as documented
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.32.5
config="$PWD/Scripts/schemathesis.toml"
examples=100 seed="" schema=""
usage="usage: Scripts/schemathesis.sh [--quick] [--max-examples N] [--seed N] [--schema FILE]"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) examples=10 ;;
    --max-examples) examples="${2:?$usage}"; shift ;;
    --seed) seed="${2:?$usage}"; shift ;;
    --schema) schema="$(realpath "${2:?$usage}")"; shift ;;
    *) echo "schemathesis: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
  shift
done
case "$examples$seed" in *[!0-9]*) echo "schemathesis: --max-examples and --seed take whole numbers" >&2; exit 2 ;; esac

venv="${SCHEMATHESIS_VENV:-${TMPDIR:-/tmp}/deltasnap-schemathesis-$version}"
if ! "$venv/bin/st" --version 2>/dev/null | grep -qF "$version"; then
  echo "schemathesis: installing schemathesis $version into $venv" >&2
  python3 -m venv "$venv" || { echo "schemathesis: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version" >&2
fi
bin="${DELTASNAP_BIN:-$(swift build --show-bin-path)/deltasnap}"
[ -x "$bin" ] || { echo "schemathesis: no server binary at $bin (swift build --product deltasnap, or set DELTASNAP_BIN)" >&2; exit 1; }
work="${SCHEMATHESIS_DIR:-${TMPDIR:-/tmp}/deltasnap-schemathesis}"
rm -rf "$work" && mkdir -p "$work/snapshots"
seed="${seed:-$(( (RANDOM << 15 | RANDOM) + 1 ))}"
echo "schemathesis: seed $seed, $examples test cases per operation and phase (again: Scripts/schemathesis.sh --seed $seed --max-examples $examples)"

# The demo data, with the demo database's identity (so the description's example tokens are this
# database's), and a baked snapshot of it, so that the /snapshots routes answer more than 404.
"$bin" import --db "$work/api.sqlite" --collection widgets --database-id "$(cat Scripts/demo/database-id)" Scripts/demo/widgets.json > /dev/null
"$bin" bake --db "$work/api.sqlite" --collection widgets --out "$work/snapshots/widgets.snapshot" > /dev/null
# Fresh secrets for this run only; the server refuses a client key equal to the write token.
owner="owner-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
client="client-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
# Port 0: the server picks a free port and prints it. --max-wait 1 keeps ?wait= reads short.
DELTASNAP_WRITE_TOKEN="$owner" DELTASNAP_CLIENT_KEY="$client" "$bin" serve --db "$work/api.sqlite" --port 0 \
  --client-writable widgets --snapshots "$work/snapshots" --cacheable-reads --max-wait 1 --log-level warning \
  > "$work/serve.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; true' EXIT
port=""
for _ in $(seq 100); do
  port=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$work/serve.log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "schemathesis: the server did not start, see $work/serve.log" >&2; cat "$work/serve.log" >&2; exit 1; }
url="http://127.0.0.1:$port"

# One run per credential (secrets made for this run only). The description is the one the server
# serves, unless --schema names a file.
failed=0 operations=() cases=() server_errors=0 nonconforming=0 other=0
for credential in owner client; do
  if [ "$credential" = owner ]; then token="$owner"; else token="$client"; fi
  report="$work/$credential.json"
  status=0
  # From $work, where hypothesis keeps its .hypothesis/ directory.
  (cd "$work" && "$venv/bin/st" --config-file "$config" --no-color run \
    "${schema:-$url/openapi.json}" --url "$url" --header "Authorization: Bearer $token" \
    --max-examples "$examples" --seed "$seed" --report json --report-json-path "$report") \
    > "$work/$credential.log" 2>&1 || status=$?
  # Figures from the JSON report: ST101/ST102 are server errors, ST103 to ST111 answers that break
  # the description (status, content type, headers, body), the rest the other checks' failures;
  # schemathesis counts distinct failures, not every request that repeats one.
  read -r tested generated errors broken others < <("$venv/bin/python" - "$report" <<'PY'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print(0, 0, 0, 0, 1)
    sys.exit()
counts = {"server": 0, "broken": 0, "other": 0}
for failure in report["failures"]:
    number = int(failure["code"][2:])
    kind = "server" if number in (101, 102) else "broken" if 103 <= number <= 111 else "other"
    counts[kind] += failure["count"]
counts["other"] += sum(error["count"] for error in report["errors"])
operations = report["operations"] or {}
print(operations.get("tested", 0), report["test_cases"]["generated"], counts["server"], counts["broken"], counts["other"])
PY
  )
  echo "schemathesis: $credential: $tested operations, $generated test cases, $errors server errors, $broken non-conforming answers, $others other failures (exit $status; $work/$credential.log)"
  if [ "$status" -ne 0 ] || [ "$errors" -ne 0 ] || [ "$broken" -ne 0 ] || [ "$others" -ne 0 ]; then
    failed=1
    awk '/^=+ FAILURES =+$/ { p = 1 } /^=+ (WARNINGS|SUMMARY) =+$/ { p = 0 } p && n++ < 80' "$work/$credential.log" >&2
    grep -A3 -E "^(Schema Loading Error|Test Execution Error)" "$work/$credential.log" >&2 || true
  fi
  operations+=("$tested") cases+=("$generated")
  server_errors=$((server_errors + errors)) nonconforming=$((nonconforming + broken)) other=$((other + others))
done
# A server that died answered no 5xx, but it is one.
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "schemathesis: the server exited during the run, see $work/serve.log" >&2
  tail -n 20 "$work/serve.log" >&2
  server_errors=$((server_errors + 1)) failed=1
fi
echo "schemathesis: ${operations[0]} and ${operations[1]} operations tested, ${cases[0]} and ${cases[1]} test cases (owner's secret and client key), $server_errors server errors, $nonconforming non-conforming answers, $other other failures; seed $seed"
exit "$failed"
