#!/usr/bin/env bash
# pg-standby.sh: a throw-away PostgreSQL primary plus a streaming hot standby on
# loopback, for failover tests of claimlock. It never touches a system
# PostgreSQL: both servers have their own data directories, ports and socket
# directory under a state directory, and only the postmasters recorded there
# (and their children) are ever signalled.
#
# Usage:
#   eval "$(scripts/pg-standby.sh start)"          # idempotent; prints the export line
#   eval "$(scripts/pg-standby.sh start --sync)"   # synchronous replication (see CLAIMLOCK_PG_SYNC)
#   scripts/pg-standby.sh status                    # roles, replication state; exit 0 iff streaming
#   scripts/pg-standby.sh env                       # print the export line again
#   scripts/pg-standby.sh sync MODE                 # switch the primary: off (async) | on | remote_write | remote_apply
#   scripts/pg-standby.sh kill-primary              # SIGKILL the primary postmaster and its children
#   eval "$(scripts/pg-standby.sh promote [--stop-old|--kill-old])"
#                                                   # promote the standby (first stopping/killing the old
#                                                   # primary if asked); prints the new primary's DSN
#   scripts/pg-standby.sh sql primary|standby 'SQL' # psql helper
#   scripts/pg-standby.sh stop                      # stop both (fast shutdown, then SIGKILL)
#   scripts/pg-standby.sh clean                     # stop, then delete the state directory
#
# After a promote the pair is not a pair any more: the next 'start' (after a
# 'stop') rebuilds both servers from scratch.
#
# Environment:
#   CLAIMLOCK_PG_DIR            state directory (default ${TMPDIR:-/tmp}/claimlock-pg-standby)
#   CLAIMLOCK_PG_PRIMARY_PORT   default 15432
#   CLAIMLOCK_PG_STANDBY_PORT   default 15433
#   CLAIMLOCK_PG_SYNC           off (default: asynchronous) | on | remote_write | remote_apply;
#                               --sync on the command line means "on", --async "off"
#   CLAIMLOCK_PG_BIN            directory of initdb/pg_ctl (detected when unset)
#   CLAIMLOCK_PG_TIMEOUT        seconds for each bounded wait (default 60)
#
# stdout carries only export lines (start, env, promote); progress goes to stderr.
set -euo pipefail

STATE=${CLAIMLOCK_PG_DIR:-${TMPDIR:-/tmp}/claimlock-pg-standby}
PPORT=${CLAIMLOCK_PG_PRIMARY_PORT:-15432}
SPORT=${CLAIMLOCK_PG_STANDBY_PORT:-15433}
SYNC=${CLAIMLOCK_PG_SYNC:-off}
TIMEOUT=${CLAIMLOCK_PG_TIMEOUT:-60}
SLOT=claimlock_standby
APP_NAME=claimlock_standby

log() { printf '[pg-standby] %s\n' "$*" >&2; }
die() {
	printf '[pg-standby] error: %s\n' "$*" >&2
	exit 1
}

case "$STATE" in /*) ;; *) STATE="$PWD/$STATE" ;; esac
PDATA=$STATE/primary
SDATA=$STATE/standby
RUNDIR=$STATE/run

url() { echo "postgres://postgres@127.0.0.1:$1/postgres?sslmode=disable"; }
print_env() {
	echo "export CLAIMLOCK_PG_PRIMARY_DSN='$(url "$PPORT")' CLAIMLOCK_PG_STANDBY_DSN='$(url "$SPORT")'"
}

# --- prerequisites ------------------------------------------------------------

apt_updated=0
apt_install() {
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
	if [ "$apt_updated" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || return 1
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

newest_bin() { # the bin directory of the newest /usr/lib/postgresql/<version>
	local d
	for d in /usr/lib/postgresql/*/bin; do
		if [ -x "$d/initdb" ]; then echo "$d"; fi
	done | sort -V | tail -n 1
}

BIN=
find_bin() {
	local d
	if [ -n "${CLAIMLOCK_PG_BIN:-}" ]; then
		BIN=$CLAIMLOCK_PG_BIN
	else
		d=$(newest_bin)
		if [ -z "$d" ] && command -v pg_config >/dev/null 2>&1; then d=$(pg_config --bindir); fi
		if [ -z "$d" ] && command -v initdb >/dev/null 2>&1; then d=$(dirname "$(command -v initdb)"); fi
		if [ -z "$d" ]; then
			log "installing PostgreSQL"
			apt_install postgresql postgresql-client || die "PostgreSQL not found and cannot be installed"
			d=$(newest_bin)
		fi
		BIN=$d
	fi
	if [ ! -x "$BIN/initdb" ] || [ ! -x "$BIN/pg_ctl" ]; then die "no initdb/pg_ctl in '$BIN' (set CLAIMLOCK_PG_BIN)"; fi
}

# As root the servers run as the 'postgres' user; otherwise as the caller.
AS=()
pick_user() {
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' OS user"
		runuser -u postgres -- test -x "$(dirname "$STATE")" 2>/dev/null ||
			die "user postgres cannot reach $(dirname "$STATE"); set CLAIMLOCK_PG_DIR"
		AS=(runuser -u postgres --)
	fi
}

prepare() {
	find_bin
	pick_user
}

as_pg() { (cd "$STATE" && "${AS[@]}" "$@"); }

psql_at() { # psql_at PORT SQL -> unaligned tuples
	(cd "$STATE" && "${AS[@]}" "$BIN/psql" -X -q -h 127.0.0.1 -p "$1" -U postgres -d postgres -v ON_ERROR_STOP=1 -tAc "$2")
}

# --- process helpers ----------------------------------------------------------

pm_pid() { # prints the postmaster PID of a data directory if it runs
	local dir=$1 p
	[ -f "$dir/postmaster.pid" ] || return 1
	p=$(head -n 1 "$dir/postmaster.pid" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 1
	tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "$dir" || return 1
	echo "$p"
}

wait_gone() { # wait_gone PID SECONDS
	local p=$1 deadline=$((SECONDS + $2))
	while kill -0 "$p" 2>/dev/null; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
}

kill_server() { # SIGKILL the postmaster of DIR and its children, by PID
	local dir=$1 p kids k
	p=$(pm_pid "$dir") || return 0
	kids=$(ps -o pid= --ppid "$p" 2>/dev/null | awk '{printf "%s%s", sep, $1; sep = " "}' || true)
	kill -KILL "$p" 2>/dev/null || true
	for k in $kids; do kill -KILL "$k" 2>/dev/null || true; done
	wait_gone "$p" 10 || die "postmaster $p survived SIGKILL"
	for k in $kids; do wait_gone "$k" 10 || true; done
	log "killed postmaster $p of $dir (and children: $kids)"
}

stop_server() { # fast shutdown, then SIGKILL
	local dir=$1 p
	p=$(pm_pid "$dir") || return 0
	if ! as_pg "$BIN/pg_ctl" -D "$dir" -m fast -w -t 30 stop >/dev/null 2>&1; then
		log "fast shutdown of $dir did not finish in 30s; SIGKILL"
		kill_server "$dir"
	fi
	wait_gone "$p" 10 || true
	log "stopped $(basename "$dir") (pid $p)"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_server() { # start_server DIR PORT
	local dir=$1 port=$2
	if pm_pid "$dir" >/dev/null; then return 0; fi
	port_busy "$port" && die "port $port is in use by another process"
	rm -f "$dir/postmaster.pid"
	as_pg "$BIN/pg_ctl" -D "$dir" -l "$STATE/$(basename "$dir").log" -w -t "$TIMEOUT" start >/dev/null ||
		{ tail -n 20 "$STATE/$(basename "$dir").log" >&2; die "$(basename "$dir") did not start"; }
	log "started $(basename "$dir") on port $port (pid $(pm_pid "$dir"))"
}

# --- configuration ------------------------------------------------------------

write_sync_conf() { # write_sync_conf DIR MODE
	local dir=$1 mode=$2 names commit
	case "$mode" in
	off | async) names='' commit=on ;;
	on | sync) names=$APP_NAME commit=on ;;
	remote_write | remote_apply) names=$APP_NAME commit=$mode ;;
	*) die "sync mode must be off, on, remote_write or remote_apply (got '$mode')" ;;
	esac
	cat >"$dir/claimlock_sync.conf" <<EOF
# written by pg-standby.sh (sync mode: $mode)
synchronous_standby_names = '$names'
synchronous_commit = $commit
EOF
	[ "$(id -u)" != 0 ] || chown postgres:postgres "$dir/claimlock_sync.conf"
}

init_primary() {
	log "initdb $PDATA"
	as_pg "$BIN/initdb" -D "$PDATA" -U postgres --auth=trust -E UTF8 --locale=C -N >"$STATE/initdb.log" 2>&1 ||
		{ cat "$STATE/initdb.log" >&2; die "initdb failed"; }
	cat >>"$PDATA/postgresql.conf" <<EOF

# --- pg-standby.sh ---
listen_addresses = '127.0.0.1'
port = $PPORT
unix_socket_directories = '$RUNDIR'
cluster_name = 'claimlock_primary'
max_connections = 100
shared_buffers = 32MB
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
wal_keep_size = 64MB
wal_log_hints = on
hot_standby = on
hot_standby_feedback = on
wal_receiver_status_interval = 1s
log_line_prefix = '%m [%p] %q%a '
include_if_exists = 'claimlock_sync.conf'
EOF
	write_sync_conf "$PDATA" off
	# initdb's trust pg_hba.conf already admits replication from 127.0.0.1.
}

init_standby() {
	log "pg_basebackup -R -> $SDATA"
	psql_at "$PPORT" "SELECT pg_drop_replication_slot('$SLOT') FROM pg_replication_slots WHERE slot_name = '$SLOT' AND NOT active" >/dev/null
	as_pg "$BIN/pg_basebackup" -d "host=127.0.0.1 port=$PPORT user=postgres application_name=$APP_NAME" \
		-D "$SDATA" -R -C -S "$SLOT" -X stream -c fast >"$STATE/basebackup.log" 2>&1 ||
		{ cat "$STATE/basebackup.log" >&2; die "pg_basebackup failed"; }
	cat >>"$SDATA/postgresql.conf" <<EOF
# --- pg-standby.sh: standby overrides ---
port = $SPORT
cluster_name = '$APP_NAME'
EOF
	# Never wait for a synchronous standby of its own once promoted.
	write_sync_conf "$SDATA" off
	grep -q "application_name" "$SDATA/postgresql.auto.conf" ||
		die "pg_basebackup -R wrote no application_name into primary_conninfo"
}

in_recovery() { psql_at "$1" "SELECT pg_is_in_recovery()" 2>/dev/null; }

wait_streaming() {
	local deadline=$((SECONDS + TIMEOUT)) st=
	while :; do
		st=$(psql_at "$PPORT" "SELECT state FROM pg_stat_replication WHERE application_name = '$APP_NAME'" 2>/dev/null || true)
		[ "$st" = streaming ] && return 0
		[ $SECONDS -lt $deadline ] || die "standby not streaming after ${TIMEOUT}s (state '$st'; see $STATE/standby.log)"
		sleep 0.3
	done
}

apply_sync() { # apply_sync MODE on the running primary
	local mode=$1 deadline=$((SECONDS + TIMEOUT)) got want
	write_sync_conf "$PDATA" "$mode"
	psql_at "$PPORT" "SELECT pg_reload_conf()" >/dev/null
	case "$mode" in off | async) want=async ;; *) want=sync ;; esac
	while :; do
		got=$(psql_at "$PPORT" "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$APP_NAME'" 2>/dev/null || true)
		[ "$got" = "$want" ] && break
		[ $SECONDS -lt $deadline ] || die "sync_state is '$got', expected '$want'"
		sleep 0.2
	done
	log "replication mode: $mode (sync_state=$got, synchronous_commit=$(psql_at "$PPORT" "SHOW synchronous_commit"))"
}

# --- commands -----------------------------------------------------------------

cmd_start() {
	local t0=$SECONDS
	while [ $# -gt 0 ]; do
		case "$1" in
		--sync) SYNC=on ;;
		--async) SYNC=off ;;
		--sync=*) SYNC=${1#--sync=} ;;
		*) die "unknown start option '$1'" ;;
		esac
		shift
	done
	prepare
	if [ -f "$STATE/promoted" ]; then
		log "the standby was promoted earlier: rebuilding the pair from scratch"
		stop_server "$SDATA"
		stop_server "$PDATA"
		rm -rf "$PDATA" "$SDATA" "$STATE/promoted"
	fi
	mkdir -p "$STATE" "$RUNDIR"
	chmod 755 "$STATE"
	[ "$(id -u)" != 0 ] || chown postgres:postgres "$STATE" "$RUNDIR"
	[ -f "$PDATA/PG_VERSION" ] || { rm -rf "$PDATA"; init_primary; }
	start_server "$PDATA" "$PPORT"
	[ "$(in_recovery "$PPORT")" = f ] || die "the server on $PPORT is not a primary"
	if [ ! -f "$SDATA/PG_VERSION" ]; then
		stop_server "$SDATA"
		rm -rf "$SDATA"
		init_standby
	fi
	start_server "$SDATA" "$SPORT"
	[ "$(in_recovery "$SPORT")" = t ] || die "the server on $SPORT is not in recovery"
	wait_streaming
	apply_sync "$SYNC"
	log "primary :$PPORT, standby :$SPORT streaming ($((SECONDS - t0))s)"
	print_env
}

cmd_stop() {
	find_bin
	pick_user
	[ -d "$STATE" ] || { log "nothing to stop"; return 0; }
	stop_server "$SDATA"
	stop_server "$PDATA"
	log "stopped"
}

cmd_status() {
	local ok=0 p
	prepare
	if p=$(pm_pid "$PDATA"); then
		echo "primary pid=$p port=$PPORT in_recovery=$(in_recovery "$PPORT" || echo '?')"
		psql_at "$PPORT" "SELECT 'replication application_name=' || application_name || ' state=' || state || ' sync_state=' || sync_state || ' replay_lag=' || coalesce(replay_lag::text, '0') FROM pg_stat_replication" 2>/dev/null || true
		psql_at "$PPORT" "SELECT 'slot ' || slot_name || ' active=' || active FROM pg_replication_slots" 2>/dev/null || true
		echo "primary synchronous_standby_names='$(psql_at "$PPORT" "SHOW synchronous_standby_names" || true)' synchronous_commit=$(psql_at "$PPORT" "SHOW synchronous_commit" || true)"
		[ "$(psql_at "$PPORT" "SELECT count(*) FROM pg_stat_replication WHERE application_name = '$APP_NAME' AND state = 'streaming'" 2>/dev/null || true)" = 1 ] && ok=1
	else
		echo "primary stopped"
	fi
	if p=$(pm_pid "$SDATA"); then
		echo "standby pid=$p port=$SPORT in_recovery=$(in_recovery "$SPORT" || echo '?')$([ -f "$STATE/promoted" ] && echo ' (promoted)')"
		psql_at "$SPORT" "SELECT 'wal_receiver status=' || status || ' sender_port=' || sender_port FROM pg_stat_wal_receiver" 2>/dev/null || true
	else
		echo "standby stopped"
	fi
	[ "$ok" = 1 ]
}

cmd_promote() {
	local old='keep' deadline
	while [ $# -gt 0 ]; do
		case "$1" in
		--stop-old) old='stop' ;;
		--kill-old) old='kill' ;;
		--keep-old) old='keep' ;;
		*) die "unknown promote option '$1'" ;;
		esac
		shift
	done
	prepare
	pm_pid "$SDATA" >/dev/null || die "the standby is not running"
	case "$old" in
	stop) stop_server "$PDATA" ;;
	kill) kill_server "$PDATA" ;;
	esac
	if [ "$(in_recovery "$SPORT")" = t ]; then
		as_pg "$BIN/pg_ctl" -D "$SDATA" -w -t "$TIMEOUT" promote >/dev/null || die "pg_ctl promote failed"
	fi
	touch "$STATE/promoted"
	deadline=$((SECONDS + TIMEOUT))
	until [ "$(in_recovery "$SPORT")" = f ]; do
		[ $SECONDS -lt $deadline ] || die "standby still in recovery after ${TIMEOUT}s"
		sleep 0.2
	done
	log "standby on $SPORT promoted (WAL timeline $(psql_at "$SPORT" "SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)")); old primary: $old"
	echo "export CLAIMLOCK_PG_PRIMARY_DSN='$(url "$SPORT")' CLAIMLOCK_PG_OLD_PRIMARY_DSN='$(url "$PPORT")'"
}

cmd_kill_primary() {
	prepare
	pm_pid "$PDATA" >/dev/null || die "the primary is not running"
	kill_server "$PDATA"
}

cmd_sync() {
	prepare
	pm_pid "$PDATA" >/dev/null || die "the primary is not running"
	apply_sync "${1:?mode expected: off, on, remote_write or remote_apply}"
}

cmd_sql() {
	prepare
	case "${1:-}" in
	primary) psql_at "$PPORT" "${2:?SQL expected}" ;;
	standby) psql_at "$SPORT" "${2:?SQL expected}" ;;
	*) die "sql primary|standby 'SQL'" ;;
	esac
}

cmd_clean() {
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
stop) cmd_stop ;;
status) cmd_status ;;
env) print_env ;;
promote) cmd_promote "$@" ;;
kill-primary) cmd_kill_primary ;;
sync) cmd_sync "$@" ;;
sql) cmd_sql "$@" ;;
clean) cmd_clean ;;
*) usage ;;
esac
