#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests (never a mock): `start DIR` runs initdb in DIR/data
# and starts the server on a free loopback port (its socket in DIR), prints its connection URI
# and writes it to DIR/uri; `stop DIR` stops it and removes DIR. PostgreSQL refuses to run as
# root: as root, the server runs as the `postgres` system user (Debian's postgresql-15 package
# creates it). The server is tuned for tests (fsync off): it holds nothing worth keeping.
#   tests/postgres.sh start|stop DIR
set -euo pipefail
cmd="${1:?start or stop}"; dir="${2:?directory}"
bindir="$(pg_config --bindir 2>/dev/null || true)"
if [ ! -x "$bindir/initdb" ]; then
  bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
fi
if [ ! -x "$bindir/initdb" ]; then
  echo "postgres.sh: no PostgreSQL server binaries (deploy/install-deps.sh installs postgresql-15)" >&2
  exit 2
fi
as_owner=()
[ "$(id -u)" -eq 0 ] && as_owner=(runuser -u postgres --)

case "$cmd" in
  start)
    rm -rf "$dir"
    mkdir -p "$dir"
    [ ${#as_owner[@]} -eq 0 ] || chown postgres: "$dir"
    "${as_owner[@]}" "$bindir/initdb" -D "$dir/data" -U parity -A trust -E UTF8 --locale=C --no-sync \
      > "$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    for attempt in 1 2 3 4 5; do
      port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
      if "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
           -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
           start > /dev/null; then
        echo "postgresql://parity@127.0.0.1:$port/postgres" | tee "$dir/uri"
        exit 0
      fi
    done
    cat "$dir/server.log" >&2
    exit 1
    ;;
  stop)
    if [ -d "$dir/data" ]; then
      "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop > /dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "postgres.sh: start or stop" >&2; exit 2 ;;
esac
