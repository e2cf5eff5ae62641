#!/bin/sh
# The entrypoint of pmx-local/postgres, the test cluster's stand-in for the official postgres image
# that charts/pmx runs (hack/image/build.sh makes it from Debian's postgresql): on a first start
# it initializes PGDATA with POSTGRES_USER as the superuser, POSTGRES_PASSWORD as its password
# (required; connections over TCP must give it) and the database POSTGRES_DB, as the official
# image does; then it runs the server in the foreground on every address.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
socket=/var/run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ]; then
		echo "postgres: POSTGRES_PASSWORD is empty: set it, the password of $POSTGRES_USER for connections over TCP" >&2
		exit 1
	fi
	mkdir -p "$PGDATA"
	chmod 700 "$PGDATA"
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
		--auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=$socket" -w start >/dev/null
	if [ "$POSTGRES_DB" != postgres ]; then
		createdb --host="$socket" --username="$POSTGRES_USER" "$POSTGRES_DB"
	fi
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
	echo "postgres: initialized $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories="$socket"
