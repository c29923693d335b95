#!/usr/bin/env bash
# galera-cluster.sh: a throw-away three-node MariaDB Galera cluster on loopback
# for scale-out tests of claimlock. It never touches a system MariaDB: every
# node has its own data directory, config file, socket and ports under a state
# directory, and only the PIDs recorded there are ever signalled.
#
# Usage:
#   eval "$(scripts/galera-cluster.sh start)"   # idempotent; prints the export line
#   scripts/galera-cluster.sh status             # per-node wsrep state; exit 0 iff 3 synced nodes
#   scripts/galera-cluster.sh env                # print the export line again
#   scripts/galera-cluster.sh kill-node N        # SIGKILL node N (1..3)
#   scripts/galera-cluster.sh start-node N       # restart node N; waits until it rejoined (IST/SST)
#   scripts/galera-cluster.sh stop-node N        # graceful shutdown of node N
#   scripts/galera-cluster.sh bootstrap-pc [N]   # after a quorum loss (e.g. 2 of 3 nodes killed):
#                                                # make the survivors (node N, default the first
#                                                # running) a primary component again
#   scripts/galera-cluster.sh sql N 'SQL'        # run SQL on node N as root (admin helper)
#   scripts/galera-cluster.sh stop               # stop every node (graceful, then SIGKILL)
#   scripts/galera-cluster.sh clean              # stop, then delete the state directory
#
# Environment:
#   CLAIMLOCK_GALERA_DIR       state directory (default ${TMPDIR:-/tmp}/claimlock-galera)
#   CLAIMLOCK_GALERA_PORT      client port of node 1; nodes 2, 3 use +1, +2 (default 13306)
#   CLAIMLOCK_GALERA_GCOMM_PORT  group port of node 1 (default 14567); node N uses
#                              base+10*(N-1) for gcomm, +1 for IST, +2 for SST
#   CLAIMLOCK_GALERA_TIMEOUT   seconds to wait for a node to be synced (default 120)
#   CLAIMLOCK_GALERA_LIB       path of libgalera_smm.so (detected when unset)
#   CLAIMLOCK_GALERA_FRESH=1   make 'start' delete existing data first
#   CLAIMLOCK_GALERA_PROVIDER_OPTIONS  extra wsrep_provider_options, e.g.
#                              'evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S'
#                              cuts the cluster-wide write stall after a node is SIGKILLed
#                              from ~6.4 s (defaults) to ~3.1 s
#
# A 'start' with nothing running bootstraps node 1 (--wsrep-new-cluster, after
# --wsrep-recover if it was killed) and joins 2 and 3 one after the other; with
# some nodes running it starts only the missing ones (and first restores a
# primary component if the survivors lost quorum). Data survive 'stop'/'start'.
#
# stdout carries only the export line (start, env); progress goes to stderr.
set -euo pipefail

NODES=3
STATE=${CLAIMLOCK_GALERA_DIR:-${TMPDIR:-/tmp}/claimlock-galera}
PORT0=${CLAIMLOCK_GALERA_PORT:-13306}
GPORT0=${CLAIMLOCK_GALERA_GCOMM_PORT:-14567}
TIMEOUT=${CLAIMLOCK_GALERA_TIMEOUT:-120}
DB=claimlock_ci
APP_USER=claimlock
APP_PASS=claimlock
CLUSTER_NAME=claimlock_galera

log() { printf '[galera] %s %s\n' "$(date +%T)" "$*" >&2; }
die() {
	printf '[galera] error: %s\n' "$*" >&2
	exit 1
}

case "$STATE" in /*) ;; *) STATE="$PWD/$STATE" ;; esac

ndir() { echo "$STATE/node$1"; }
cport() { echo $((PORT0 + $1 - 1)); }
gport() { echo $((GPORT0 + 10 * ($1 - 1))); }
iport() { echo $(($(gport "$1") + 1)); }
sport() { echo $(($(gport "$1") + 2)); }
sock() { echo "$(ndir "$1")/mysqld.sock"; }
pidfile() { echo "$(ndir "$1")/node.pid"; }

dsn() { echo "$APP_USER:$APP_PASS@tcp(127.0.0.1:$(cport "$1"))/$DB"; }
print_env() {
	local i list=
	for i in $(seq 1 $NODES); do list="$list${list:+,}$(dsn "$i")"; done
	echo "export CLAIMLOCK_GALERA_DSNS='$list'"
}

check_node_arg() {
	case "${1:-}" in
	[1-9]) [ "$1" -le $NODES ] || die "node must be 1..$NODES" ;;
	*) die "node must be 1..$NODES" ;;
	esac
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

MARIADBD=
CLIENT=
find_binaries() {
	local c
	for c in mariadbd mysqld; do
		if command -v "$c" >/dev/null 2>&1; then MARIADBD=$(command -v "$c"); break; fi
		if [ -x "/usr/sbin/$c" ]; then MARIADBD=/usr/sbin/$c; break; fi
	done
	if [ -z "$MARIADBD" ]; then
		log "installing mariadb-server"
		apt_install mariadb-server mariadb-client || die "mariadbd not found and cannot be installed"
		MARIADBD=/usr/sbin/mariadbd
	fi
	for c in mariadb mysql; do
		if command -v "$c" >/dev/null 2>&1; then CLIENT=$(command -v "$c"); break; fi
	done
	[ -n "$CLIENT" ] || die "no mariadb client found"
}

GALERA_LIB=
find_galera() {
	local c
	for c in "${CLAIMLOCK_GALERA_LIB:-}" /usr/lib/galera/libgalera_smm.so /usr/lib/galera-4/libgalera_smm.so \
		/usr/lib64/galera-4/libgalera_smm.so /usr/lib64/galera/libgalera_smm.so /usr/lib/libgalera_smm.so \
		/usr/lib/x86_64-linux-gnu/galera/libgalera_smm.so; do
		if [ -n "$c" ] && [ -f "$c" ]; then GALERA_LIB=$c; return; fi
	done
	c=$(dpkg -L galera-4 2>/dev/null | grep 'libgalera_smm\.so$' | head -n 1 || true)
	if [ -z "$c" ]; then
		log "installing galera-4"
		apt_install galera-4 || die "libgalera_smm.so not found and galera-4 cannot be installed"
		c=$(dpkg -L galera-4 2>/dev/null | grep 'libgalera_smm\.so$' | head -n 1 || true)
	fi
	if [ -z "$c" ] || [ ! -f "$c" ]; then die "libgalera_smm.so not found (set CLAIMLOCK_GALERA_LIB)"; fi
	GALERA_LIB=$c
}

find_sst_tools() { # state transfers use rsync (wsrep_sst_rsync, no SST user needed)
	command -v rsync >/dev/null 2>&1 || apt_install rsync || die "rsync is needed for SST"
	# The SST script looks for its listening socket with ss or lsof.
	command -v ss >/dev/null 2>&1 || command -v lsof >/dev/null 2>&1 || apt_install iproute2 || true
}

# As root the server runs as the 'mysql' user when it can reach the state
# directory, else as root. As any other user, as that user.
RUN_USER=
pick_user() {
	if [ "$(id -u)" != 0 ]; then
		RUN_USER=$(id -un)
	elif id mysql >/dev/null 2>&1 && runuser -u mysql -- test -x "$(dirname "$STATE")" 2>/dev/null; then
		RUN_USER=mysql
	else
		RUN_USER=root
	fi
}

prepare() {
	find_binaries
	find_galera
	find_sst_tools
	pick_user
}

# --- process helpers ----------------------------------------------------------

node_pid() { # prints the PID of node N if it is alive
	local f p
	f=$(pidfile "$1")
	[ -f "$f" ] || return 1
	p=$(cat "$f" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 1
	# The PID must still be our server (not a recycled number).
	tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "--defaults-file=$(ndir "$1")/my.cnf" || return 1
	echo "$p"
}

# Processes whose command line names this state directory (servers, the SST
# scripts and rsync daemons they start), for the final sweep of 'stop'.
stray_pids() {
	local d p
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = $$ ] && continue
		case "$(cat "$d/comm" 2>/dev/null)" in
		mariadbd | mysqld | rsync | socat | mariabackup | mariadb-backup | wsrep_sst_* | stunnel*) ;;
		*) continue ;;
		esac
		if tr '\0' '\n' <"$d/cmdline" 2>/dev/null | grep -qF -- "$STATE/node"; then echo "$p"; fi
	done
}

port_busy() { # true if something listens on 127.0.0.1:PORT
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

sql() { # sql N 'statement' -> tab-separated rows, as root over the node's socket
	"$CLIENT" --no-defaults -uroot -S "$(sock "$1")" --connect-timeout=5 -NB -e "$2"
}

wsrep_status() { # prints "size ready state" of node N
	local out
	out=$(sql "$1" "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size','wsrep_ready','wsrep_local_state_comment','wsrep_cluster_status')" 2>/dev/null) || return 1
	awk -F'\t' '{v[$1]=$2} END {printf "%s %s %s %s\n", v["wsrep_cluster_size"], v["wsrep_ready"], v["wsrep_local_state_comment"], v["wsrep_cluster_status"]}' <<<"$out"
}

node_synced() { # node_synced N [SIZE]: Synced, ready, Primary (and the cluster size if given)
	local s size ready state cstatus
	s=$(wsrep_status "$1") || return 1
	read -r size ready state cstatus <<<"$s"
	[ "$ready" = ON ] && [ "$state" = Synced ] && [ "$cstatus" = Primary ] && { [ -z "${2:-}" ] || [ "$size" = "$2" ]; }
}

# --- configuration ------------------------------------------------------------

write_config() {
	local i=$1 d addr j
	d=$(ndir "$i")
	addr=
	for j in $(seq 1 $NODES); do addr="$addr${addr:+,}127.0.0.1:$(gport "$j")"; done
	cat >"$d/my.cnf" <<EOF
# generated by galera-cluster.sh: node $i of a loopback test cluster
[mysqld]
user                       = $RUN_USER
datadir                    = $d/data
socket                     = $d/mysqld.sock
pid-file                   = $d/mariadbd.pid
log-error                  = $d/error.log
tmpdir                     = $d/tmp
port                       = $(cport "$i")
bind-address               = 127.0.0.1
skip-name-resolve
character-set-server       = utf8mb4
collation-server           = utf8mb4_general_ci
binlog_format              = ROW
default_storage_engine     = InnoDB
innodb_autoinc_lock_mode   = 2
innodb_buffer_pool_size    = 64M
innodb_log_file_size       = 32M
innodb_log_buffer_size     = 8M
innodb_flush_log_at_trx_commit = 2
performance_schema         = OFF
max_connections            = 300
key_buffer_size            = 8M
table_open_cache           = 400
thread_cache_size          = 16
wsrep_on                   = ON
wsrep_provider             = $GALERA_LIB
wsrep_cluster_name         = $CLUSTER_NAME
wsrep_cluster_address      = gcomm://$addr
wsrep_node_name            = node$i
wsrep_node_address         = 127.0.0.1:$(gport "$i")
wsrep_node_incoming_address = 127.0.0.1:$(cport "$i")
wsrep_sst_method           = rsync
wsrep_sst_receive_address  = 127.0.0.1:$(sport "$i")
wsrep_slave_threads        = 2
wsrep_provider_options     = "gmcast.listen_addr=tcp://127.0.0.1:$(gport "$i");ist.recv_addr=127.0.0.1:$(iport "$i");gcache.size=64M;gcache.page_size=16M${CLAIMLOCK_GALERA_PROVIDER_OPTIONS:+;$CLAIMLOCK_GALERA_PROVIDER_OPTIONS}"

[sst]
progress                   = 0
EOF
}

init_node() { # init_node N [install]: directories and config of node N; with
	# 'install' (a node that bootstraps) also mariadb-install-db if the datadir is empty.
	local i=$1 d
	d=$(ndir "$i")
	mkdir -p "$d/data" "$d/tmp"
	write_config "$i"
	if [ "${2:-}" = install ] && [ ! -d "$d/data/mysql" ]; then
		log "node $i: mariadb-install-db"
		local inst
		inst=$(command -v mariadb-install-db || command -v mysql_install_db) || die "mariadb-install-db not found"
		chown -R "$RUN_USER" "$d" 2>/dev/null || true
		# --tmpdir: the node's own, as in its my.cnf. With the default (/tmp)
		# a mariadbd starting at the same moment elsewhere (the outage
		# stage's, beside this one in CI) removed the bootstrap's temporary
		# tables, as every mariadbd removes '#sql*' files from its tmpdir at
		# start: "Unknown table 'mysql.tmp_user_sys'".
		"$inst" --no-defaults --datadir="$d/data" --tmpdir="$d/tmp" --user="$RUN_USER" --auth-root-authentication-method=normal \
			--skip-test-db --skip-name-resolve >"$d/install-db.log" 2>&1 ||
			{ cat "$d/install-db.log" >&2; die "mariadb-install-db failed for node $i"; }
	fi
	# A joiner may start with an empty datadir: the SST copies a donor's files.
	[ "$(id -u)" != 0 ] || chown -R "$RUN_USER" "$d"
}

# --- node lifecycle -----------------------------------------------------------

recover_position() { # prints --wsrep_start_position=... after an unclean stop of node N, or nothing
	local i=$1 d g seqno pos
	d=$(ndir "$i")
	g=$d/data/grastate.dat
	[ -f "$g" ] && [ -d "$d/data/mysql" ] || return 0
	seqno=$(awk '/^seqno:/ {print $2}' "$g")
	[ "$seqno" = "-1" ] || return 0
	"$MARIADBD" --defaults-file="$d/my.cnf" --wsrep-recover --log-error="$d/recover.log" >/dev/null 2>&1 || true
	pos=$(grep -a 'WSREP: Recovered position:' "$d/recover.log" 2>/dev/null | tail -n 1 | sed 's/.*Recovered position:[[:space:]]*//')
	rm -f "$d/recover.log"
	[ -n "$pos" ] && echo "--wsrep_start_position=$pos"
	return 0
}

launch_node() { # launch_node N [bootstrap]
	local i=$1 mode=${2:-join} d p args=() pos
	d=$(ndir "$i")
	for p in "$(cport "$i")" "$(gport "$i")" "$(iport "$i")" "$(sport "$i")"; do
		port_busy "$p" && die "node $i: port $p is in use by another process"
	done
	pos=$(recover_position "$i")
	[ -z "$pos" ] || { log "node $i: $pos"; args+=("$pos"); }
	if [ "$mode" = bootstrap ]; then
		args+=(--wsrep-new-cluster)
		[ ! -f "$d/data/grastate.dat" ] || sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$d/data/grastate.dat"
	fi
	rm -f "$d/mysqld.sock" "$d/mariadbd.pid"
	: >>"$d/error.log"
	[ "$(id -u)" != 0 ] || chown "$RUN_USER" "$d/error.log"
	# setsid: the server leaves the caller's process group and session, so a
	# Ctrl-C or a job-control kill of the caller does not reach it.
	setsid "$MARIADBD" --defaults-file="$d/my.cnf" "${args[@]}" >>"$d/console.log" 2>&1 </dev/null &
	echo $! >"$(pidfile "$i")"
	log "node $i: started pid $! ($mode), client port $(cport "$i")"
}

wait_node() { # wait_node N SIZE: until node N is synced in a cluster of SIZE nodes
	local i=$1 size=$2 deadline
	deadline=$((SECONDS + TIMEOUT))
	while ! node_synced "$i" "$size"; do
		if ! node_pid "$i" >/dev/null; then
			tail -n 30 "$(ndir "$i")/error.log" >&2 || true
			die "node $i exited while starting (log: $(ndir "$i")/error.log)"
		fi
		if [ $SECONDS -ge $deadline ]; then
			tail -n 30 "$(ndir "$i")/error.log" >&2 || true
			die "node $i not synced in a cluster of $size after ${TIMEOUT}s (status: $(wsrep_status "$i" || echo unreachable); running nodes in a primary component: '$(primary_nodes | tr '\n' ' ')')"
		fi
		sleep 0.5
	done
}

primary_nodes() { # running nodes that are in a primary component
	local i s cstatus
	for i in $(running_nodes); do
		s=$(wsrep_status "$i") || continue
		read -r _ _ _ cstatus <<<"$s"
		[ "$cstatus" = Primary ] && echo "$i"
	done
	return 0
}

answering_nodes() {
	local i
	for i in $(running_nodes); do wsrep_status "$i" >/dev/null && echo "$i"; done
	return 0
}

bootstrap_pc() { # make node N's component primary again
	local i=$1 deadline=$((SECONDS + 30))
	log "node $i: pc.bootstrap=YES (the running nodes had lost quorum)"
	sql "$i" "SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'" || die "node $i: pc.bootstrap failed"
	until [ -n "$(primary_nodes)" ]; do
		[ $SECONDS -lt $deadline ] || die "no primary component 30s after pc.bootstrap on node $i"
		sleep 0.3
	done
}

# When nodes run but none is in a primary component (quorum lost), joining
# nodes would wait forever: restore a primary component first.
ensure_primary() { # ensure_primary auto|fail
	local first
	[ -n "$(running_nodes)" ] || return 0
	[ -z "$(primary_nodes)" ] || return 0
	first=$(answering_nodes | head -n 1)
	[ -n "$first" ] || return 0
	if [ "$1" = auto ]; then
		bootstrap_pc "$first"
	else
		die "the running nodes ($(running_nodes | tr '\n' ' ')) are not in a primary component (quorum lost); run '$0 bootstrap-pc' first"
	fi
}

running_nodes() {
	local i
	for i in $(seq 1 $NODES); do node_pid "$i" >/dev/null && echo "$i"; done
	return 0
}

wait_gone() { # wait_gone PID SECONDS
	local p=$1 deadline=$((SECONDS + $2))
	while kill -0 "$p" 2>/dev/null; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
}

stop_node() { # graceful, then SIGKILL after 30 s
	local i=$1 p
	p=$(node_pid "$i") || { rm -f "$(pidfile "$i")"; return 0; }
	kill -TERM "$p" 2>/dev/null || true
	if ! wait_gone "$p" 30; then
		log "node $i: still running 30s after SIGTERM, sending SIGKILL"
		kill -KILL "$p" 2>/dev/null || true
		wait_gone "$p" 10 || die "node $i (pid $p) does not exit"
	fi
	rm -f "$(pidfile "$i")"
	log "node $i: stopped (pid $p)"
}

create_app_user() { # create_app_user [N]: on node N (default 1); it replicates
	sql "${1:-1}" "CREATE DATABASE IF NOT EXISTS $DB;
CREATE USER IF NOT EXISTS '$APP_USER'@'127.0.0.1' IDENTIFIED BY '$APP_PASS';
CREATE USER IF NOT EXISTS '$APP_USER'@'localhost' IDENTIFIED BY '$APP_PASS';
CREATE USER IF NOT EXISTS '$APP_USER'@'%' IDENTIFIED BY '$APP_PASS';
GRANT ALL PRIVILEGES ON *.* TO '$APP_USER'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO '$APP_USER'@'localhost';
GRANT ALL PRIVILEGES ON *.* TO '$APP_USER'@'%';" || die "cannot create database/user on node ${1:-1}"
}

# --- commands -----------------------------------------------------------------

cmd_start() {
	local i running n t0=$SECONDS
	prepare
	running=$(running_nodes)
	n=$(echo "$running" | grep -c . || true)
	ensure_primary auto
	if [ "$n" = $NODES ]; then
		for i in $(seq 1 $NODES); do wait_node "$i" $NODES; done
		log "cluster already running ($NODES nodes synced)"
		print_env
		return 0
	fi
	if [ "$n" = 0 ] && [ "${CLAIMLOCK_GALERA_FRESH:-0}" = 1 ]; then
		log "CLAIMLOCK_GALERA_FRESH=1: removing $STATE"
		rm -rf "$STATE"
	fi
	mkdir -p "$STATE"
	chmod 755 "$STATE"
	for i in $(seq 1 $NODES); do
		echo "$running" | grep -qx "$i" && continue
		if [ "$n" = 0 ] && [ "$i" = 1 ]; then init_node 1 install; else init_node "$i"; fi
	done
	if [ "$n" = 0 ]; then
		launch_node 1 bootstrap
		wait_node 1 1
		create_app_user
		n=1
	fi
	for i in $(seq 1 $NODES); do
		node_pid "$i" >/dev/null && continue
		launch_node "$i" join
		n=$((n + 1))
		wait_node "$i" "$n"
	done
	for i in $(seq 1 $NODES); do wait_node "$i" $NODES; done
	create_app_user
	log "cluster up: $NODES nodes synced, wsrep_cluster_size=$NODES ($((SECONDS - t0))s)"
	print_env
}

cmd_stop() {
	local i p
	# Node 1 last, so that it is the one safe to bootstrap next time.
	for i in $(seq $NODES -1 1); do stop_node "$i"; done
	for p in $(stray_pids); do
		log "stopping leftover process $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)"
		kill -TERM "$p" 2>/dev/null || true
		wait_gone "$p" 5 || kill -KILL "$p" 2>/dev/null || true
	done
	log "stopped"
}

cmd_status() {
	local i p s size ready state cstatus ok=0
	find_binaries
	for i in $(seq 1 $NODES); do
		if p=$(node_pid "$i"); then
			if s=$(wsrep_status "$i"); then
				read -r size ready state cstatus <<<"$s"
				printf 'node%s pid=%s port=%s wsrep_cluster_size=%s wsrep_ready=%s state=%s cluster_status=%s\n' \
					"$i" "$p" "$(cport "$i")" "$size" "$ready" "$state" "$cstatus"
				[ "$size" = $NODES ] && [ "$ready" = ON ] && [ "$state" = Synced ] && ok=$((ok + 1))
			else
				printf 'node%s pid=%s port=%s not answering\n' "$i" "$p" "$(cport "$i")"
			fi
		else
			printf 'node%s stopped\n' "$i"
		fi
	done
	[ "$ok" = $NODES ]
}

cmd_kill_node() {
	local i=$1 p
	check_node_arg "$i"
	p=$(node_pid "$i") || die "node $i is not running"
	kill -KILL "$p"
	wait_gone "$p" 10 || die "node $i (pid $p) survived SIGKILL"
	rm -f "$(pidfile "$i")"
	log "node $i: killed (SIGKILL pid $p)"
}

cmd_start_node() {
	local i=$1 j n=0 others=0
	check_node_arg "$i"
	prepare
	if node_pid "$i" >/dev/null; then
		log "node $i already running"
	else
		for j in $(running_nodes); do others=$((others + 1)); done
		ensure_primary fail
		if [ "$others" = 0 ]; then
			init_node "$i" install
			launch_node "$i" bootstrap
		else
			init_node "$i"
			launch_node "$i" join
		fi
	fi
	for j in $(running_nodes); do n=$((n + 1)); done
	wait_node "$i" "$n"
	[ "$n" != 1 ] || create_app_user "$i"
	log "node $i: synced, wsrep_cluster_size=$n"
}

cmd_stop_node() {
	check_node_arg "$1"
	stop_node "$1"
}

cmd_bootstrap_pc() {
	local i=${1:-}
	find_binaries
	if [ -z "$i" ]; then
		i=$(answering_nodes | head -n 1)
		[ -n "$i" ] || die "no running node answers"
	fi
	check_node_arg "$i"
	node_pid "$i" >/dev/null || die "node $i is not running"
	if primary_nodes | grep -qx "$i"; then
		log "node $i is already in a primary component"
		return 0
	fi
	bootstrap_pc "$i"
	log "node $i: primary component restored ($(wsrep_status "$i"))"
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

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) print_env ;;
kill-node) cmd_kill_node "${2:-}" ;;
start-node) cmd_start_node "${2:-}" ;;
stop-node) cmd_stop_node "${2:-}" ;;
bootstrap-pc) cmd_bootstrap_pc "${2:-}" ;;
sql)
	check_node_arg "${2:-}"
	find_binaries
	sql "$2" "${3:?SQL statement expected}"
	;;
clean) cmd_clean ;;
*) usage ;;
esac
