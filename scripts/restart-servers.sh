#!/usr/bin/env bash
# restart-servers.sh: a throw-away PostgreSQL server and a throw-away MariaDB
# server on loopback, which the restart scenario of internal/chaos kills and
# restarts while workers drain a task. It never touches a system server:
# both have their own data directories, ports and sockets under a state
# directory, and only the processes recorded there are ever signalled.
#
# Usage:
#   eval "$(scripts/restart-servers.sh start)"   # idempotent; prints the export line
#   scripts/restart-servers.sh start pg          # only the PostgreSQL server
#   scripts/restart-servers.sh kill pg|mysql [SECONDS]
#                                   # SIGKILL the server (and its children), wait
#                                   # SECONDS (default 1), start it, wait until it answers
#   scripts/restart-servers.sh restart pg|mysql [SECONDS]
#                                   # the same with a clean shutdown
#   scripts/restart-servers.sh env   # print the export line again
#   scripts/restart-servers.sh stop  # stop both (clean shutdown, then SIGKILL)
#   scripts/restart-servers.sh clean # stop, then delete the state directory
#
# Environment:
#   CLAIMLOCK_RESTART_DIR      state directory (default ${TMPDIR:-/tmp}/claimlock-restart)
#   CLAIMLOCK_RESTART_PG_PORT  default 26432
#   CLAIMLOCK_RESTART_MY_PORT  default 26306
#   (start records the ports in the state directory; the other commands take
#   them from there, so that a kill or restart reaches the servers it started
#   whatever its environment says)
#   CLAIMLOCK_PG_BIN           directory of initdb/pg_ctl (detected when unset)
#   CLAIMLOCK_RESTART_PG_MAX_CONNECTIONS  PostgreSQL's max_connections (default 100)
#   CLAIMLOCK_RESTART_PG_SHARED_BUFFERS   PostgreSQL's shared_buffers (default 32MB)
#   (both are written when the data directory is made)
#
# The export line sets CLAIMLOCK_POSTGRES_DSN and CLAIMLOCK_MYSQL_DSN (a
# database claimlock_restart on each server) and CLAIMLOCK_CHAOS_OUTAGE (this
# script's path, which the tests call with kill/restart).
# stdout carries only export lines; progress goes to stderr.
set -euo pipefail

SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
STATE=${CLAIMLOCK_RESTART_DIR:-${TMPDIR:-/tmp}/claimlock-restart}
PGPORT=${CLAIMLOCK_RESTART_PG_PORT:-26432}
MYPORT=${CLAIMLOCK_RESTART_MY_PORT:-26306}
PGMAXCONN=${CLAIMLOCK_RESTART_PG_MAX_CONNECTIONS:-100}
PGBUFFERS=${CLAIMLOCK_RESTART_PG_SHARED_BUFFERS:-32MB}
case "$PGMAXCONN" in '' | *[!0-9]*) printf '[restart-servers] error: CLAIMLOCK_RESTART_PG_MAX_CONNECTIONS must be a number\n' >&2; exit 2 ;; esac
case "$PGBUFFERS" in '' | *[!0-9A-Za-z]*) printf '[restart-servers] error: CLAIMLOCK_RESTART_PG_SHARED_BUFFERS must look like 128MB\n' >&2; exit 2 ;; esac
TIMEOUT=60

log() { printf '[restart-servers] %s\n' "$*" >&2; }
die() {
	printf '[restart-servers] error: %s\n' "$*" >&2
	exit 1
}

case "$STATE" in /*) ;; *) STATE="$PWD/$STATE" ;; esac
PGDATA=$STATE/pg
MYDIR=$STATE/mariadb

print_env() {
	echo "export CLAIMLOCK_POSTGRES_DSN='postgres://postgres@127.0.0.1:$PGPORT/claimlock_restart?sslmode=disable'" \
		"CLAIMLOCK_MYSQL_DSN='claimlock:claimlock@tcp(127.0.0.1:$MYPORT)/claimlock_restart'" \
		"CLAIMLOCK_CHAOS_OUTAGE='$SELF'"
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

# --- binaries and users ---------------------------------------------------------

PGBIN=
find_pg() {
	local d
	if [ -n "${CLAIMLOCK_PG_BIN:-}" ]; then
		PGBIN=$CLAIMLOCK_PG_BIN
		return
	fi
	d=$(for x in /usr/lib/postgresql/*/bin; do [ -x "$x/initdb" ] && echo "$x"; done | sort -V | tail -n 1)
	if [ -z "$d" ]; then
		log "installing PostgreSQL"
		apt_install postgresql postgresql-client || die "PostgreSQL not found and cannot be installed"
		d=$(for x in /usr/lib/postgresql/*/bin; do [ -x "$x/initdb" ] && echo "$x"; done | sort -V | tail -n 1)
	fi
	PGBIN=$d
	[ -x "$PGBIN/pg_ctl" ] || die "no initdb/pg_ctl in '$PGBIN' (set CLAIMLOCK_PG_BIN)"
}

MARIADBD=
find_mariadb() {
	MARIADBD=$(command -v mariadbd || true)
	[ -n "$MARIADBD" ] || [ ! -x /usr/sbin/mariadbd ] || MARIADBD=/usr/sbin/mariadbd
	if [ -z "$MARIADBD" ]; then
		log "installing MariaDB"
		apt_install mariadb-server mariadb-client || die "mariadbd not found and cannot be installed"
		MARIADBD=/usr/sbin/mariadbd
	fi
}

# As root, PostgreSQL runs as 'postgres' and MariaDB as 'mysql'.
PG_AS=()
MY_USER=$(id -un)
pick_users() {
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' OS user"
		PG_AS=(runuser -u postgres --)
		if id mysql >/dev/null 2>&1; then MY_USER=mysql; else MY_USER=root; fi
	fi
}

prepare() {
	find_pg
	find_mariadb
	pick_users
	mkdir -p "$STATE"
	chmod 755 "$STATE"
}

# ports_recorded [lenient] takes the ports start recorded, if any: the
# servers of a state directory keep the ports they were made with. An
# environment naming other ports is an error, except for stop (lenient).
ports_recorded() {
	[ -f "$STATE/ports" ] || return 0
	local pg my
	read -r pg my <"$STATE/ports" || true
	case "$pg$my" in '' | *[!0-9]*) die "$STATE/ports is not two port numbers" ;; esac
	if [ "${1:-}" = lenient ]; then
		PGPORT=$pg MYPORT=$my
		return 0
	fi
	if [ -n "${CLAIMLOCK_RESTART_PG_PORT:-}" ] && [ "$CLAIMLOCK_RESTART_PG_PORT" != "$pg" ]; then
		die "this state directory's PostgreSQL runs on port $pg, not $CLAIMLOCK_RESTART_PG_PORT"
	fi
	if [ -n "${CLAIMLOCK_RESTART_MY_PORT:-}" ] && [ "$CLAIMLOCK_RESTART_MY_PORT" != "$my" ]; then
		die "this state directory's MariaDB runs on port $my, not $CLAIMLOCK_RESTART_MY_PORT"
	fi
	PGPORT=$pg MYPORT=$my
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_gone() { # wait_gone PID SECONDS
	local p=$1 deadline=$((SECONDS + $2))
	while kill -0 "$p" 2>/dev/null; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}

# --- PostgreSQL -------------------------------------------------------------------

pg_pid() {
	local p
	[ -f "$PGDATA/postmaster.pid" ] || return 1
	p=$(head -n 1 "$PGDATA/postmaster.pid" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 1
	tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "$PGDATA" || return 1
	echo "$p"
}

pg_psql() { (cd "$STATE" && "${PG_AS[@]}" "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -tAc "$1"); }

pg_init() {
	[ -f "$PGDATA/PG_VERSION" ] && return 0
	mkdir -p "$PGDATA"
	[ "$(id -u)" != 0 ] || chown postgres:postgres "$PGDATA"
	log "initdb $PGDATA"
	(cd "$STATE" && "${PG_AS[@]}" "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C -N) >"$STATE/pg-initdb.log" 2>&1 ||
		{ cat "$STATE/pg-initdb.log" >&2; die "initdb failed"; }
	cat >>"$PGDATA/postgresql.conf" <<EOF

# --- restart-servers.sh ---
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$PGDATA'
max_connections = $PGMAXCONN
shared_buffers = $PGBUFFERS
fsync = on
EOF
}

pg_start() {
	pg_pid >/dev/null && return 0
	port_busy "$PGPORT" && die "port $PGPORT is in use by another process"
	rm -f "$PGDATA/postmaster.pid"
	(cd "$STATE" && "${PG_AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t "$TIMEOUT" start) >/dev/null ||
		{ tail -n 20 "$PGDATA/server.log" >&2; die "PostgreSQL did not start"; }
	local deadline=$((SECONDS + TIMEOUT))
	until pg_psql "SELECT 1" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || die "PostgreSQL does not answer"
		sleep 0.1
	done
}

pg_kill() {
	local p kids k
	p=$(pg_pid) || return 0
	kids=$(ps -o pid= --ppid "$p" 2>/dev/null | tr -s ' \n' ' ' || true)
	kill -KILL "$p" 2>/dev/null || true
	for k in $kids; do kill -KILL "$k" 2>/dev/null || true; done
	wait_gone "$p" 10 || die "postmaster $p survived SIGKILL"
	for k in $kids; do wait_gone "$k" 10 || true; done
}

pg_stop() {
	pg_pid >/dev/null || return 0
	(cd "$STATE" && "${PG_AS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w -t 30 stop) >/dev/null 2>&1 || pg_kill
}

# --- MariaDB ----------------------------------------------------------------------

my_pid() {
	local p
	[ -f "$STATE/mariadbd.pid" ] || return 1
	p=$(cat "$STATE/mariadbd.pid" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 1
	tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$MYDIR/my.cnf" || return 1
	echo "$p"
}

# running reports whether process $1 exists and has not exited (a zombie
# has: this script has not reaped it yet).
running() {
	local s
	s=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
	[ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}

my_sql() { mariadb --no-defaults -uroot -S "$MYDIR/mysqld.sock" --connect-timeout=5 -NB -e "$1"; }

my_init() {
	mkdir -p "$MYDIR/data" "$MYDIR/tmp"
	cat >"$MYDIR/my.cnf" <<EOF
# generated by restart-servers.sh
[mysqld]
user                       = $MY_USER
datadir                    = $MYDIR/data
socket                     = $MYDIR/mysqld.sock
pid-file                   = $MYDIR/mariadbd.pid
log-error                  = $MYDIR/error.log
tmpdir                     = $MYDIR/tmp
port                       = $MYPORT
bind-address               = 127.0.0.1
skip-name-resolve
character-set-server       = utf8mb4
collation-server           = utf8mb4_general_ci
innodb_buffer_pool_size    = 64M
innodb_log_file_size       = 32M
performance_schema         = OFF
max_connections            = 300
EOF
	if [ ! -d "$MYDIR/data/mysql" ]; then
		log "mariadb-install-db $MYDIR/data"
		local inst
		inst=$(command -v mariadb-install-db || command -v mysql_install_db) || die "mariadb-install-db not found"
		[ "$(id -u)" != 0 ] || chown -R "$MY_USER" "$MYDIR"
		# --tmpdir: the server's own, as in its my.cnf, never /tmp, where a
		# mariadbd starting at the same moment (the Galera nodes of CI's
		# scale-out stage) removes '#sql*' files, the bootstrap's
		# temporary tables among them.
		"$inst" --no-defaults --datadir="$MYDIR/data" --tmpdir="$MYDIR/tmp" --user="$MY_USER" --auth-root-authentication-method=normal \
			--skip-test-db --skip-name-resolve >"$MYDIR/install-db.log" 2>&1 ||
			{ cat "$MYDIR/install-db.log" >&2; die "mariadb-install-db failed"; }
	fi
	[ "$(id -u)" != 0 ] || chown -R "$MY_USER" "$MYDIR"
}

my_start() {
	my_pid >/dev/null && return 0
	port_busy "$MYPORT" && die "port $MYPORT is in use by another process"
	rm -f "$MYDIR/mysqld.sock"
	setsid "$MARIADBD" --defaults-file="$MYDIR/my.cnf" >>"$MYDIR/console.log" 2>&1 </dev/null &
	local started=$!
	echo "$started" >"$STATE/mariadbd.pid"
	local deadline=$((SECONDS + TIMEOUT))
	until my_sql "SELECT 1" >/dev/null 2>&1; do
		# By its pid, not my_pid's command line: until the background
		# shell has run exec, that line is still this script's.
		if ! running "$started"; then
			tail -n 20 "$MYDIR/error.log" >&2 || true
			die "mariadbd exited while starting"
		fi
		[ $SECONDS -lt $deadline ] || die "MariaDB does not answer"
		sleep 0.1
	done
}

my_kill() {
	local p
	p=$(my_pid) || return 0
	kill -KILL "$p" 2>/dev/null || true
	wait_gone "$p" 10 || die "mariadbd $p survived SIGKILL"
}

my_stop() {
	local p
	p=$(my_pid) || return 0
	kill -TERM "$p" 2>/dev/null || true
	wait_gone "$p" 60 || my_kill
}

# --- commands -----------------------------------------------------------------------

cmd_start() { # cmd_start [pg]
	prepare
	ports_recorded
	echo "$PGPORT $MYPORT" >"$STATE/ports"
	pg_init
	pg_start
	[ "$(pg_psql "SELECT count(*) FROM pg_database WHERE datname = 'claimlock_restart'")" = 1 ] ||
		pg_psql "CREATE DATABASE claimlock_restart" >/dev/null
	case "${1:-}" in
	'') ;;
	pg)
		log "PostgreSQL :$PGPORT (pid $(pg_pid))"
		echo "export CLAIMLOCK_POSTGRES_DSN='postgres://postgres@127.0.0.1:$PGPORT/claimlock_restart?sslmode=disable'"
		return 0
		;;
	*) usage ;;
	esac
	my_init
	my_start
	my_sql "CREATE DATABASE IF NOT EXISTS claimlock_restart;
		CREATE USER IF NOT EXISTS 'claimlock'@'127.0.0.1' IDENTIFIED BY 'claimlock';
		GRANT ALL ON *.* TO 'claimlock'@'127.0.0.1';"
	log "PostgreSQL :$PGPORT (pid $(pg_pid)), MariaDB :$MYPORT (pid $(my_pid))"
	print_env
}

cmd_outage() { # cmd_outage kill|restart pg|mysql [SECONDS]
	local how=$1 which=${2:-} down=${3:-1} t0
	prepare
	ports_recorded
	t0=$(date +%s.%N)
	case "$which:$how" in
	pg:kill) pg_kill ;;
	pg:restart) pg_stop ;;
	mysql:kill) my_kill ;;
	mysql:restart) my_stop ;;
	*) die "usage: $how pg|mysql [SECONDS]" ;;
	esac
	sleep "$down"
	case "$which" in
	pg) pg_start ;;
	mysql) my_start ;;
	esac
	log "$which: $how, down ${down}s, answering again after $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || echo '?')s"
}

cmd_stop() {
	prepare
	ports_recorded lenient
	pg_stop
	my_stop
	log "stopped"
}

cmd_clean() {
	[ -d "$STATE" ] || return 0
	cmd_stop
	rm -rf "$STATE"
	log "removed $STATE"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case "$cmd" in
start) cmd_start "$@" ;;
kill | restart) cmd_outage "$cmd" "$@" ;;
env)
	ports_recorded
	print_env
	;;
stop) cmd_stop ;;
clean) cmd_clean ;;
*) usage ;;
esac
