/*
 * claimlock.pml -- a Promela model of claimlock's protocol, checked with spin.
 *
 * One file, two independent parts (they share no state, so they are checked
 * separately to keep each state space small):
 *
 *   default   the claim protocol: rows with status / token / claimed_at /
 *             attempts, workers that claim, heartbeat, ack, fail, release,
 *             freeze and crash, a reaper with a timeout, a database clock.
 *   -DHELD    held-transaction claims: row locks released only by the
 *             transaction's end (commit, rollback, the server ending it),
 *             acks that take effect at commit (part 3, at the top).
 *   -DLEASE   the lease protocol: one key row with owner / expires_at /
 *             fence, holders that acquire, renew and release, each with a
 *             local deadline on a local clock whose rate differs from the
 *             database clock's within a declared bound.
 *
 * Every database statement is one atomic step (d_step), conditioned exactly
 * as the dialects' SQL conditions it; the SQL is quoted next to each step
 * (PostgreSQL's, from dialect/postgres/sql.go at commit d9494b2, template
 * markers resolved; MySQL and SQLite run the same conditions, see README.md).
 *
 * Switches (spin -D...):
 *   LIVENESS                    adds the LTL property "nothing lost" (claims)
 *   OUTSIDE_WRITER              something outside the library (an operator, the
 *                               application) sets a PROCESSING row's status
 *                               without clearing its token (claims)
 *   REAP_RETURN_BELOW_MAX       the reaper's return step also requires
 *                               attempts < MaxAttempts (a proposed fix, claims)
 *   ACK_HELD                    with OUTSIDE_WRITER: check ack and fail against
 *                               "still held" (status too), not the token alone
 *   Negative controls, each must yield a counterexample:
 *   MUTANT_ACK_NO_TOKEN         ack: WHERE id IN (...) without AND token = ?
 *   MUTANT_REAP_IGNORES_CLAIMED_AT  reap: no AND claimed_at < now() - timeout
 *   MUTANT_HB_NO_STATUS         heartbeat: no AND status = processing
 *   MUTANT_FAIL_NO_PARK         fail: back to pending whatever the attempts
 *   MUTANT_SHARED_TOKEN         every claim uses the same token (a "PID alone")
 *   MUTANT_NO_REAPER            no reaper runs
 *   MUTANT_NO_MARGIN            lease: local deadline = start + TTL (no margin)
 *   MUTANT_DRIFT                lease: clock-rate difference 1/9 > margin/TTL
 *   MUTANT_TIMER_LATE           lease: the deadline timer may fire late
 *   MUTANT_NO_FENCE_INC         lease: acquire does not increment the fence
 */

#if defined(HELD)
/* ======================================================================
 * Part 3 (-DHELD): held-transaction claims (store.Held, claim.Held)
 * ======================================================================
 * A held claim writes nothing: BEGIN; SELECT ... FOR NO KEY UPDATE SKIP
 * LOCKED (MySQL: FOR UPDATE SKIP LOCKED) takes row locks that only the end
 * of the transaction releases: its COMMIT, its ROLLBACK, or the server
 * ending it (a dropped connection, a crashed client, the hold limit:
 * idle_in_transaction_session_timeout / wait_timeout). The acks are UPDATEs
 * (or DELETEs) in that transaction, "WHERE id IN (...) AND status =
 * pending"; they take effect at COMMIT, all together, or not at all.
 * Rows NR=2, workers NW (default 2), at most KILLS (default 2) sessions
 * ended by the server, at any point, whatever the worker is doing (it may
 * be frozen: it is simply not scheduled).
 *
 * Properties:
 *   h1  a row is made DONE by at most one committed transaction
 *   h2  an ack writes only rows its transaction has locked
 *   b   (LIVENESS) nothing lost: under weak fairness every row ends DONE
 * NO_H2 leaves h2 out (so that a mutant is shown to break h1 itself).
 * Negative controls:
 *   MUTANT_HELD_UNLOCK_NO_ROLLBACK  the server's timeout releases the locks
 *                                   but leaves the transaction open
 *   MUTANT_HELD_NO_LOCK             the claim reads pending rows without
 *                                   locking them (SELECT without FOR UPDATE)
 */
#ifndef NW
#define NW 2
#endif
#ifndef KILLS
#define KILLS 2
#endif
#define NR 2
#define PENDING 0
#define DONE 1
#define BIT(r) (1 << (r))

byte status[NR];  /* committed status */
byte lk[NR];      /* row lock owner: 0 none, else worker + 1 */
bool alive[NW];   /* the worker's transaction is open on the server */
byte held[NW];    /* rows the worker's claim locked (its own view) */
byte wrote[NW];   /* acks written in the open transaction, not committed */
byte commits[NR]; /* ghost: committed DONE writes per row */
byte kills;

/* the server ends w's transaction: rollback, locks released */
inline rollback(w) {
	alive[w] = false;
	wrote[w] = 0;
	if :: lk[0] == w + 1 -> lk[0] = 0 :: else fi;
	if :: lk[1] == w + 1 -> lk[1] = 0 :: else fi
}

proctype Worker(byte w) {
	byte r;
	do
	:: true ->
		/* BEGIN; SET LOCAL ...timeouts; SELECT ... LIMIT 2 FOR NO KEY UPDATE SKIP LOCKED */
		d_step {
			alive[w] = true; held[w] = 0; wrote[w] = 0;
#ifdef MUTANT_HELD_NO_LOCK
			if :: status[0] == PENDING -> held[w] = held[w] | BIT(0) :: else fi;
			if :: status[1] == PENDING -> held[w] = held[w] | BIT(1) :: else fi
#else
			if :: status[0] == PENDING && lk[0] == 0 -> lk[0] = w + 1; held[w] = held[w] | BIT(0) :: else fi;
			if :: status[1] == PENDING && lk[1] == 0 -> lk[1] = w + 1; held[w] = held[w] | BIT(1) :: else fi
#endif
		}
		/* handle, then ack each held row in the transaction; a statement on
		   an ended session fails and the worker starts over */
		r = 0;
		do
		:: r < NR && (held[w] & BIT(r)) ->
			d_step {
				if
				:: alive[w] ->
#ifndef NO_H2
					assert(lk[r] == w + 1);                         /* h2 */
#endif
					if :: status[r] == PENDING -> wrote[w] = wrote[w] | BIT(r) :: else fi
				:: else -> held[w] = 0
				fi
			}
			r++
		:: r < NR && !(held[w] & BIT(r)) -> r++
		:: r >= NR ->
			/* COMMIT */
			d_step {
				if :: alive[w] ->
					if :: wrote[w] & BIT(0) -> status[0] = DONE; commits[0]++ :: else fi;
					if :: wrote[w] & BIT(1) -> status[1] = DONE; commits[1]++ :: else fi;
					rollback(w)   /* the end of the transaction releases its locks */
				:: else
				fi;
				held[w] = 0
			};
			break
		od
	od
}

/* The server ends a session: a dropped connection, a SIGKILLed client, or
   the hold limit for a holder frozen (not scheduled) that long. */
active proctype Server() {
	byte w;
	do
	:: kills < KILLS ->
		if
		:: w = 0
		:: w = 1
#if NW > 2
		:: w = 2
#endif
		fi;
		d_step {
			if
			:: alive[w] ->
#ifdef MUTANT_HELD_UNLOCK_NO_ROLLBACK
				if :: lk[0] == w + 1 -> lk[0] = 0 :: else fi;
				if :: lk[1] == w + 1 -> lk[1] = 0 :: else fi;
#else
				rollback(w);
#endif
				kills++
			:: else
			fi
		}
	:: kills >= KILLS -> break
	od
}

active proctype Monitor() {
end:	atomic { !(commits[0] <= 1 && commits[1] <= 1) -> assert(commits[0] <= 1 && commits[1] <= 1) }  /* h1 */
}

init {
	byte k;
	atomic {
		for (k : 0 .. NW-1) { run Worker(k) }
		k = 0
	}
}

#ifdef LIVENESS
ltl nothing_lost { <> (status[0] == DONE && status[1] == DONE) }
#endif

#elif !defined(LEASE)
/* ======================================================================
 * Part 1: claims
 * ====================================================================== */

/* Which properties to check (one run per property keeps each verdict
   independent): P_A1 P_A2 P_THEFT P_TOKEN P_E; P_NONE for none (the LTL
   run); none given = all. */
#if !defined(P_A1) && !defined(P_A2) && !defined(P_THEFT) && !defined(P_TOKEN) && !defined(P_E) && !defined(P_NONE)
#define P_A1
#define P_A2
#define P_THEFT
#define P_TOKEN
#define P_E
#endif

#ifndef NW
#define NW 2            /* workers */
#endif
#define NR 2            /* rows (the masks below assume 2) */
#ifndef LIMIT
#define LIMIT 2         /* claim batch size: LIMIT ? */
#endif
#ifndef MAXATT
#define MAXATT 2        /* Config.MaxAttempts (claimer and reaper) */
#endif
#define TIMEOUT 2       /* reaper timeout, in database clock ticks */
#define HBI 1           /* a healthy worker heartbeats before a row it holds
                           is HBI ticks old (HeartbeatInterval < Timeout) */
#ifndef HBMAX
#define HBMAX 1         /* heartbeats per batch (a batch's work is finite) */
#endif
#ifndef CRASHES
#define CRASHES 1       /* worker crashes in a run */
#endif
#ifndef LOSTREPLIES
#define LOSTREPLIES 1   /* statements that commit but whose reply is lost */
#endif
#ifndef RELEASES
#define RELEASES 1      /* Batch.Release calls in a run */
#endif
#define NTOK (NW + NR)  /* token pool: enough for every live reference */

mtype = { PENDING, PROCESSING, DONE, FAILED };

/* the claim table */
mtype status[NR] = PENDING;
byte  token[NR];        /* 0 = NULL; else a claim token */
byte  age[NR];          /* now() - claimed_at for PROCESSING rows, in ticks,
                           capped at TIMEOUT (0 for other rows: no statement
                           reads claimed_at of a row that is not PROCESSING) */
byte  attempts[NR];

/* the workers (what each believes) */
byte  mytok[NW];        /* token of the batch in hand, 0 = none */
byte  held[NW];         /* rows the batch believes it holds (bit mask) */
bool  healthy[NW];      /* heartbeats on schedule (not frozen) */
byte  hbleft[NW];       /* heartbeats left in this batch */

/* bounded fault and user budgets (so that fairness-based liveness holds) */
byte  crashes = CRASHES;
byte  lostreplies = LOSTREPLIES;
byte  releases = RELEASES;

/* scratch for d_steps */
byte ix, cx, tx, nx, gotx;    /* always 0 between steps */

#define BIT(r)       (1 << (r))
/* what a replayed counterexample (spin -t) prints after each statement */
#define SET(m) if :: ((m) & 1) -> printf(" r0") :: else fi; if :: ((m) & 2) -> printf(" r1") :: else fi
#define ROWS printf("      r0: %e token=%d attempts=%d age=%d | r1: %e token=%d attempts=%d age=%d\n", \
	status[0], token[0], attempts[0], age[0], status[1], token[1], attempts[1], age[1])
/* "row r is held by token t": the DESIGN's and the dialect contract's "rows
   the token still holds" */
#define HELD_BY(r,tk) (status[r] == PROCESSING && token[r] == (tk) && (tk) != 0)

/* (a1) a statement issued under token tk changes row r only if tk still
   holds r. Heartbeat and release carry "status = processing" in their SQL;
   ack and fail are specified as conditioned on the token alone. */
#ifdef P_A1
#define CHECK_HB_REL(r,tk)  assert(HELD_BY(r,tk))
#if defined(OUTSIDE_WRITER) && !defined(ACK_HELD)
#define CHECK_ACK(r,tk)     assert(token[r] == (tk) && (tk) != 0)
#else
#define CHECK_ACK(r,tk)     assert(HELD_BY(r,tk))
#endif
#else
#define CHECK_HB_REL(r,tk)  skip
#define CHECK_ACK(r,tk)     skip
#endif

/* no_theft: the reaper never takes a row from a worker that heartbeats
   within the timeout */
#ifdef P_THEFT
#define CHECK_THEFT(r) assert(!THEFT(r))
#else
#define CHECK_THEFT(r) skip
#endif
#if NW == 2
#define THEFT(r) (token[r] != 0 && ((healthy[0] && mytok[0] == token[r]) || \
                                    (healthy[1] && mytok[1] == token[r])))
#else
#define THEFT(r) (token[r] != 0 && ((healthy[0] && mytok[0] == token[r]) || \
                                    (healthy[1] && mytok[1] == token[r]) || \
                                    (healthy[2] && mytok[2] == token[r])))
#endif

/* the clock cannot pass a healthy worker's heartbeat due time: a healthy
   worker heartbeats (or finishes) before a row it holds is HBI ticks old */
#define ROWDUE(w,r) (healthy[w] && mytok[w] != 0 && token[r] == mytok[w] && \
                     status[r] == PROCESSING && age[r] >= HBI)
#define WDUE(w) (ROWDUE(w,0) || ROWDUE(w,1))
#if NW == 2
#define DUE (WDUE(0) || WDUE(1))
#else
#define DUE (WDUE(0) || WDUE(1) || WDUE(2))
#endif

/* the reaper's staleness test: claimed_at < now() - timeout, checked one
   tick early (age >= TIMEOUT), in favour of the reaper */
#ifdef MUTANT_REAP_IGNORES_CLAIMED_AT
#define STALE(r) (true)
#else
#define STALE(r) (age[r] >= TIMEOUT)
#endif

/* a fresh token: 128 random bits in the code; here the smallest value that
   no row and no worker refers to, which no comparison can tell from a
   never-used one */
inline alloc_token() {
#ifdef MUTANT_SHARED_TOKEN
	tx = 1;
#else
	tx = 0;
	cx = 1;
	do
	:: cx > NTOK -> break
	:: cx <= NTOK ->
		nx = 0;
		for (ix : 0 .. NR-1) { if :: token[ix] == cx -> nx = 1 :: else fi }
		for (ix : 0 .. NW-1) { if :: mytok[ix] == cx -> nx = 1 :: else fi }
		if
		:: nx == 0 -> tx = cx; break
		:: else -> cx++
		fi
	od;
	assert(tx != 0);
#endif
}

/* The end of a batch: once it believes it holds nothing, the worker drops
   it and its next step is a claim. */
inline end_if_empty(w) {
	if
	:: held[w] == 0 -> mytok[w] = 0; healthy[w] = false; hbleft[w] = 0
	:: else
	fi
}

/* claim (one statement; token-update and SKIP LOCKED mark the same rows):
   WITH cl_c AS MATERIALIZED (SELECT id FROM t WHERE status = 'PENDING'
     ORDER BY id + 0 LIMIT $limit FOR UPDATE SKIP LOCKED)
   UPDATE t AS cl_t SET status = 'PROCESSING', token = $token, claimed_at = now(),
     attempts = COALESCE(cl_t.attempts, 0) + 1
   FROM cl_c WHERE cl_t.id = cl_c.id AND cl_t.status = 'PENDING'
   MySQL token-update: UPDATE t SET status = 'PROCESSING', token = ?,
     claimed_at = UTC_TIMESTAMP(6), attempts = COALESCE(attempts, 0) + 1
     WHERE status = 'PENDING' ORDER BY status, id LIMIT ?
   A lost reply leaves the rows marked under a token nobody knows: the
   reaper returns them. */
inline claim(w, lose) {
	alloc_token();
	nx = 0; gotx = 0;
	for (ix : 0 .. NR-1) {
		if
		:: nx < LIMIT && status[ix] == PENDING ->
			status[ix] = PROCESSING; token[ix] = tx; age[ix] = 0;
			/* attempts is kept exactly up to MAXATT + 1, which stands for
			   "above MaxAttempts": every test of it is a comparison with
			   MaxAttempts */
			if :: attempts[ix] <= MAXATT -> attempts[ix]++ :: else fi;
			gotx = gotx | BIT(ix); nx++
		:: else
		fi
	}
	if
	:: gotx != 0 && !lose ->
		mytok[w] = tx; held[w] = gotx; healthy[w] = true; hbleft[w] = HBMAX
	:: else
	fi;
	printf("w%d claim under token %d:", w, tx); SET(gotx); printf(" (reply lost: %d)\n", lose); ROWS;
	tx = 0; nx = 0; gotx = 0; ix = 0; cx = 0
}

/* Batch.Ack:
   UPDATE t SET status = 'DONE', token = NULL WHERE token = $token AND id = ANY($keys)
   On success the batch closes the rows (acked or reported lost); on an
   error (here: a lost reply) they stay open. */
inline ack(w, mask, lose) {
	for (ix : 0 .. NR-1) {
		if
#ifdef MUTANT_ACK_NO_TOKEN
		:: (mask & BIT(ix)) ->
#else
		:: (mask & BIT(ix)) && token[ix] == mytok[w] ->
#endif
			CHECK_ACK(ix, mytok[w]);
			status[ix] = DONE; token[ix] = 0; age[ix] = 0
		:: else
		fi
	}
	printf("w%d ack", w); SET(mask); printf(" under token %d (reply lost: %d)\n", mytok[w], lose); ROWS;
	if :: !lose -> held[w] = held[w] & ~(mask) :: else fi;
	end_if_empty(w);
	ix = 0
}

/* Batch.Fail with FailRetry:
   UPDATE t SET status = CASE WHEN COALESCE(attempts, 0) >= $max_attempts
     THEN 'FAILED' ELSE 'PENDING' END, token = NULL
     WHERE token = $token AND id = ANY($keys) */
inline fail(w, mask, lose) {
	for (ix : 0 .. NR-1) {
		if
		:: (mask & BIT(ix)) && token[ix] == mytok[w] ->
			CHECK_ACK(ix, mytok[w]);
#ifdef MUTANT_FAIL_NO_PARK
			status[ix] = PENDING;   /* SET status = 'PENDING' whatever the attempts */
#else
			if
			:: attempts[ix] >= MAXATT -> status[ix] = FAILED
			:: else -> status[ix] = PENDING
			fi;
#endif
			token[ix] = 0; age[ix] = 0
		:: else
		fi
	}
	printf("w%d fail", w); SET(mask); printf(" under token %d (reply lost: %d)\n", mytok[w], lose); ROWS;
	if :: !lose -> held[w] = held[w] & ~(mask) :: else fi;
	end_if_empty(w);
	ix = 0
}

/* Batch.Heartbeat (each keep-alive tick):
   UPDATE t SET claimed_at = GREATEST(now(), claimed_at + interval '1 microsecond')
     WHERE token = $token AND status = 'PROCESSING'
   The count it returns only feeds a log line (the next ack reports lost
   rows precisely), so the batch's belief does not change, reply or not. */
inline heartbeat(w) {
	for (ix : 0 .. NR-1) {
		if
#ifdef MUTANT_HB_NO_STATUS
		:: token[ix] == mytok[w] ->
#else
		:: token[ix] == mytok[w] && status[ix] == PROCESSING ->
#endif
			CHECK_HB_REL(ix, mytok[w]);
			age[ix] = 0
		:: else
		fi
	}
	hbleft[w]--;
	printf("w%d heartbeat under token %d\n", w, mytok[w]); ROWS;
	ix = 0
}

/* Batch.Release (the open rows):
   UPDATE t SET status = 'PENDING', token = NULL, attempts = GREATEST(attempts - 1, 0)
     WHERE token = $token AND status = 'PROCESSING' AND id = ANY($keys) */
inline release(w, lose) {
	for (ix : 0 .. NR-1) {
		if
		:: (held[w] & BIT(ix)) && token[ix] == mytok[w] && status[ix] == PROCESSING ->
			CHECK_HB_REL(ix, mytok[w]);
			status[ix] = PENDING; token[ix] = 0; age[ix] = 0;
			if :: attempts[ix] > 0 -> attempts[ix]-- :: else fi
		:: else
		fi
	}
	releases--;
	printf("w%d release", w); SET(held[w]); printf(" under token %d (reply lost: %d)\n", mytok[w], lose); ROWS;
	if :: !lose -> held[w] = 0 :: else fi;
	end_if_empty(w);
	ix = 0
}

#define IDLE(w)  (mytok[w] == 0 && held[w] == 0)
#define LOSE     (lostreplies > 0)

/* A worker: Claimer.Claim, then the batch's Ack / Fail / Heartbeat /
   Release in any order, until the batch holds nothing. At any point it may
   freeze (stop heartbeating on schedule: GC pause, stuck I/O, a slow
   handler), crash (forget everything and restart) or lose the reply of a
   statement that committed. Each step is one statement, with its reply. */
proctype Worker(byte w) {
	do
	:: d_step { IDLE(w) -> claim(w, false) }
	:: d_step { IDLE(w) && LOSE -> lostreplies--; claim(w, true) }

	:: d_step { (held[w] & 1) -> ack(w, 1, false) }
	:: d_step { (held[w] & 2) -> ack(w, 2, false) }
	:: d_step { held[w] == 3  -> ack(w, 3, false) }
	:: d_step { (held[w] & 1) && LOSE -> lostreplies--; ack(w, 1, true) }
	:: d_step { (held[w] & 2) && LOSE -> lostreplies--; ack(w, 2, true) }
	:: d_step { held[w] == 3  && LOSE -> lostreplies--; ack(w, 3, true) }

	:: d_step { (held[w] & 1) -> fail(w, 1, false) }
	:: d_step { (held[w] & 2) -> fail(w, 2, false) }
	:: d_step { (held[w] & 1) && LOSE -> lostreplies--; fail(w, 1, true) }
	:: d_step { (held[w] & 2) && LOSE -> lostreplies--; fail(w, 2, true) }

	:: d_step { held[w] != 0 && hbleft[w] > 0 -> heartbeat(w) }

	:: d_step { held[w] != 0 && releases > 0 -> release(w, false) }
	:: d_step { held[w] != 0 && releases > 0 && LOSE -> lostreplies--; release(w, true) }

	:: d_step { healthy[w] -> healthy[w] = false; printf("w%d freezes\n", w) }
	:: d_step { !IDLE(w) && crashes > 0 ->
		crashes--; mytok[w] = 0; held[w] = 0; healthy[w] = false; hbleft[w] = 0;
		printf("w%d crashes and restarts\n", w) }
	od
}

/* zombie.Reaper.Sweep -> core.Claims.Reap: with MaxAttempts set, two
   statements, one after the other, each evaluating now() afresh. Each
   touches at most BatchLimit rows; here BatchLimit >= NR. */
proctype Reaper() {
	do
	::
		/* 1. park: WITH cl_c AS MATERIALIZED (SELECT id FROM t
		     WHERE status = 'PROCESSING' AND claimed_at < now() - $timeout
		     AND COALESCE(attempts, 0) >= $max_attempts
		     ORDER BY id LIMIT $limit FOR UPDATE SKIP LOCKED)
		   UPDATE t AS cl_t SET status = 'FAILED', token = NULL FROM cl_c
		     WHERE cl_t.id = cl_c.id AND cl_t.status = 'PROCESSING' */
		d_step {
			for (ix : 0 .. NR-1) {
				if
				:: status[ix] == PROCESSING && STALE(ix) && attempts[ix] >= MAXATT ->
					CHECK_THEFT(ix);
					status[ix] = FAILED; token[ix] = 0; age[ix] = 0; nx++
				:: else
				fi
			}
			printf("reaper, park step: %d row(s) parked\n", nx); if :: nx > 0 -> ROWS :: else fi;
			ix = 0; nx = 0
		};
		/* 2. return: the same statement with SET status = 'PENDING',
		     token = NULL and no condition on attempts */
		d_step {
			for (ix : 0 .. NR-1) {
				if
#ifdef REAP_RETURN_BELOW_MAX
				:: status[ix] == PROCESSING && STALE(ix) && attempts[ix] < MAXATT ->
#else
				:: status[ix] == PROCESSING && STALE(ix) ->
#endif
					CHECK_THEFT(ix);
					status[ix] = PENDING; token[ix] = 0; age[ix] = 0; nx++
				:: else
				fi
			}
			printf("reaper, return step: %d row(s) back to pending\n", nx); if :: nx > 0 -> ROWS :: else fi;
			ix = 0; nx = 0
		}
	od
}

/* The database clock: now() advances one tick. A healthy worker's due
   heartbeat comes first (the heartbeat interval is shorter than the
   timeout); a frozen or crashed worker does not hold the clock back. */
active proctype Clock() {
	do
	:: d_step {
		!DUE ->
		for (ix : 0 .. NR-1) {
			if
			:: status[ix] == PROCESSING && age[ix] < TIMEOUT -> age[ix]++
			:: else
			fi
		}
		printf("tick\n");
		ix = 0
	   }
	od
}

#ifdef OUTSIDE_WRITER
/* Once: something outside the library marks a PROCESSING row done by hand
   (UPDATE t SET status = 'DONE' WHERE id = ?), leaving its token. */
active proctype Outside() {
	if
	:: d_step { status[0] == PROCESSING -> status[0] = DONE; age[0] = 0; printf("outside: r0 set DONE by hand\n"); ROWS }
	:: d_step { status[1] == PROCESSING -> status[1] = DONE; age[1] = 0; printf("outside: r1 set DONE by hand\n"); ROWS }
	fi
}
#endif

/* Invariants, checked in every state. */
#define FINAL(r) (status[r] == DONE || status[r] == FAILED)
/* (e) attempts never exceed MaxAttempts */
#ifdef P_E
#define INV_ATTEMPTS(r) (attempts[r] <= MAXATT)
#else
#define INV_ATTEMPTS(r) (true)
#endif
/* the token column is set exactly on PROCESSING rows (this is what makes
   "AND status = processing" redundant next to "token = ?") */
#if defined(P_TOKEN) && !defined(OUTSIDE_WRITER)
#define INV_TOKEN(r) ((token[r] != 0) == (status[r] == PROCESSING))
#else
#define INV_TOKEN(r) (true)
#endif
/* (a2) no two workers believe they hold a row and can still complete it
   (an ack under their token would change it) */
#define CAN(w,r) ((held[w] & BIT(r)) && mytok[w] != 0 && token[r] == mytok[w])
#if !defined(P_A2)
#define EXCL(r) (true)
#elif NW == 2
#define EXCL(r) (!(CAN(0,r) && CAN(1,r)))
#else
#define EXCL(r) (!(CAN(0,r) && CAN(1,r)) && !(CAN(0,r) && CAN(2,r)) && !(CAN(1,r) && CAN(2,r)))
#endif
#define INVARIANTS (INV_ATTEMPTS(0) && INV_ATTEMPTS(1) && INV_TOKEN(0) && INV_TOKEN(1) && EXCL(0) && EXCL(1))

active proctype Monitor() {
end:	atomic { !INVARIANTS -> assert(INV_ATTEMPTS(0) && INV_ATTEMPTS(1)); /* (e) */
	                        assert(INV_TOKEN(0) && INV_TOKEN(1));        /* token_iff_processing */
	                        assert(EXCL(0) && EXCL(1)) }                  /* (a2) */
}

init {
	byte k;
	atomic {
		for (k : 0 .. NW-1) { run Worker(k) }
#ifndef MUTANT_NO_REAPER
		run Reaper();
#endif
		k = 0
	}
}

#ifdef LIVENESS
/* (b) nothing lost: under weak fairness every row ends DONE or FAILED
   (both are final: no statement moves a row out of them) */
ltl nothing_lost { <> (FINAL(0) && FINAL(1)) }
#endif

#else
/* ======================================================================
 * Part 2: leases (tasklock)
 * ====================================================================== */

/* Which properties to check: P_C (fences), P_D (no other holder acquires
   while a holder's context lives, checked at the CAS), P_DLIVE (a live
   holder is the unexpired owner in the database); none given = all. */
#if !defined(P_C) && !defined(P_D) && !defined(P_DLIVE)
#define P_C
#define P_D
#define P_DLIVE
#endif

#define NH 2                /* holders */
#define TTL 10              /* TTL, in database clock ticks (1 tick = TTL/10) */
#define MARGIN (TTL / 10)   /* tasklock Config.SafetyMargin default: TTL/10 */
#define RENEW (TTL / 3)     /* Config.RenewInterval default: TTL/3 (renewals
                               may happen at any time here, which covers it) */
#ifdef MUTANT_NO_MARGIN
#define LTTL TTL            /* local deadline = start + TTL */
#else
#define LTTL (TTL - MARGIN) /* local deadline = start + TTL - SafetyMargin */
#endif
/* Clock-rate bound: per database tick a local clock advances 1, or 0 or 2
   (an irregular tick), with at least K-1 regular ticks between two
   irregular ones: over any n ticks it advances n +- ceil(n/K), a rate within
   [1 - 1/K, 1 + 1/K] of the database clock's. */
#ifdef MUTANT_DRIFT
#define K 9                 /* 11.1% > MARGIN/TTL */
#else
#define K 10                /* 10% = MARGIN/TTL */
#endif
#define NTOKL (NH + 1)

/* the key row */
byte  owner;        /* 0 = NULL; else an owner token */
byte  exprel;       /* expires_at - now(), ticks; 0 when passed (or NULL) */
short fgap;         /* (highest fence handed to a holder) - (fence column) */

/* the holders */
bool  live[NH];     /* the lease's context is not cancelled */
byte  left[NH];     /* local time until the local deadline (while live) */
bool  timing[NH];   /* an acquire or renew is in flight */
byte  pend[NH];     /* TTL - margin - local time since that statement started */
byte  reg[NH];      /* regular local ticks since the last irregular one */
byte  tok[NH];      /* owner token of the holder's current lease, 0 none */

byte ix, cx, tx, nx;    /* always 0 between steps */

/* one local clock's share of a tick: it advances a (1, or 0 or 2 when
   irregular ticks are allowed) */
#define ADV_OK(h,a) ((a) == 1 || reg[h] == K-1)
inline local_tick(h, a) {
	if
	:: a == 1 -> if :: reg[h] < K-1 -> reg[h]++ :: else fi
	:: else -> reg[h] = 0
	fi;
	if
	:: timing[h] -> if :: pend[h] > a -> pend[h] = pend[h] - a :: else -> pend[h] = 0 fi
	:: else
	fi;
	if
	:: live[h] ->
		if
		:: left[h] > a -> left[h] = left[h] - a
#ifdef MUTANT_TIMER_LATE
		:: else -> left[h] = 0          /* fires when the holder next runs */
#else
		:: else -> left[h] = 0; live[h] = false   /* the timer fires: cancel */
#endif
		fi
	:: else
	fi;
	/* a clock nobody is timing with has no history that matters */
	if
	:: !live[h] && !timing[h] -> reg[h] = K-1
	:: else
	fi
}

/* now() advances one tick, and each local clock by a0 / a1 */
#define TICK(a0,a1) d_step { ADV_OK(0,a0) && ADV_OK(1,a1) -> \
	if :: owner != 0 && exprel > 0 -> exprel-- :: else fi; \
	local_tick(0, a0); local_tick(1, a1); \
	printf("tick (local +%d +%d): expires_at-now=%d | h0 live=%d left=%d | h1 live=%d left=%d\n", \
	       a0, a1, exprel, live[0], left[0], live[1], left[1]) }

active proctype Clock() {
	do
	:: TICK(1,1)
	:: TICK(0,1)
	:: TICK(2,1)
	:: TICK(1,0)
	:: TICK(1,2)
	:: TICK(0,0)
	:: TICK(0,2)
	:: TICK(2,0)
	:: TICK(2,2)
	od
}

inline alloc_owner(h) {
	tx = 0;
	cx = 1;
	do
	:: cx > NTOKL -> break
	:: cx <= NTOKL ->
		nx = (owner == cx);
		for (ix : 0 .. NH-1) { if :: tok[ix] == cx -> nx = 1 :: else fi }
		if
		:: nx == 0 -> tx = cx; break
		:: else -> cx++
		fi
	od;
	assert(tx != 0);
	tok[h] = tx;
	tx = 0; cx = 0; nx = 0; ix = 0
}

/* where each holder is */
mtype = { IDLE, ACQ_SENT, HOLD, REN_SENT, CLEANUP };
mtype hpc[NH] = IDLE;

/* acquire: UPDATE k SET owner = $owner, lock_at = now(), expires_at = now() + $ttl,
     fence = COALESCE(fence, 0) + 1
     WHERE key = $key AND (owner IS NULL OR expires_at IS NULL
                           OR expires_at < now() - $slack)
   (taken one tick early, without the slack: exprel == 0) */
#define CAN_ACQUIRE (owner == 0 || exprel == 0)
inline acquire_cas(h) {
	printf("h%d acquire CAS succeeds (owner %d)\n", h, tok[h]);
#ifdef P_D
	/* (d) every other holder's context is already cancelled */
	for (ix : 0 .. NH-1) { assert(ix == h || !live[ix]) }
	ix = 0;
#endif
	owner = tok[h]; exprel = TTL;
#ifndef MUTANT_NO_FENCE_INC
	fgap--;
#endif
#ifdef P_C
	/* (c) the fence handed out is above every earlier one */
	assert(fgap < 0);
#endif
	fgap = 0;
	timing[h] = false
}

/* A holder: Locker.Acquire, then Renew (KeepAlive) and Release. A
   statement is sent, then executed by the database some time later; its
   reply is taken at the execution (a later reply would only keep the older,
   earlier deadline in force meanwhile). The deadline timer fires in the
   clock's step (time.AfterFunc fires whatever the holder is doing). */
proctype Holder(byte h) {
	do
	/* Locker.Acquire: owner := NewToken(); start := Now(); send */
	:: d_step { hpc[h] == IDLE ->
		alloc_owner(h); timing[h] = true; pend[h] = LTTL; reg[h] = K-1; hpc[h] = ACQ_SENT;
		printf("h%d sends acquire (owner %d)\n", h, tok[h]) }
	/* the CAS succeeds; newLease arms deadline = start + TTL - SafetyMargin */
	:: d_step { hpc[h] == ACQ_SENT && CAN_ACQUIRE && pend[h] > 0 ->
		acquire_cas(h);
		live[h] = true; left[h] = pend[h]; pend[h] = 0; hpc[h] = HOLD;
		printf("h%d holds the lease, local deadline in %d\n", h, left[h]) }
	/* the CAS succeeds but the statement took >= TTL - SafetyMargin, or the
	   reply is lost (outcome unknown): Acquire releases the token */
	:: d_step { hpc[h] == ACQ_SENT && CAN_ACQUIRE ->
		acquire_cas(h); pend[h] = 0; hpc[h] = CLEANUP;
		printf("h%d took too long or lost the reply: gives it back\n", h) }
	/* ErrNotAcquired */
	:: d_step { hpc[h] == ACQ_SENT && !CAN_ACQUIRE ->
		timing[h] = false; pend[h] = 0; tok[h] = 0; hpc[h] = IDLE }

	/* Lease.Renew (KeepAlive, or by hand) while the lease lives; renewing
	   at any time covers the RenewInterval schedule */
	:: d_step { hpc[h] == HOLD && live[h] -> timing[h] = true; pend[h] = LTTL; hpc[h] = REN_SENT;
		printf("h%d sends renew\n", h) }
	/* UPDATE k SET lock_at = now(), expires_at = GREATEST(now() + $ttl,
	     expires_at + interval '1 microsecond') WHERE key = $key AND owner = $owner
	     RETURNING fence, expires_at
	   success: deadline = max(deadline, start + TTL - SafetyMargin), unless
	   the lease ended meanwhile (then it stays ended) */
	:: d_step { hpc[h] == REN_SENT && owner == tok[h] ->
		exprel = TTL;
		if :: live[h] && pend[h] > left[h] -> left[h] = pend[h] :: else fi;
		timing[h] = false; pend[h] = 0; hpc[h] = HOLD;
		printf("h%d renews, local deadline in %d\n", h, left[h]) }
	/* success, but the reply is lost: the lease runs on to its deadline */
	:: d_step { hpc[h] == REN_SENT && owner == tok[h] ->
		exprel = TTL; timing[h] = false; pend[h] = 0; hpc[h] = HOLD;
		printf("h%d renews, reply lost\n", h) }
	/* ErrLeaseLost: the lease ends */
	:: d_step { hpc[h] == REN_SENT && owner != tok[h] ->
		live[h] = false; left[h] = 0; timing[h] = false; pend[h] = 0; hpc[h] = HOLD;
		printf("h%d renew finds the lease lost\n", h) }

#ifdef MUTANT_TIMER_LATE
	/* the deadline timer fires only when the holder gets to run */
	:: d_step { live[h] && left[h] == 0 -> live[h] = false; printf("h%d timer fires late\n", h) }
#endif
	/* Lease.Release: end locally first (cancel), then the UPDATE */
	:: d_step { hpc[h] == HOLD -> live[h] = false; left[h] = 0; hpc[h] = CLEANUP; printf("h%d Release: ends locally\n", h) }
	/* release: UPDATE k SET owner = NULL, expires_at = NULL
	     WHERE key = $key AND owner = $owner */
	:: d_step { hpc[h] == CLEANUP ->
		if :: owner == tok[h] -> owner = 0; exprel = 0 :: else fi;
		printf("h%d release (owner %d)\n", h, tok[h]);
		tok[h] = 0; hpc[h] = IDLE }
	/* the lease ended (deadline or lost) and the caller drops it */
	:: d_step { hpc[h] == HOLD && !live[h] -> tok[h] = 0; hpc[h] = IDLE }
	/* crash: the process and its context are gone (a statement it sent may
	   still run; a release it meant to send never runs) */
	:: d_step { (hpc[h] == HOLD || hpc[h] == CLEANUP) ->
		live[h] = false; left[h] = 0; tok[h] = 0; hpc[h] = IDLE;
		printf("h%d crashes\n", h) }
	od
}

/* zombie.LeaseReaper -> ReapExpired:
   UPDATE k SET owner = NULL, expires_at = NULL
     WHERE owner IS NOT NULL AND expires_at < now() - $slack  (the fence stays) */
active proctype LeaseReaper() {
	do
	:: d_step { owner != 0 && exprel == 0 -> owner = 0; printf("lease reaper frees the expired lease\n") }
	od
}

/* a live lease is, in the database, owned by its holder and unexpired: so
   no one else can acquire it while its context lives (stronger form of (d)) */
#define LIVE_OWNS(h) (!live[h] || (owner == tok[h] && exprel > 0))

#ifdef P_DLIVE
active proctype Monitor() {
end:	atomic { !(LIVE_OWNS(0) && LIVE_OWNS(1)) -> assert(LIVE_OWNS(0) && LIVE_OWNS(1)) }
}
#endif

init {
	atomic { run Holder(0); run Holder(1) }
}
#endif
