#!/usr/bin/env bash
# Model-checks claimlock's protocol (claimlock.pml) and the coalescer's fold
# protocol (coalesce.pml) with spin.
#
# Every property must verify with 0 errors and no truncated search; every
# negative control (a mutant of the model) must yield a counterexample; an
# equivalent mutant must verify. One line per check; exit status 1 if any
# check does not come out as expected.
#
#   bash model/check.sh              from any directory
#   TRAILS=1 bash model/check.sh     also print each counterexample, replayed
#   JOBS=1 bash model/check.sh       run the checks one at a time (default 2)
#   ONLY=coalesce bash model/check.sh  only the checks whose name or model
#                                      file contains it
#
# Installs spin (and gcc, if missing) with apt. Works in a temporary
# directory, removed on exit.
set -uo pipefail
cd "$(dirname "$0")"

# The reaper's return step takes only rows below MaxAttempts (core.Claims.Reap,
# "AND COALESCE(attempts, 0) < below"), so a row that turns stale between the
# park step and the return step of one sweep is parked by the next one. With
# 0 the checks model the reaper before that fix, where (e) and (b) fail (see
# README.md, Findings).
REAP_RETURN_BELOW_MAX=1

JOBS=${JOBS:-2}
TIME_LIMIT=${TIME_LIMIT:-240}   # seconds, per check
TRAILS=${TRAILS:-0}

have() { command -v "$1" >/dev/null 2>&1; }
if ! have spin || ! have gcc; then
	pkgs=()
	have spin || pkgs+=(spin)
	have gcc || pkgs+=(gcc)
	echo "installing ${pkgs[*]} with apt" >&2
	export DEBIAN_FRONTEND=noninteractive
	log=$(mktemp)
	if ! { apt-get update -qq && apt-get install -y -qq "${pkgs[@]}"; } >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		echo "check.sh: could not install ${pkgs[*]}" >&2
		exit 1
	fi
	rm -f "$log"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/claimlock-model.XXXXXX")
trap 'rm -rf "$work"' EXIT

claims=""
if [ "$REAP_RETURN_BELOW_MAX" = 1 ]; then claims="-DREAP_RETURN_BELOW_MAX"; fi
fix="-DREAP_RETURN_BELOW_MAX"

# expect|name|spin defines|mode[|heavy][|model]
#   expect: pass (0 errors) | fail (a counterexample: a mutant, killed)
#   mode:   safety (DFS) | bfs (shortest counterexample) | liveness (-a -f)
#   heavy:  started first, so that the jobs end close together
#   model:  the Promela file, claimlock.pml unless given (coalesce.pml:
#           the coalescer's fold protocol)
checks=(
	# --- claims: NW=2 workers, NR=2 rows, batch 2, MaxAttempts 2, timeout 2,
	#     1 crash, 1 lost reply, 1 release, 1 heartbeat per batch
	"pass|claims a1 stale token changes no row|$claims -DP_A1|safety"
	"pass|claims a2 one holder can complete a row|$claims -DP_A2|safety"
	"pass|claims no_theft (reaper spares heartbeating workers)|$claims -DP_THEFT|safety"
	"pass|claims token_iff_processing|$claims -DP_TOKEN|safety"
	"pass|claims e attempts <= MaxAttempts|$claims -DP_E|bfs"
	"pass|claims b nothing lost (LTL, weak fairness)|$claims -DP_NONE -DLIVENESS|liveness"
	"pass|claims a1 with an outside writer|$claims -DOUTSIDE_WRITER -DP_A1|safety|heavy"
	"pass|claims a1+a2+no_theft+token, 3 workers, no lost reply|$claims -DNW=3 -DLOSTREPLIES=0 -DP_A1 -DP_A2 -DP_THEFT -DP_TOKEN|safety|heavy"
	"pass|claims a1+a2+no_theft+token, 2 crashes, 2 lost replies, 2 releases|$claims -DCRASHES=2 -DLOSTREPLIES=2 -DRELEASES=2 -DP_A1 -DP_A2 -DP_THEFT -DP_TOKEN|safety|heavy"
	"pass|claims a1+a2+no_theft+token, batch of 1|$claims -DLIMIT=1 -DP_A1 -DP_A2 -DP_THEFT -DP_TOKEN|safety"
	"pass|claims a1+a2+no_theft+token, MaxAttempts 3|$claims -DMAXATT=3 -DP_A1 -DP_A2 -DP_THEFT -DP_TOKEN|safety"
)
if [ "$REAP_RETURN_BELOW_MAX" != 1 ]; then
	checks+=(
		"pass|fix: e attempts <= MaxAttempts, reaper returns below max|$fix -DP_E|safety"
		"pass|fix: e, 3 workers|$fix -DNW=3 -DP_E|safety"
		"pass|fix: b nothing lost|$fix -DP_NONE -DLIVENESS|liveness"
		"pass|fix: e, batch of 1|$fix -DLIMIT=1 -DP_E|safety"
		"pass|fix: b, batch of 1|$fix -DLIMIT=1 -DP_NONE -DLIVENESS|liveness"
		"pass|fix: e, MaxAttempts 3|$fix -DMAXATT=3 -DP_E|safety"
	)
fi
checks+=(
	# --- leases: 2 holders, TTL 10 ticks, margin TTL/10, rate bound 1/10
	#     (one run checks c, d and d': the same state space)
	"pass|lease c fences rise + d cancelled before another acquires + d'|-DLEASE -DP_C -DP_D -DP_DLIVE|safety|heavy"
	# --- held-transaction claims: 2 rows, 2 workers, 2 sessions ended by the server
	"pass|held h1 one committed DONE per row + h2 acks only locked rows|-DHELD|safety"
	"pass|held h1+h2, 3 workers, 3 ends|-DHELD -DNW=3 -DKILLS=3|safety"
	"pass|held b nothing lost (LTL, weak fairness)|-DHELD -DLIVENESS|liveness"
	"fail|mutant HELD_UNLOCK_NO_ROLLBACK vs h2|-DHELD -DMUTANT_HELD_UNLOCK_NO_ROLLBACK|bfs"
	"fail|mutant HELD_UNLOCK_NO_ROLLBACK vs h1|-DHELD -DNO_H2 -DMUTANT_HELD_UNLOCK_NO_ROLLBACK|bfs"
	"fail|mutant HELD_NO_LOCK vs h1|-DHELD -DNO_H2 -DMUTANT_HELD_NO_LOCK|bfs"
	# --- negative controls
	"fail|mutant ACK_NO_TOKEN vs a1|$claims -DMUTANT_ACK_NO_TOKEN -DLOSTREPLIES=0 -DP_A1|bfs"
	"fail|mutant REAP_IGNORES_CLAIMED_AT vs no_theft|$claims -DMUTANT_REAP_IGNORES_CLAIMED_AT -DP_THEFT|bfs"
	"fail|mutant HB_NO_STATUS vs a1, outside writer|$claims -DMUTANT_HB_NO_STATUS -DOUTSIDE_WRITER -DP_A1|bfs"
	"pass|equivalent: HB_NO_STATUS, closed model, a1+a2+no_theft+token|$claims -DMUTANT_HB_NO_STATUS -DP_A1 -DP_A2 -DP_THEFT -DP_TOKEN|safety"
	"fail|mutant SHARED_TOKEN vs a2|$claims -DMUTANT_SHARED_TOKEN -DP_A2|bfs"
	"fail|mutant FAIL_NO_PARK vs e|$fix -DMUTANT_FAIL_NO_PARK -DP_E|bfs"
	"fail|mutant NO_REAPER vs b|$fix -DMUTANT_NO_REAPER -DP_NONE -DLIVENESS|liveness"
	"fail|mutant NO_MARGIN (deadline = TTL) vs d|-DLEASE -DMUTANT_NO_MARGIN -DP_D|bfs"
	"fail|mutant DRIFT (rate bound 1/9) vs d|-DLEASE -DMUTANT_DRIFT -DP_D|bfs"
	"fail|mutant TIMER_LATE vs d|-DLEASE -DMUTANT_TIMER_LATE -DP_D|bfs"
	"fail|mutant NO_FENCE_INC vs c|-DLEASE -DMUTANT_NO_FENCE_INC -DP_C|bfs"
)
# --- coalesce.pml, the coalescer's fold protocol: 1 key, 2 writers (one
#     change each), 2 flushers, 1 flusher crash, 1 rolled-back fold
#     transaction, freezes unbounded (1 in liveness runs)
c=coalesce.pml
all="-DP_F1 -DP_F3 -DP_N1"
quiet="-DFREEZES=0 -DFCRASH=0 -DFAILS=0"
checks+=(
	"pass|coalesce f1 no double fold + f3 in order + n1 nothing lost|$all|safety||$c"
	"pass|coalesce f1+f3+n1, 3 writers, no freeze, crash or rollback|-DNW=3 $quiet $all|safety||$c"
	"pass|coalesce f1+f3+n1, MaxChanges 1, no crash or rollback|-DMAXCH=1 -DFCRASH=0 -DFAILS=0 $all|safety|heavy|$c"
	"pass|coalesce f1+f3+n1, AcceptTx|-DACCEPT_TX $all|safety||$c"
	"pass|coalesce f1+f3, killed writer + stranded sweep, no freeze|-DUNSTRAND -DWCRASH=1 $quiet -DP_F1 -DP_F3|safety||$c"
	"pass|coalesce n2 nothing lost (LTL, weak fairness)|-DLIVENESS -DFREEZES=1|liveness||$c"
	"pass|coalesce n2, AcceptTx|-DLIVENESS -DFREEZES=1 -DACCEPT_TX|liveness||$c"
	"pass|coalesce n2, killed writer + stranded sweep, no freeze|-DLIVENESS -DUNSTRAND -DWCRASH=1 $quiet|liveness||$c"
	"pass|equivalent: NO_COUNT_CHECK (the ack's token guards), f1+f3+n1|-DMUTANT_NO_COUNT_CHECK $all|safety||$c"
	"pass|equivalent for f1+f3: ACK_NO_TOKEN (the mark's count guards)|-DMUTANT_ACK_NO_TOKEN -DP_F1 -DP_F3|safety||$c"
	"fail|mutant ACK_NO_TOKEN vs n1|-DMUTANT_ACK_NO_TOKEN -DP_N1|bfs||$c"
	"pass|equivalent: REAP_IGNORES_CLAIMED_AT, f1+f3+n1|-DMUTANT_REAP_IGNORES_CLAIMED_AT $all|safety||$c"
	"fail|mutant ACK_NO_VERSION vs n1|-DMUTANT_ACK_NO_VERSION -DP_N1|bfs||$c"
	"fail|mutant MARK_OUTSIDE_TX vs f1|-DMUTANT_MARK_OUTSIDE_TX -DP_F1|bfs||$c"
	"fail|mutant NO_START_FLUSH vs n1|-DMUTANT_NO_START_FLUSH -DP_N1|bfs||$c"
	"fail|mutant SKIP_PROCESSING vs n1|-DMUTANT_SKIP_PROCESSING -DP_N1|bfs||$c"
	"fail|mutant NO_BUMP_HELD vs n1, MaxChanges 1|-DMAXCH=1 -DMUTANT_NO_BUMP_HELD -DP_N1|bfs||$c"
	"fail|mutant READ_NEWEST_FIRST vs f3, MaxChanges 1|-DMAXCH=1 -DMUTANT_READ_NEWEST_FIRST -DP_F3|bfs||$c"
	"fail|mutant ACK_NO_TOKEN + NO_COUNT_CHECK vs f1|-DMUTANT_ACK_NO_TOKEN -DMUTANT_NO_COUNT_CHECK -DP_F1|bfs||$c"
	"fail|mutant READ_NO_FILTER vs n2|-DLIVENESS -DFREEZES=1 -DMUTANT_READ_NO_FILTER|liveness||$c"
	"fail|mutant NO_REAPER vs n2 (a dead flusher's key)|-DLIVENESS -DFREEZES=1 -DMUTANT_NO_REAPER|liveness||$c"
	"fail|no sweep: killed writer without UNSTRAND vs n2|-DLIVENESS -DWCRASH=1 $quiet|liveness||$c"
	"pass|equivalent: BUMP_DONE_NO_STATUS (only a bump leaves DONE), f1+f3+n1|-DMUTANT_BUMP_DONE_NO_STATUS $all|safety||$c"
	"fail|mutant BUMP_PROCESSING_NO_STATUS vs n1|-DMUTANT_BUMP_PROCESSING_NO_STATUS -DP_N1|bfs||$c"
)

# run_check INDEX EXPECT NAME DEFINES MODE MODEL: writes $work/INDEX.line (the
# summary), $work/INDEX.ok (if as expected) and $work/INDEX.trail.
run_check() {
	local idx=$1 expect=$2 name=$3 defs=$4 mode=$5 MODEL=$6
	local dir=$work/$idx
	mkdir -p "$dir" && cp "$MODEL" "$dir/" && cd "$dir" || return
	local cflags="-O1 -w" pflags="-m2000000"
	case $mode in
	safety) cflags+=" -DSAFETY" ;;
	bfs) cflags+=" -DSAFETY -DBFS" ;;
	liveness) cflags+=" -DNFAIR=3"; pflags+=" -a -f" ;;
	esac
	local t0 rc verdict detail
	t0=$(date +%s%N)
	# shellcheck disable=SC2086
	if ! spin -a $defs "$MODEL" >spin.out 2>&1 || ! gcc $cflags -o pan pan.c >gcc.out 2>&1; then
		printf 'BROKEN   %-70s %s\n' "$name" "$(head -c 200 spin.out gcc.out | tr '\n' ' ')" >"$work/$idx.line"
		return
	fi
	# shellcheck disable=SC2086
	timeout "$TIME_LIMIT" ./pan $pflags >pan.out 2>&1
	rc=$?
	local ms
	ms=$((($(date +%s%N) - t0) / 1000000))
	local states errors depth
	states=$(awk '/states, stored/ {print $1; exit}' pan.out)
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -1)
	detail="${states:-?} states, depth ${depth:-?}, errors: ${errors:-?}"
	if [ $rc = 124 ]; then
		verdict=TIMEOUT
		detail="no verdict in ${TIME_LIMIT}s"
	elif grep -q "too small" pan.out; then
		verdict=TRUNCATED
		detail="$detail; $(grep -m1 'too small' pan.out)"
	elif [ -z "${errors:-}" ]; then
		verdict=BROKEN
		detail="pan: $(tail -n 3 pan.out | tr '\n' ' ')"
	elif [ "$expect" = pass ]; then
		if [ "$errors" = 0 ]; then verdict=PASS; else verdict=FAIL; fi
	else
		if [ "$errors" != 0 ]; then verdict=KILLED; else verdict=SURVIVED; fi
	fi
	if [ "${errors:-0}" != 0 ] && [ -f "$MODEL.trail" ]; then
		# shellcheck disable=SC2086
		spin -t $defs "$MODEL" >replay.out 2>&1
		local steps what
		steps=$(sed -n 's/.*trail ends after \([0-9]*\) steps.*/\1/p' replay.out | head -1)
		what=$(grep -m1 -oE 'assertion violated|acceptance cycle' pan.out)
		detail="$detail; trail: ${steps:-?} steps, $what"
		if [ "$what" = "assertion violated" ]; then
			detail="$detail $(sed -n 's/^spin: text of failed assertion: //p' replay.out | head -1 | cut -c1-90)"
		fi
		{
			echo "--- $name: replayed counterexample"
			grep -vE '^[[:space:]]+[A-Za-z_]+(\[[0-9]+\])? = |^ *[0-9]+:[[:space:]]+proc|processes created|^#processes' replay.out |
				sed -E 's/^[[:space:]]+//; s/[[:space:]]{2,}/ /g' | grep -v '^$'
		} >"$work/$idx.trail"
	fi
	printf '%-9s%-72s %s (%d.%ds)\n' "$verdict" "$name" "$detail" $((ms / 1000)) $((ms % 1000 / 100)) >"$work/$idx.line"
	case $verdict in PASS | KILLED) touch "$work/$idx.ok" ;; esac
}

if [ -n "${ONLY:-}" ]; then
	kept=()
	for chk in "${checks[@]}"; do
		IFS='|' read -r _ name _ _ _ model <<<"$chk"
		case "$name ${model:-claimlock.pml}" in *"$ONLY"*) kept+=("$chk") ;; esac
	done
	checks=("${kept[@]}")
fi

start=$(date +%s)
echo "spin $(spin -V | sed -n 's/Spin Version \([^ ]*\).*/\1/p'), models claimlock.pml coalesce.pml, $JOBS job(s), ${TIME_LIMIT}s per check"
# The longest checks first, so that two jobs finish close together.
heavy=() light=()
for i in "${!checks[@]}"; do
	IFS='|' read -r _ _ _ _ weight _ <<<"${checks[$i]}"
	case $weight in heavy) heavy+=("$i") ;; *) light+=("$i") ;; esac
done
for i in "${heavy[@]}" "${light[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
	IFS='|' read -r expect name defs mode _ model <<<"${checks[$i]}"
	(run_check "$(printf '%02d' "$i")" "$expect" "$name" "$defs" "$mode" "${model:-claimlock.pml}") &
done
wait

bad=0
for i in "${!checks[@]}"; do
	idx=$(printf '%02d' "$i")
	cat "$work/$idx.line" 2>/dev/null || echo "BROKEN   ${checks[$i]}"
	[ -f "$work/$idx.ok" ] || bad=$((bad + 1))
done
if [ "$TRAILS" = 1 ]; then
	for f in "$work"/*.trail; do [ -f "$f" ] && { echo; cat "$f"; }; done
fi
echo "$((${#checks[@]} - bad)) of ${#checks[@]} checks as expected, $(($(date +%s) - start))s"
[ "$bad" = 0 ]
