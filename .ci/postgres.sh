# Sourced by .ci/run: a throwaway PostgreSQL cluster on localhost for the history store's tests (Debian's
# `postgresql` package; initdb + pg_ctl as the postgres user in a temporary folder, on a free port). Exports
# VIZEXPORT_TEST_PG; the server stops when the sourcing shell exits.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
PG_BIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")
PG_DIR=$(mktemp -d /tmp/vizexport-pg.XXXXXX)
PG_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chown postgres "$PG_DIR"
( # from /: the postgres user may not enter the checkout's folder
  cd /
  runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
  runuser -u postgres -- "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" vizexport_test
)
export VIZEXPORT_TEST_PG="postgresql://postgres@127.0.0.1:$PG_PORT/vizexport_test"
trap 'cd / && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast stop >/dev/null; rm -rf "$PG_DIR"' EXIT
