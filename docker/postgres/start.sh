#!/bin/sh
# The stack's Postgres: on first start (an empty PGDATA) a cluster whose superuser is
# POSTGRES_USER with POSTGRES_PASSWORD (SCRAM; read from a 0600 file, never a command line),
# the database POSTGRES_DB, and connections from the stack's network with a password; then
# the server in the foreground. (What the postgres image's entrypoint does, for Debian's package.)
set -eu
: "${POSTGRES_USER:?is not set. Fix: set it in docker/.env}"
: "${POSTGRES_PASSWORD:?is not set. Fix: run make stack-up (docker/init-env.sh generates it)}"
: "${POSTGRES_DB:?is not set. Fix: set it in docker/.env}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  echo "postgres: first start: initdb in $PGDATA"
  umask 077
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C >/dev/null
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "CREATE DATABASE \"$POSTGRES_DB\";" | postgres --single -D "$PGDATA" -j postgres >/dev/null
  echo "postgres: database $POSTGRES_DB created"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql
