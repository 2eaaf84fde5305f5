#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server from Debian's packages for the tests and benchmarks, when
# one is not already running there, and prints its URL (the role `deltasnap` may create databases).
#   Scripts/postgres.sh                 the test server: port 55432, fsync off (fast, not crash-safe)
#   Scripts/postgres.sh --durable       the benchmark server: port 55433, fsync on, as in production
#   Scripts/postgres.sh --stop [--durable]   stops that server and deletes its data
# Data lives under ${TMPDIR:-/tmp}; as root, the server runs as the `postgres` user the package made.
set -euo pipefail
cd "$(dirname "$0")/.."

durable=0 stop=0
for argument in "$@"; do
  case "$argument" in
    --durable) durable=1 ;;
    --stop) stop=1 ;;
    *) echo "postgres.sh: unknown option $argument (use --durable or --stop)" >&2; exit 2 ;;
  esac
done
if [ "$durable" = 1 ]; then port=55433 name=bench fsync=on; else port=55432 name=test fsync=off; fi
data="${TMPDIR:-/tmp}/deltasnap-postgres-$name"
password="deltasnap-$name"
url="postgres://deltasnap:$password@127.0.0.1:$port/postgres?sslmode=disable"

bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  Scripts/setup.sh --postgres
  bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
fi

# initdb and postgres refuse to run as root.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "$stop" = 1 ]; then
  [ -d "$data" ] && as_owner "$bin/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$data" "$data.initdb.log"
  exit 0
fi

if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
  echo "$url"
  exit 0
fi

if [ ! -f "$data/PG_VERSION" ]; then
  rm -rf "$data" "$data.initdb.log"
  mkdir -p "$data"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$data"
  printf '%s\n' "$password" > "$data.pw"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$data.pw"
  as_owner "$bin/initdb" -D "$data" -U deltasnap --pwfile="$data.pw" -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 >"$data.initdb.log" 2>&1 \
    || { echo "postgres.sh: initdb failed, see $data.initdb.log" >&2; exit 1; }
  rm -f "$data.pw"
fi
as_owner "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
  -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$data -c fsync=$fsync -c max_connections=400" \
  start >/dev/null \
  || { echo "postgres.sh: the server did not start, see $data/server.log" >&2; exit 1; }
echo "$url"
