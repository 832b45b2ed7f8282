#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for the tests.
#
#   bash scripts/pg_test_server.sh run CMD [ARG...]   start a cluster, run CMD with MEMWB_TEST_PG_URL set,
#                                                    stop and remove the cluster when CMD ends (its exit code)
#   bash scripts/pg_test_server.sh start              start one and print `export MEMWB_TEST_PG_URL=...` and
#                                                    `export MEMWB_TEST_PG_DIR=...` (for development)
#   bash scripts/pg_test_server.sh stop DIR           stop and remove the cluster started in DIR
#   bash scripts/pg_test_server.sh bindir             print the server binaries' folder; fail if there are none
#
# The cluster lives in a fresh temp dir under /tmp (which the postgres user can reach): data, logs and the
# unix socket. It listens on a free port of 127.0.0.1 only, with trust authentication (only this machine can
# reach it), 200 connections, and fsync off: it is thrown away when the command ends, so durability on power
# loss does not matter here. The server refuses to run as root, so as root it runs as the `postgres` OS user
# (created if missing). Debian's binaries are found under /usr/lib/postgresql/*/bin (newest) or on PATH;
# PG_BINDIR overrides.
# Every failure stops with a message and a non-zero exit.
set -euo pipefail

die() { echo "pg_test_server: $*" >&2; exit 1; }

# The binaries' folder. (`return 0`, not a bare `return`: inside the EXIT trap that would return the exit
# status being trapped, and `set -e` would end the clean-up.)
bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then
    [ -x "$PG_BINDIR/initdb" ] || die "PG_BINDIR=$PG_BINDIR holds no initdb"
    echo "$PG_BINDIR"; return 0
  fi
  local newest
  newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$newest" ] && [ -x "$newest/initdb" ]; then echo "$newest"; return 0; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  die "no PostgreSQL server binaries (initdb) found; install Debian's postgresql (apt-get install postgresql)"
}

# as_owner CMD...: run CMD as the cluster's owner (postgres when we are root, ourselves otherwise), from /
# (the caller's folder, e.g. a clone under /root, may be closed to the postgres user).
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    if command -v runuser >/dev/null 2>&1; then (cd / && runuser -u postgres -- "$@")
    else (cd / && su postgres -s /bin/sh -c "$(printf '%q ' "$@")"); fi
  else
    "$@"
  fi
}

free_port() {
  python3 - <<'EOF' || die "could not find a free port on 127.0.0.1"
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

# abandon DIR MESSAGE: show the cluster's logs, stop a server that may be running, remove DIR, fail.
abandon() {
  cat "$1"/*.log >&2 2>/dev/null || true
  [ -f "$1/data/postmaster.pid" ] && as_owner "$(bindir)/pg_ctl" -D "$1/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$1"
  die "$2"
}

start() {
  local bin dir port
  bin=$(bindir)
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin postgres \
      || die "could not create the postgres OS user"
  fi
  dir=$(mktemp -d /tmp/memwb-pg.XXXXXX) || die "could not make a temp dir in /tmp"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  port=$(free_port)
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || abandon "$dir" "initdb failed (log above)"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off" \
      -o "-c synchronous_commit=off -c max_connections=200" start >"$dir/pg_ctl.log" 2>&1 \
    || abandon "$dir" "the server did not start on 127.0.0.1:$port (logs above)"
  local tries=0
  until "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || abandon "$dir" "the server on 127.0.0.1:$port never became ready (logs above)"
    sleep 0.5
  done
  PG_DIR=$dir
  PG_URL="postgresql://postgres@127.0.0.1:$port/postgres"
  as_owner "$bin/psql" "$PG_URL" -XAtqc "select 1" >/dev/null || abandon "$dir" "cannot connect to $PG_URL"
}

stop() {
  local dir=$1 bin
  [ -d "$dir/data" ] || die "$dir holds no cluster"
  bin=$(bindir)
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || die "could not stop the server in $dir"
  rm -rf "$dir"
}

case "${1:-}" in
  run)
    shift
    [ $# -gt 0 ] || die "run needs a command"
    start
    trap 'stop "$PG_DIR"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    echo "pg_test_server: $("$(bindir)/postgres" --version) at $PG_URL" >&2
    status=0
    MEMWB_TEST_PG_URL=$PG_URL "$@" || status=$?
    exit "$status"
    ;;
  start)
    start
    echo "export MEMWB_TEST_PG_URL=$PG_URL"
    echo "export MEMWB_TEST_PG_DIR=$PG_DIR"
    ;;
  stop)
    [ $# -eq 2 ] || die "usage: $0 stop DIR"
    stop "$2"
    ;;
  bindir)
    bindir
    ;;
  *)
    die "usage: $0 run CMD [ARG...] | start | stop DIR | bindir"
    ;;
esac
