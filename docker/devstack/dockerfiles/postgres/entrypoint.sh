#!/bin/bash
# The official image's contract on Debian's package: initdb once with the POSTGRES_* variables, then run
# the server as the postgres user (it refuses root) listening on every interface of the container.
set -euo pipefail
BIN=/usr/lib/postgresql/15/bin
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
    echo "error: set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust for a passwordless database" >&2
    exit 1
  fi
  auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
  pwfile=$(mktemp)
  printf '%s' "${POSTGRES_PASSWORD:-}" > "$pwfile"
  chown postgres "$pwfile"
  pwflag=()
  [ -n "${POSTGRES_PASSWORD:-}" ] && pwflag=(--pwfile="$pwfile")
  # UTF8 as the official image: under initdb's default SQL_ASCII, clients get bytes instead of text.
  as_postgres "$BIN/initdb" -D "$PGDATA" -U "$user" "${pwflag[@]}" --encoding=UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host="$auth" >/dev/null
  rm -f "$pwfile"
  echo "host all all all $auth" >> "$PGDATA/pg_hba.conf"
  echo "host replication all all $auth" >> "$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\"" | as_postgres "$BIN/postgres" --single -D "$PGDATA" postgres >/dev/null
  fi
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$BIN/postgres" -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
