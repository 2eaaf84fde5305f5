#!/usr/bin/env bash
# Replays the daily OurAirports runways dumps end to end, and measures what a daily-syncing client downloads.
#   Scripts/replay-ourairports.sh DATA_DIR [--days N] [--no-docs]
# DATA_DIR holds runways.tar.xz (../shared/data/ourairports here; the data is public domain, never committed).
# Day 1 is imported and baked into a snapshot; a client installs it; then every following day's
# dump is published with `deltasnap import --replace` and the client syncs with `deltasnap sync`.
# At the end the client's records must equal the last day's CSV exactly. Prints a Markdown report
# and writes it into docs/BENCHMARKS.md (between the replay markers) unless --no-docs.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: Scripts/replay-ourairports.sh DATA_DIR [--days N] [--no-docs]" >&2; exit 2; }
data="$1"; shift
days_limit=0 docs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --days) days_limit="$2"; shift 2 ;;
    --no-docs) docs=0; shift ;;
    *) echo "replay: unknown option $1 (use --days N, --no-docs)" >&2; exit 2 ;;
  esac
done
[ -f "$data/runways.tar.xz" ] || { echo "replay: $data/runways.tar.xz not found (the OurAirports data directory)" >&2; exit 1; }
Scripts/setup.sh --bench
for tool in xz curl gzip; do command -v "$tool" >/dev/null || { echo "replay: $tool is missing" >&2; exit 1; }; done
swift build -c release --product deltasnap >&2
bin="$(swift build -c release --show-bin-path)/deltasnap"
work="${REPLAY_DIR:-${TMPDIR:-/tmp}/deltasnap-replay}"
rm -rf "$work" && mkdir -p "$work"
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; true' EXIT
echo "replay: unpacking runways.tar.xz" >&2
tar -xJf "$data/runways.tar.xz" -C "$work"
mapfile -t days < <(ls "$work"/runways/*.csv | sort)
[ "$days_limit" -gt 0 ] && days=("${days[@]:0:$days_limit}")
[ ${#days[@]} -ge 2 ] || { echo "replay: need at least two days of dumps" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
field() { grep -o "\"$1\":[0-9]*" | head -n 1 | cut -d: -f2; }
# The rows of day $2 that are new or changed since day $1, and the rows of day $1 that are gone (a
# tombstone carries the whole record), with the header: the least a day's changes can be in CSV.
changed_rows() {
  head -n 1 "$2"
  comm -13 <(tail -n +2 "$1" | sort) <(tail -n +2 "$2" | sort)
  comm -23 <(tail -n +2 "$1" | cut -d, -f1 | sort -u) <(tail -n +2 "$2" | cut -d, -f1 | sort -u) > "$work/gone.ids"
  [ -s "$work/gone.ids" ] && awk -F, 'NR == FNR { gone[$1] = 1; next } FNR > 1 && ($1 in gone)' "$work/gone.ids" "$1"
  true
}

"$bin" import --db "$work/server.sqlite" --collection runways --replace "${days[0]}" >&2
"$bin" bake --db "$work/server.sqlite" --collection runways --out "$work/runways.snapshot" >&2
port=$(awk 'BEGIN { srand(); print 20000 + int(rand() * 20000) }')
"$bin" serve --db "$work/server.sqlite" --port "$port" --log-level warning > "$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
api="http://127.0.0.1:$port/api"
sync() { "$bin" sync --store "$work/client.sqlite" --snapshot "$work/runways.snapshot" --url "$api" --json; }
first=$(sync)
grep -q '"outcome":"not-modified"' <<< "$first" || { echo "replay: the first sync after install should be a 304: $first" >&2; exit 1; }
etag=$(sed -n 's/.*"etag":"W\/\\"\([^\\]*\)\\"".*/W\/"\1"/p' <<< "$first")

rows="$work/rows.md"; : > "$rows"
peak_kb=0 total_wire=0 total_csv=0 total_snapshot=0 total_changed=0 total_up=0 total_hidden=0
for index in $(seq 1 $((${#days[@]} - 1))); do
  day="${days[$index]}" previous="${days[$((index - 1))]}"
  name=$(basename "$day" .csv)
  /usr/bin/time -f "%e %M" -o "$work/publish.time" "$bin" import --db "$work/server.sqlite" --collection runways --replace "$day" > "$work/import.out"
  read -r publish publish_kb < "$work/publish.time"
  [ "$publish_kb" -gt "$peak_kb" ] && peak_kb=$publish_kb
  # The exact request the client is about to send, to count the bytes on the wire (gzip body + headers).
  read -r body header < <(curl -s -o /dev/null -w '%{size_download} %{size_header}\n' -H "If-None-Match: $etag" -H "Accept-Encoding: gzip" "$api/runways")
  start=$(now); out=$(sync); seconds=$(elapsed "$start" "$(now)")
  etag=$(sed -n 's/.*"etag":"W\/\\"\([^\\]*\)\\"".*/W\/"\1"/p' <<< "$out")
  grep -q '"reset":null' <<< "$out" || { echo "replay: $name: the client reset: $out" >&2; exit 1; }
  up=$(field upserted <<< "$out"); up=${up:-0}
  hidden=$(field hidden <<< "$out"); hidden=${hidden:-0}
  wire=$((body + header))
  csv_gz=$(gzip -6 -c "$day" | wc -c)
  "$bin" bake --db "$work/server.sqlite" --collection runways --out "$work/day.snapshot" > /dev/null
  snapshot=$(wc -c < "$work/day.snapshot")
  changed=$(changed_rows "$previous" "$day" | gzip -6 -c | wc -c)
  [ $((up + hidden)) -gt 0 ] || changed=0
  total_wire=$((total_wire + wire)) total_csv=$((total_csv + csv_gz)) total_snapshot=$((total_snapshot + snapshot))
  total_changed=$((total_changed + changed)) total_up=$((total_up + up)) total_hidden=$((total_hidden + hidden))
  ratio=$( [ "$changed" -gt 0 ] && awk -v a="$body" -v b="$changed" 'BEGIN { printf "%.2f×", a / b }' || echo "304")
  wire_ratio=$( [ "$changed" -gt 0 ] && awk -v a="$wire" -v b="$changed" 'BEGIN { printf "%.2f×", a / b }' || echo "304")
  echo "| $name | $wire | $up | $hidden | $seconds s | $publish s | $changed | $ratio | $wire_ratio |" >> "$rows"
  echo "replay: $name: $up upserted, $hidden hidden, $wire bytes, sync $seconds s, publish $publish s" >&2
done

# The client must now hold exactly the last day's CSV: a fresh import of it, baked, gives the same records.
last="${days[$((${#days[@]} - 1))]}"
"$bin" import --db "$work/fresh.sqlite" --collection runways --replace "$last" > /dev/null
"$bin" bake --db "$work/fresh.sqlite" --collection runways --out "$work/fresh.snapshot" > /dev/null
gzip -dc "$work/fresh.snapshot" | sed '1d;$d' > "$work/expected.ndjson"
"$bin" dump --store "$work/client.sqlite" --collection runways > "$work/client.ndjson"
cmp -s "$work/expected.ndjson" "$work/client.ndjson" || { echo "replay: the client's records differ from $(basename "$last")" >&2; diff "$work/expected.ndjson" "$work/client.ndjson" | head >&2; exit 1; }
csv_rows=$(($(wc -l < "$last") - 1))
[ "$(wc -l < "$work/client.ndjson")" -eq "$csv_rows" ] || { echo "replay: the client holds $(wc -l < "$work/client.ndjson") records, the CSV $csv_rows rows" >&2; exit 1; }
echo "replay: the client equals $(basename "$last") exactly ($csv_rows records)" >&2

syncs=$((${#days[@]} - 1))
column() { awk -F'|' -v c="$1" '$(c) !~ /304/ { v = $(c); gsub(/[ s×]/, "", v); print v }' "$rows"; }
med() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
publish_median=$(column 7 | med)
publish_max=$(column 7 | sort -g | tail -n 1)
ratio_median=$(column 9 | med)
ratio_max=$(column 9 | sort -g | tail -n 1)
wire_median=$(column 10 | med)
wire_max=$(column 10 | sort -g | tail -n 1)
kib() { awk -v b="$1" 'BEGIN { printf "%.1f KiB", b / 1024 }'; }
report="$work/report.md"
cat > "$report" <<REPORT
Command: \`Scripts/replay-ourairports.sh ../shared/data/ourairports\`, $(date -u +%Y-%m-%d), $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)).
Data: OurAirports runways, ${#days[@]} daily dumps ($(basename "${days[0]}" .csv) … $(basename "$last" .csv)), $csv_rows rows on the last day.
The client installed a snapshot of day 1, then synced once after each of the $syncs following days were published; at the end its records equal the last day's CSV exactly (checked).

| over $syncs daily syncs | bytes downloaded | against DeltaSnapshot |
| --- | --- | --- |
| **DeltaSnapshot deltas** (gzip bodies and headers) | **$(kib "$total_wire")** | 1× |
| the day's full CSV, gzip -6, every day | $(kib "$total_csv") | $(awk -v a="$total_csv" -v b="$total_wire" 'BEGIN { printf "%.0f×", a / b }') |
| a freshly baked snapshot, every day | $(kib "$total_snapshot") | $(awk -v a="$total_snapshot" -v b="$total_wire" 'BEGIN { printf "%.0f×", a / b }') |

Records: $total_up upserted and $total_hidden hidden in all. Publishing a day's dump (\`import --replace\`, $csv_rows rows): median $publish_median s, at most $publish_max s (target < 2 s), peak memory $((peak_kb / 1024)) MB.
Against the gzip size of that day's changed rows alone (CSV, with its header; gone rows counted whole), the delta's gzip body is median $ratio_median×, at most $ratio_max× (target within 2×); with the response headers counted too, median $wire_median×, at most $wire_max×. Total changed rows gzipped one day at a time: $(kib "$total_changed").

<details><summary>Per sync</summary>

| day | bytes on the wire | upserted | hidden | sync (whole command) | publish | changed rows, gzip -6 | body / changed rows | wire / changed rows |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
$(cat "$rows")

</details>
REPORT
cat "$report"
if [ "$docs" -eq 1 ]; then
  awk -v report="$report" '
    /<!-- replay:start -->/ { print; while ((getline line < report) > 0) print line; skip = 1; next }
    /<!-- replay:end -->/ { skip = 0 }
    !skip' docs/BENCHMARKS.md > "$work/BENCHMARKS.md"
  grep -q "<!-- replay:start -->" docs/BENCHMARKS.md || { echo "replay: docs/BENCHMARKS.md has no replay markers" >&2; exit 1; }
  cp "$work/BENCHMARKS.md" docs/BENCHMARKS.md
  echo "replay: wrote the report into docs/BENCHMARKS.md" >&2
fi
