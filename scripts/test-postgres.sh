#!/bin/sh
# PostgreSQL on 127.0.0.1 for the sql server's tests (tests/servers/test_sql_*.py), which
# connect as postgres, without a password, to a database named test.
#
# The machine's own server is used when it answers that way. Otherwise: Debian's packages are
# installed when PostgreSQL is missing (postgresql, with contrib's dblink, which the attack
# battery needs), the first cluster is started, a cluster this script created gets trust
# authentication for 127.0.0.1 (an existing cluster's authentication is never changed: the
# script says what to change), and the test database is created.
set -eu

PORT=5432 # tests/servers/test_sql_support.py connects there

ready() { pg_isready -q -h 127.0.0.1 -p "$PORT" >/dev/null 2>&1; }
usable() { psql -X -w -h 127.0.0.1 -p "$PORT" -U postgres -d test -Atc 'SELECT 1' >/dev/null 2>&1; }
as_postgres() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}
root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}
wait_ready() {
	i=0
	while ! ready; do
		i=$((i + 1))
		if [ "$i" -gt 100 ]; then
			echo "test-postgres: PostgreSQL did not answer on 127.0.0.1:$PORT" >&2
			exit 1
		fi
		sleep 0.1
	done
}

if command -v psql >/dev/null 2>&1 && ready && usable; then
	exit 0
fi

fresh=no
if ! command -v pg_lsclusters >/dev/null 2>&1; then
	echo "test-postgres: installing PostgreSQL from Debian's packages"
	root env DEBIAN_FRONTEND=noninteractive apt-get update -q
	root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql postgresql-contrib
	fresh=yes
fi

# The first cluster on the port (Debian's packages create one, "main", on installation).
cluster=$(pg_lsclusters -h | awk -v port="$PORT" '$3 == port { print $1 " " $2; exit }')
if [ -z "$cluster" ]; then
	echo "test-postgres: no PostgreSQL cluster on port $PORT (pg_lsclusters lists none)" >&2
	exit 1
fi
version=${cluster% *}
name=${cluster#* }

if [ "$fresh" = yes ]; then
	hba=$(as_postgres psql -X -Atc 'SHOW hba_file' 2>/dev/null || echo "/etc/postgresql/$version/$name/pg_hba.conf")
	if ! root grep -Eq '^host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba"; then
		# First match wins in pg_hba.conf: the trust line goes before the password lines.
		root sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
	fi
fi

if ! ready; then
	echo "test-postgres: starting PostgreSQL $version/$name"
	root pg_ctlcluster "$version" "$name" start
fi
if [ "$fresh" = yes ]; then
	root pg_ctlcluster "$version" "$name" reload
fi
wait_ready

if ! as_postgres psql -X -p "$PORT" -Atc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1; then
	as_postgres psql -X -q -p "$PORT" -c 'CREATE DATABASE test'
fi

if ! usable; then
	echo "test-postgres: PostgreSQL answers on 127.0.0.1:$PORT but not to postgres without a password." >&2
	echo "  Add 'host all all 127.0.0.1/32 trust' at the top of its pg_hba.conf and reload it" >&2
	echo "  (a test machine's setting: every local user can then connect as any role)." >&2
	exit 1
fi
