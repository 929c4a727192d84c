#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for kiln's PostgreSQL tests and measurements.
#
#   scripts/pg-test-cluster.sh start DIR   initdb in DIR (created), start on a random free
#                                          port of 127.0.0.1 with trust auth; prints the URL
#                                          (also written to DIR/url)
#   scripts/pg-test-cluster.sh stop DIR    stop it (fast shutdown) and delete DIR
#   scripts/pg-test-cluster.sh run CMD...  start in a temp dir, run CMD with KILN_TEST_PG_URL
#                                          set, stop and delete on exit (trap), CMD's status
#
# PostgreSQL 15 binaries are looked for in PG_BIN, /usr/lib/postgresql/*/bin and PATH; if
# none are found (a fresh Debian 12) they are installed with `apt-get install -y postgresql`
# (CI runs as root; no sudo). initdb refuses to run as root, so as root the cluster runs as
# the `postgres` user (or `kiln-pg`, created with useradd, when there is none).
set -euo pipefail

die() { echo "pg-test-cluster: $*" >&2; exit 1; }

find_bin() {
  local d
  if [[ -n "${PG_BIN:-}" && -x "$PG_BIN/initdb" ]]; then echo "$PG_BIN"; return 0; fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    [[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && { echo "$d"; return 0; }
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

ensure_bin() {
  local b
  if b=$(find_bin); then echo "$b"; return 0; fi
  [[ $(id -u) -eq 0 ]] || die "no PostgreSQL binaries (initdb, pg_ctl) and not root: install postgresql"
  command -v apt-get >/dev/null 2>&1 || die "no PostgreSQL binaries and no apt-get to install them"
  echo "pg-test-cluster: installing postgresql with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql failed"
  b=$(find_bin) || die "postgresql installed but initdb/pg_ctl not found"
  echo "$b"
}

# The user the server runs as, and a way to run a command as it.
pick_user() {
  if [[ $(id -u) -ne 0 ]]; then id -un; return 0; fi
  if id postgres >/dev/null 2>&1; then echo postgres; return 0; fi
  if ! id kiln-pg >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /bin/sh kiln-pg >&2 || die "useradd kiln-pg failed"
  fi
  echo kiln-pg
}

as_user() {
  local user=$1; shift
  if [[ $(id -u) -ne 0 ]]; then "$@"; return; fi
  if command -v runuser >/dev/null 2>&1; then
    runuser -u "$user" -- "$@"
  else
    su -s /bin/sh "$user" -c "$(printf '%q ' "$@")"
  fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local dir=$1 bin user port tries url
  bin=$(ensure_bin)
  user=$(pick_user)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [[ -e "$dir/data/PG_VERSION" ]] && die "$dir already holds a cluster; stop it first"
  chmod 0755 "$dir"
  [[ $(id -u) -eq 0 ]] && chown "$user" "$dir"
  # The server's user must reach the dir: open the parents for traversal if they are not.
  as_user "$user" test -w "$dir" || die "$user cannot write $dir (a parent is not traversable?)"
  as_user "$user" "$bin/initdb" -D "$dir/data" -U kiln --auth=trust -E UTF8 --locale=C.UTF-8 \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  for tries in 1 2 3 4 5 6 7 8 9 10; do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    port_free "$port" || continue
    # Loopback only, no Unix socket in /var/run (the dir may not exist or be ours).
    if as_user "$user" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=off \
            -c synchronous_commit=off -c full_page_writes=off" start >/dev/null; then
      url="postgres://kiln@127.0.0.1:$port/postgres"
      echo "$url" >"$dir/url"
      echo "$bin" >"$dir/bin"
      echo "$user" >"$dir/user"
      echo "$url"
      return 0
    fi
    tail -5 "$dir/server.log" >&2 || true
  done
  die "could not start PostgreSQL on a free port after 10 tries (see $dir/server.log)"
}

stop() {
  local dir=$1
  [[ -f "$dir/bin" ]] || { rm -rf "$dir"; return 0; }
  local bin user
  bin=$(cat "$dir/bin"); user=$(cat "$dir/user")
  as_user "$user" "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) [[ $# -eq 2 ]] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
  run)
    shift
    [[ $# -ge 1 ]] || die "usage: $0 run CMD..."
    PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kiln-pg.XXXXXX")
    trap 'stop "$PG_DIR"' EXIT INT TERM
    KILN_TEST_PG_URL=$(start "$PG_DIR")
    export KILN_TEST_PG_URL
    echo "pg-test-cluster: $KILN_TEST_PG_URL" >&2
    "$@"
    ;;
  *) die "usage: $0 start DIR | stop DIR | run CMD..." ;;
esac
