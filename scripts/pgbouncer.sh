#!/usr/bin/env bash
# pgbouncer.sh: a throw-away PgBouncer in transaction pooling mode on
# loopback, in front of an existing PostgreSQL, for claimlock's pooler tests.
# It never touches a system PgBouncer: its config, auth file, pid file and
# log live under a state directory, it listens on its own port (no Unix
# socket), and only the process recorded in its pid file is ever signalled.
# Besides CLAIMLOCK_PGBOUNCER_DB it leads any other database name to the
# same server ("* =" entry), for tests that isolate themselves in a
# database of their own.
#
# Usage:
#   eval "$(scripts/pgbouncer.sh start)"   # idempotent; prints the export line
#   scripts/pgbouncer.sh env               # print the export line again
#   scripts/pgbouncer.sh stop              # stop it (SIGTERM, then SIGKILL)
#   scripts/pgbouncer.sh clean             # stop, then delete the state directory
#
# Environment:
#   CLAIMLOCK_PGBOUNCER_DIR       state directory (default ${TMPDIR:-/tmp}/claimlock-pgbouncer)
#   CLAIMLOCK_PGBOUNCER_PORT      its port (default 26433)
#   CLAIMLOCK_PGBOUNCER_UPSTREAM  the PostgreSQL server, host:port (default 127.0.0.1:5432)
#   CLAIMLOCK_PGBOUNCER_DB        the database clients use (default claimlock_ci)
#   CLAIMLOCK_PGBOUNCER_USER      user (default postgres) ...
#   CLAIMLOCK_PGBOUNCER_PASSWORD  ... and password (default postgres), both for
#                                 clients (SCRAM against the auth file) and for
#                                 PgBouncer's own logins to the server
#   CLAIMLOCK_PGBOUNCER_POOL      server connections per database and user (default 20)
#
# stdout carries only export lines (start, env); progress goes to stderr.
set -euo pipefail

STATE=${CLAIMLOCK_PGBOUNCER_DIR:-${TMPDIR:-/tmp}/claimlock-pgbouncer}
PORT=${CLAIMLOCK_PGBOUNCER_PORT:-26433}
UPSTREAM=${CLAIMLOCK_PGBOUNCER_UPSTREAM:-127.0.0.1:5432}
DB=${CLAIMLOCK_PGBOUNCER_DB:-claimlock_ci}
PGUSER_=${CLAIMLOCK_PGBOUNCER_USER:-postgres}
PASSWORD=${CLAIMLOCK_PGBOUNCER_PASSWORD:-postgres}
POOL=${CLAIMLOCK_PGBOUNCER_POOL:-20}

log() { printf '[pgbouncer] %s\n' "$*" >&2; }
die() {
	printf '[pgbouncer] error: %s\n' "$*" >&2
	exit 1
}

case "$STATE" in /*) ;; *) STATE="$PWD/$STATE" ;; esac
PIDFILE=$STATE/pgbouncer.pid
CONF=$STATE/pgbouncer.ini
LOG=$STATE/pgbouncer.log

print_env() {
	echo "export CLAIMLOCK_PGBOUNCER_DSN='postgres://$PGUSER_:$PASSWORD@127.0.0.1:$PORT/$DB?sslmode=disable'"
}

apt_updated=0
apt_install() {
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
	if [ "$apt_updated" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || return 1
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

BIN=
find_bin() {
	BIN=$(command -v pgbouncer || true)
	[ -n "$BIN" ] || { [ -x /usr/sbin/pgbouncer ] && BIN=/usr/sbin/pgbouncer; } || true
	if [ -z "$BIN" ]; then
		log "installing pgbouncer"
		apt_install pgbouncer || die "pgbouncer is not installed and apt-get cannot install it"
		# Debian's package enables a system instance on 6432; this script
		# never uses or stops it.
		BIN=/usr/sbin/pgbouncer
	fi
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

start() {
	if running; then
		log "already running (pid $(cat "$PIDFILE")) on port $PORT"
		print_env
		return
	fi
	find_bin
	mkdir -p "$STATE"
	local host=${UPSTREAM%:*} port=${UPSTREAM##*:}
	cat >"$CONF" <<EOF
[databases]
$DB = host=$host port=$port dbname=$DB
; Any other database name goes to the same server under that name: the
; conformance suite runs through here on a database per test, since
; transaction pooling does not keep the search_path it isolates tests with.
* = host=$host port=$port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
pidfile = $PIDFILE
logfile = $LOG
auth_type = scram-sha-256
auth_file = $STATE/userlist.txt
pool_mode = transaction
default_pool_size = $POOL
max_client_conn = 1000
server_lifetime = 3600
; A server connection is checked (server_check_query) every time before it
; is handed out again: the test kit ends every session of a test's
; database before another test reuses it, and a pooled connection ended
; that way must be replaced, not given to the next test (which then failed
; with "terminating connection due to administrator command").
server_check_delay = 0
ignore_startup_parameters = extra_float_digits
EOF
	printf '"%s" "%s"\n' "$PGUSER_" "$PASSWORD" >"$STATE/userlist.txt"
	chmod 600 "$STATE/userlist.txt"
	local as=()
	if [ "$(id -u)" = 0 ]; then
		# PgBouncer refuses to run as root.
		chown -R postgres "$STATE"
		chmod 755 "$STATE"
		as=(-u postgres)
	fi
	log "starting on 127.0.0.1:$PORT (transaction pooling, pool $POOL) in front of $UPSTREAM/$DB"
	"$BIN" -d "${as[@]}" "$CONF" >&2 || die "pgbouncer did not start; log: $(tail -n 20 "$LOG" 2>/dev/null)"
	for _ in $(seq 1 60); do
		if running && (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
			print_env
			return
		fi
		sleep 0.5
	done
	die "pgbouncer did not listen on $PORT; log: $(tail -n 20 "$LOG" 2>/dev/null)"
}

stop() {
	if ! running; then
		rm -f "$PIDFILE"
		return
	fi
	local pid
	pid=$(cat "$PIDFILE")
	log "stopping pid $pid"
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 20); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; return; }
		sleep 0.5
	done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$PIDFILE"
}

case "${1:-}" in
start) start ;;
env) print_env ;;
stop) stop ;;
clean)
	stop
	rm -rf "$STATE"
	;;
*) die "usage: $0 start|env|stop|clean" ;;
esac
