/*
 * coalesce.pml -- a Promela model of package coalesce's fold protocol,
 * checked with spin (model/check.sh; README.md, "Coalesce").
 *
 * One key. Writers accept changes of it (Coalescer.Accept: the change's
 * own transaction, then the dirty mark markDirty, a compare-and-set on the
 * key's row of the keys table), flushers claim the key and fold its
 * unfolded changes (Flusher.Flush, flushKey, fold), a reaper returns the
 * key of a flusher that froze or died. Every database statement is one
 * atomic step (d_step) conditioned as the SQL of coalesce/sql.go and the
 * claim store's versioned ack (internal/store, ackByRow) condition it; the
 * SQL is quoted next to each step (PostgreSQL's text, from
 * coalesce/testdata/golden/postgres.sql and
 * dialect/postgres/testdata/golden/claim_full.sql).
 *
 * The fold's transaction is two steps: its read of the unfolded changes
 * (what the fold sees) and its commit, which does all its writes at once
 * or none. That is exact for what the properties need: every row the
 * transaction writes (the state, the changes it marks, the key's row,
 * locked FOR UPDATE by the ack) stays locked from its write to the
 * commit, so no other statement sees or changes it in between; a change
 * row its mark did not match is folded, and stays folded. Changes get
 * their ids when their transaction commits, in commit order, as one
 * source's changes do (the source's row is locked from the sequence check
 * to the commit).
 *
 * Properties (P_... switches pick them; none given = f1 + f3):
 *   f1  no change is folded twice: a committed fold's changes were not
 *       folded into the state before (assertion at the commit)
 *   f3  the state's version never goes backwards: a committed fold takes,
 *       in id order, exactly the changes that follow the state's version
 *       (persisted), so the state holds changes 1..persisted, no gap
 *   n1  (P_N1) nothing lost without the sweep: once every writer's Accept
 *       has returned, the key is never completed (DONE) while a change is
 *       not in the state (from DONE nothing but a new change or the
 *       stranded-change sweep would make it dirty again)
 *   n2  (LIVENESS) nothing lost: under weak fairness, in the end every
 *       change whose transaction committed is in the state (LTL)
 *
 * Bounds and switches (spin -D...):
 *   NW=2       writers, one change each (at most 7)
 *   NF=2       flushers
 *   MAXCH=8    FlusherConfig.MaxChanges (8: never reached; 1: every fold
 *              takes one change and bumps the version, flushKey's bumpHeld)
 *   FCRASH=1   flusher crashes in a run (at any point; the flusher is gone,
 *              its open transaction rolled back, its key left PROCESSING)
 *   FAILS=1    fold transactions rolled back in a run (a fold error, a
 *              deadlock retried by dialect.Retry, a failed commit)
 *   FREEZES    freezes in a run (default: unbounded); a frozen flusher
 *              stops heartbeating, so the reaper may take its key, and its
 *              later steps may come at any time
 *   WCRASH=0   writers killed between their change's commit and their
 *              dirty mark (a stranded change)
 *   UNSTRAND   a flusher's sweep for stranded changes (Flusher.Unstrand)
 *   ACCEPT_TX  writers use Coalescer.AcceptTx (change and mark in one
 *              transaction, bumpInTx / insertKey)
 * Negative controls (check.sh says which must yield a counterexample;
 * NO_COUNT_CHECK, REAP_IGNORES_CLAIMED_AT, BUMP_DONE_NO_STATUS, and
 * ACK_NO_TOKEN for f1 and f3, are equivalent mutants: the properties verify, README.md says why):
 *   MUTANT_ACK_NO_VERSION      the fold completes the key DONE whatever
 *                              its version (no requeue on version)
 *   MUTANT_MARK_OUTSIDE_TX     the changes are marked folded by a
 *                              statement of their own after the fold's
 *                              commit, not in its transaction
 *   MUTANT_READ_NO_FILTER      the fold reads the key's changes without
 *                              AND folded_at IS NULL
 *   MUTANT_READ_NEWEST_FIRST   the fold reads them newest first (ORDER BY
 *                              id DESC; with MAXCH=1)
 *   MUTANT_NO_START_FLUSH      the flush does not record flush_version
 *                              before reading changes
 *   MUTANT_SKIP_PROCESSING     markDirty writes nothing whenever the key
 *                              is PROCESSING (ignores flush_version)
 *   MUTANT_NO_BUMP_HELD        a fold that took MaxChanges changes does
 *                              not bump the version (with MAXCH=1)
 *   MUTANT_NO_COUNT_CHECK      the fold does not check that its mark
 *                              matched every change it read
 *   MUTANT_ACK_NO_TOKEN        the ack locks and completes the key by its
 *                              id alone, not by the flusher's token
 *   MUTANT_REAP_IGNORES_CLAIMED_AT  the reaper takes the key of a
 *                              flusher that heartbeats
 *   MUTANT_NO_REAPER           no reaper runs (a dead flusher's key stays
 *                              PROCESSING)
 *   MUTANT_BUMP_PROCESSING_NO_STATUS  bumpProcessing compares the version
 *                              alone, not the status with it
 *   MUTANT_BUMP_DONE_NO_STATUS bumpDone compares the version alone
 *                              (equivalent: only a bump leaves DONE)
 */

#ifndef NW
#define NW 2
#endif
#ifndef NF
#define NF 2
#endif
#ifndef MAXCH
#define MAXCH 8
#endif
#ifndef FCRASH
#define FCRASH 1
#endif
#ifndef FAILS
#define FAILS 1
#endif
#ifndef WCRASH
#define WCRASH 0
#endif
#if !defined(P_F1) && !defined(P_F3) && !defined(P_N1)
#define P_F1
#define P_F3
#endif

#define PENDING 1
#define PROCESSING 2
#define DONE 3
#define BIT(c) (1 << ((c) - 1))     /* change c (ids from 1) as a bit */
#define UPTO(n) ((1 << (n)) - 1)    /* changes 1..n */

/* the key's row of the keys table */
bool kx;          /* the row exists */
byte st;          /* status */
byte tok;         /* token: 0 = NULL, else the holding flusher + 1 */
byte ver;         /* version: the dirty marks */
byte fver;        /* flush_version */
byte persisted;   /* persisted: the highest change id folded */
/* the changes table */
byte nch;         /* changes committed: ids 1..nch */
byte folded;      /* changes with folded_at set */
/* ghosts */
byte applied;     /* changes the state holds (committed folds' writes) */
byte wfin;        /* writers whose Accept returned (or that were killed) */
byte fcrashes, fails, freezes, wcrashes;
/* per flusher */
byte cv[NF];      /* the version its claim returned */
bool stale[NF];   /* frozen or dead: its key's claimed_at may grow old */

/* f1 and f3, at a fold's commit, for the changes rd it folds */
#ifdef P_F1
#define CHECK_F1(rd) assert(((rd) & applied) == 0)
#else
#define CHECK_F1(rd) skip
#endif
#ifdef P_F3
#define CHECK_F3(rd, k) assert((rd) == (UPTO(persisted + (k)) & ~UPTO(persisted)))
#else
#define CHECK_F3(rd, k) skip
#endif

/* Coalescer.markDirty: read the row without locking, then a compare-and-
   set on what was read; when it matched nothing, read again and stop if
   the version moved (another writer bumped it after our change committed,
   which forces a later flush just the same), else decide again. Locals
   that are dead are kept at 0, so that they do not multiply states. */
#define READKEY found = kx; s = st; v = ver; fv = fver
#define REREAD d_step { n = v; wasFound = found; READKEY; \
	if :: wasFound && found && v != n -> n = 1 :: else -> n = 0 fi; wasFound = false }; \
	if :: n == 1 -> break :: else fi
inline markDirty() {
	d_step { READKEY }   /* readKey: SELECT status, version, flush_version FROM keys WHERE change_key = $1 */
	do
	:: !found ->
		/* insertKey: INSERT INTO keys (change_key, status, version)
		   VALUES ($1, 'PENDING', 1) ON CONFLICT DO NOTHING */
		d_step { if :: !kx -> kx = true; st = PENDING; ver = 1; fver = 0; n = 1 :: else -> n = 0 fi };
		if :: n == 1 -> break :: else fi;
		REREAD
	:: found && s == PENDING -> break
	:: found && s == DONE ->
		/* bumpDone: UPDATE keys SET status = 'PENDING', version = version + 1
		   WHERE change_key = $1 AND CASE WHEN status = 'DONE' THEN version END = $2 */
#ifdef MUTANT_BUMP_DONE_NO_STATUS
		d_step { if :: ver == v -> st = PENDING; ver++; n = 1 :: else -> n = 0 fi };
#else
		d_step { if :: st == DONE && ver == v -> st = PENDING; ver++; n = 1 :: else -> n = 0 fi };
#endif
		if :: n == 1 -> break :: else fi;
		REREAD
#ifdef MUTANT_SKIP_PROCESSING
	:: found && s == PROCESSING -> break
#else
	:: found && s == PROCESSING && v > fv -> break
	:: found && s == PROCESSING && v <= fv ->
		/* bumpProcessing: UPDATE keys SET version = version + 1
		   WHERE change_key = $1 AND CASE WHEN status = 'PROCESSING' THEN version END = $2 */
#ifdef MUTANT_BUMP_PROCESSING_NO_STATUS
		d_step { if :: ver == v -> ver++; n = 1 :: else -> n = 0 fi };
#else
		d_step { if :: st == PROCESSING && ver == v -> ver++; n = 1 :: else -> n = 0 fi };
#endif
		if :: n == 1 -> break :: else fi;
		REREAD
#endif
	od
}

#define MD_LOCALS bool found, wasFound; byte s, v, fv, n

proctype Writer(byte w) {
	MD_LOCALS;
#ifdef ACCEPT_TX
	/* AcceptTx: the change and the mark in the caller's transaction, which
	   holds the key's row from bumpInTx to its commit: one step.
	   INSERT INTO changes ...; UPDATE keys SET version = version + 1,
	   status = CASE WHEN status = 'DONE' THEN 'PENDING' ELSE status END
	   WHERE change_key = $1 (no row: insertKey) */
	d_step {
		nch++;
		if
		:: kx -> ver++; if :: st == DONE -> st = PENDING :: else fi
		:: else -> kx = true; st = PENDING; ver = 1; fver = 0
		fi
	}
#else
	/* Accept's transaction: findEvent, bumpSource, INSERT INTO changes
	   (change_key, event_id, source, seq, payload, accepted_at) ...; COMMIT */
	d_step { nch++; printf("w%d: change %d committed\n", w, nch) }
	if
	:: wcrashes < WCRASH -> wcrashes++; goto fin   /* killed before the mark */
	:: true
	fi;
	markDirty();
#endif
fin:	printf("w%d: Accept returns (status %d version %d flush_version %d)\n", w, st, ver, fver);
	/* locals cleared, so that finished writers do not multiply states */
	d_step { wfin++; found = false; s = 0; v = 0; fv = 0; n = 0 }
}

/* A flusher may die before any of its steps: its open transaction is
   rolled back, it never runs again, its key stays PROCESSING until the
   reaper takes it. */
#define CRASH d_step { fcrashes < FCRASH -> fcrashes++; stale[f] = true; rd = 0; cv[f] = 0 }; goto gone

/* A freeze (a GC pause, stuck I/O, a slow fold) is chosen at the claim: a
   stale batch stops heartbeating at some point after its claim, so the
   reaper may take its key from then on, and its own later steps may come
   at any time. Choosing at the claim covers a freeze at any later point:
   staleness only enables the reaper's step, which may always wait. */
#ifdef FREEZES
#define CAN_FREEZE freezes < FREEZES
#define FROZE freezes++
#else
#define CAN_FREEZE true
#define FROZE skip
#endif

/* claim: UPDATE keys SET status = 'PROCESSING', token = $tok, claimed_at =
   now(), attempts = attempts + 1 WHERE ... status = 'PENDING' RETURNING
   change_key, version, ... */
#define CLAIM kx && st == PENDING -> st = PROCESSING; tok = f + 1; cv[f] = ver

proctype Flusher(byte f) {
	byte rd, k, c, hi;
#ifdef MUTANT_MARK_OUTSIDE_TX
	byte got;
#endif
	bool ok;
end:
	do
	:: if
		:: d_step { CLAIM; printf("f%d claims the key at version %d\n", f, ver) }
		:: d_step { CLAIM; if :: CAN_FREEZE -> FROZE; stale[f] = true :: else fi;
			printf("f%d claims the key at version %d (stale: %d)\n", f, ver, stale[f]) }
		fi;
#ifndef MUTANT_NO_START_FLUSH
		/* startFlush: UPDATE keys SET flush_version = version WHERE token = $1 */
		if
		:: d_step { if :: tok == f + 1 -> fver = ver :: else fi; printf("f%d startFlush: flush_version %d\n", f, fver) }
		:: CRASH
		fi;
#endif
fold:		skip;
		/* flushKey's transaction, read: SELECT id, ... FROM changes
		   WHERE change_key = $1 AND folded_at IS NULL ORDER BY id LIMIT $2 */
		if
		:: d_step {
			rd = 0; k = 0;
#ifdef MUTANT_READ_NEWEST_FIRST
			c = nch;
			do
			:: c >= 1 && k < MAXCH ->
				if :: !(folded & BIT(c)) -> rd = rd | BIT(c); k++ :: else fi;
				c--
			:: else -> break
			od;
#else
			c = 1;
			do
			:: c <= nch && k < MAXCH ->
#ifdef MUTANT_READ_NO_FILTER
				rd = rd | BIT(c); k++;
#else
				if :: !(folded & BIT(c)) -> rd = rd | BIT(c); k++ :: else fi;
#endif
				c++
			:: else -> break
			od;
#endif
			c = 0; k = 0;
			printf("f%d reads changes %d (bits; folded %d)\n", f, rd, folded)
		   }
		:: CRASH
		fi;
		/* flushKey's transaction, the rest and its commit, all or nothing:
		   fold: Fold(tx, changes); UPDATE changes SET folded_at = now()
		     WHERE folded_at IS NULL AND id IN (...), error (roll back)
		     unless it matched every change read;
		     UPDATE keys SET persisted = GREATEST(persisted, $1), ...
		   bumpHeld (read MaxChanges): UPDATE keys SET version = version + 1
		   AckTx, ack lock: SELECT change_key, version, attempts FROM keys
		     WHERE token = $1 AND change_key = ANY($2) FOR UPDATE
		     (no row: the key is lost, error, roll back); then
		   version as claimed: UPDATE keys SET status = 'DONE', token = NULL
		     WHERE token = $1 AND change_key = ANY($2)
		   version moved: ack requeue, UPDATE keys SET status = 'PENDING',
		     token = NULL, attempts = GREATEST(attempts - 1, 0)
		     WHERE token = $1 AND change_key = ANY($2)
		   COMMIT */
		if
		:: d_step {
#ifdef MUTANT_ACK_NO_TOKEN
			ok = kx;
#else
			ok = (tok == f + 1);
#endif
#ifndef MUTANT_NO_COUNT_CHECK
			ok = ok && ((rd & folded) == 0);
#endif
			if
			:: ok && rd != 0 ->
				k = 0; hi = 0; c = 1;
				do
				:: c <= 7 -> if :: rd & BIT(c) -> k++; hi = c :: else fi; c++
				:: else -> break
				od;
				CHECK_F1(rd);
				CHECK_F3(rd, k);
				applied = applied | rd;
#ifdef MUTANT_MARK_OUTSIDE_TX
				got = rd;
#else
				folded = folded | rd;
#endif
				/* persist: GREATEST(persisted, the highest id read) */
				if :: hi > persisted -> persisted = hi :: else fi;
#ifndef MUTANT_NO_BUMP_HELD
				if :: k == MAXCH -> ver++ :: else fi;
#endif
				c = 0; k = 0; hi = 0
			:: else
			fi;
			if
			:: ok ->
#ifdef MUTANT_ACK_NO_VERSION
				st = DONE;
#else
				if :: ver == cv[f] -> st = DONE :: else -> st = PENDING fi;
#endif
				tok = 0
			:: else
			fi;
			printf("f%d commit: %d (status %d version %d persisted %d folded %d)\n", f, ok, st, ver, persisted, folded);
			rd = 0; ok = false
		   }
		:: fails < FAILS ->
			/* rolled back: a fold error (Batch.Fail), a deadlock
			   (dialect.Retry runs the transaction again) or a failed
			   commit (the deferred Release) */
			fails++; rd = 0;
			if
			:: goto fold
			:: goto endflush
			fi
		:: CRASH
		fi;
#ifdef MUTANT_MARK_OUTSIDE_TX
		/* the mark after the commit, a statement of its own */
		if
		:: d_step { folded = folded | got; got = 0 }
		:: CRASH
		fi;
#endif
endflush:	skip;
		/* the batch ends: the deferred Release (Batch.Fail's effect too:
		   back to pending; attempts, backoff and parking are not
		   modelled), UPDATE keys SET status = 'PENDING', token = NULL,
		   attempts = ... WHERE token = $1 AND status = 'PROCESSING';
		   what the batch knew is forgotten (cleared, so that it does not
		   multiply states) */
		if
		:: d_step {
			if :: tok == f + 1 && st == PROCESSING -> st = PENDING; tok = 0 :: else fi;
			cv[f] = 0; stale[f] = false
		   }
		:: CRASH
		fi
	od;
gone:
	skip
}

/* zombie's reaper on the keys table: UPDATE keys SET status = 'PENDING',
   token = NULL WHERE status = 'PROCESSING' AND claimed_at < now() - timeout
   (the holder stopped heartbeating: it froze or died) */
#ifndef MUTANT_NO_REAPER
active proctype Reaper() {
end:
	do
#ifdef MUTANT_REAP_IGNORES_CLAIMED_AT
	:: d_step { kx && st == PROCESSING -> st = PENDING; tok = 0 }
#else
	:: d_step { kx && st == PROCESSING && tok != 0 && stale[tok - 1] -> st = PENDING; tok = 0; printf("reaper returns the key\n") }
#endif
	od
}
#endif

#ifdef UNSTRAND
/* Flusher.Unstrand: SELECT DISTINCT c.change_key FROM changes c LEFT JOIN
   keys k ... WHERE c.folded_at IS NULL AND c.accepted_at < now() - $1 AND
   (k.change_key IS NULL OR k.status = 'DONE'); then markDirty per key
   (the age condition is left out: the sweep may run at any time) */
active proctype Unstrand() {
	MD_LOCALS;
end:
	do
	:: d_step { (UPTO(nch) & ~folded) != 0 && (!kx || st == DONE) -> skip };
		markDirty();
		skip;
		d_step { found = false; s = 0; v = 0; fv = 0; n = 0 }
	od
}
#endif

#ifdef P_N1
/* n1: with every Accept returned, a DONE key holds every change */
#define N1 (!(wfin == NW && kx && st == DONE && applied != UPTO(nch)))
#else
#define N1 (true)
#endif
active proctype Monitor() {
end:	atomic { !(N1 && ver < 200) -> assert(N1); assert(ver < 200) }
}

init {
	byte i;
	atomic {
		for (i : 0 .. NW - 1) { run Writer(i) }
		for (i : 0 .. NF - 1) { run Flusher(i) }
		i = 0
	}
}

#ifdef LIVENESS
/* n2: every change whose transaction committed ends in the state */
ltl nothing_lost { <> (wfin == NW && applied == UPTO(nch)) }
#endif
