# What every Scripts/bench* script measures with, sourced (not run): medians, ratios, clocks,
# wrk's output, free ports. One definition each, so that every script computes a median or a
# ratio the same way.
#   source Scripts/lib/measure.sh   (from the repository's root, where the scripts cd to)

# The median of the numbers on standard input, one per line (the mean of the middle two when even).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# $1 / $2 to two decimals; "n/a" when the baseline $2 is 0 (too small to measure).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) printf "n/a (baseline 0)"; else printf "%.2f", a / b }'; }
# Now, in seconds with nanoseconds; elapsed START END in seconds, to the millisecond.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# wrk's latency percentile line ("99%  1.23ms") in milliseconds: percentile 99 < wrk-output.
percentile() { awk -v p="$1%" '$1 == p { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 } print v }'; }
# wrk's requests per second: rate < wrk-output.
rate() { awk '/Requests\/sec/ { print $2 }'; }
# A TCP port free on the loopback now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# From files of "/usr/bin/time -f '%e %M'" lines: the median seconds, and the peak memory in MB.
seconds() { awk '{ print $1 }' "$@" | median; }
peak() { awk '{ print $2 }' "$@" | sort -n | tail -n 1 | awk '{ printf "%d", $1 / 1024 }'; }
# The path of program $1: found on PATH, then in the sbin directories where Debian puts daemons
# (nginx, varnishd) that a user's PATH often lacks; fails with a hint when it is not installed.
tool() {
  local found
  found="$(PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$1")" \
    || { echo "$(basename "$0"): $1 is not installed (Scripts/setup.sh --bench or --test installs it)" >&2; return 1; }
  echo "$found"
}
