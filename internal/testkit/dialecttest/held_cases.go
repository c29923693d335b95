package dialecttest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/await"
)

// holder returns the fixture store's held claims.
func (f *fixture) holder() store.Holder {
	f.t.Helper()
	h, ok := f.cs.(store.Holder)
	require.True(f.t, ok, "the claim store implements store.Holder")
	return h
}

// hold holds up to limit rows of task with the given hold limit and returns
// the held claim and its rows in key order.
func (f *fixture) hold(limit int, holdLimit time.Duration) (*store.Held, []claimed) {
	f.t.Helper()
	var out []claimed
	h, n, err := f.holder().Hold(ctxT(f.t), &store.HoldParams{Limit: limit, ScopeValues: []any{1}, HoldLimit: holdLimit},
		func(sc store.Scanner) error {
			var c claimed
			var id any
			if err := sc.Scan(&id, &c.Version, &c.Attempts, &c.Payload); err != nil {
				return err
			}
			c.ID = norm(id)
			out = append(out, c)
			return nil
		})
	require.NoError(f.t, err)
	f.endOnCleanup(h)
	require.Equal(f.t, n, len(out))
	return h, out
}

// endOnCleanup rolls h back when the test ends, if it has not ended: a
// case that fails while it holds a claim must fail with its reason, not
// hang in the pool's Close waiting for the held connection.
func (f *fixture) endOnCleanup(h *store.Held) {
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Rollback(ctx)
	})
}

// holdFrom is hold with a key cursor.
func (f *fixture) holdFrom(limit int, from int64) (*store.Held, []claimed) {
	f.t.Helper()
	var out []claimed
	h, _, err := f.holder().Hold(ctxT(f.t), &store.HoldParams{Limit: limit, ScopeValues: []any{1}, HoldLimit: time.Minute, From: from},
		func(sc store.Scanner) error {
			var c claimed
			var id any
			if err := sc.Scan(&id, &c.Version, &c.Attempts, &c.Payload); err != nil {
				return err
			}
			c.ID = norm(id)
			out = append(out, c)
			return nil
		})
	require.NoError(f.t, err)
	f.endOnCleanup(h)
	return h, out
}

func keyOf(t *testing.T, id any) int64 {
	k, ok := id.(int64)
	require.True(t, ok, "integer key %v", id)
	return k
}

// sessionID returns the server's id of the held claim's connection, and
// the statement that ends that session from another connection.
func (f *fixture) sessionID(h *store.Held) (int64, string) {
	f.t.Helper()
	q, kill := "SELECT CONNECTION_ID()", "KILL %d"
	if f.d.Capabilities().Engine == dialect.EnginePostgreSQL {
		q, kill = "SELECT pg_backend_pid()::bigint", "SELECT pg_terminate_backend(%d)"
	}
	r, err := h.Querier().Query(ctxT(f.t), q)
	require.NoError(f.t, err)
	var id int64
	require.True(f.t, r.Next())
	require.NoError(f.t, r.Scan(&id))
	r.Close()
	return id, fmt.Sprintf(kill, id)
}

// testHeld checks the held-transaction claim: it writes nothing; a held
// row is skipped by every other claim, held or durable; acks, fails and the
// handler's own writes commit together, and a rollback undoes them all;
// keys the claim does not hold are reported lost; a killed connection and
// the server's hold limit each release the rows, and the holder learns of
// it. Engines without it refuse it.
func testHeld(t *testing.T, h Harness) {
	f := newFixture(t, h, withLifecycle)
	ctx := ctxT(t)
	hs := f.holder()
	if !hs.Holds() {
		_, _, err := hs.Hold(ctx, &store.HoldParams{Limit: 1, ScopeValues: []any{1}, HoldLimit: time.Second}, func(store.Scanner) error { return nil })
		require.ErrorIs(t, err, dialect.ErrNotSupported)
		return
	}
	_, err := f.db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s VARCHAR(64) NOT NULL)", f.q("cl_effect"), f.q("src")))
	require.NoError(t, err)
	effects := func() int {
		var n int
		require.NoError(t, f.db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s", f.q("cl_effect"))).Scan(&n))
		return n
	}
	f.insert(1, 5)
	h1, a := f.hold(3, time.Minute)
	require.Len(t, a, 3)
	h2, b := f.hold(10, time.Minute)
	require.Len(t, b, 2, "a held claim skips the rows another holds")
	_, none := f.claim(dialect.StrategySkipLocked, 1, 10)
	require.Empty(t, none, "a durable claim skips held rows")
	for _, r := range f.rows() {
		require.Equal(t, "PENDING", r.Status, "a held claim writes nothing")
		require.Empty(t, r.Token)
	}

	// h1: a handler write, a done ack with a key it does not hold, a
	// parking failure, a row left alone; then commit.
	_, err = h1.Querier().Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES ('%v')", f.q("cl_effect"), f.q("src"), a[0].ID))
	require.NoError(t, err)
	res, err := h1.Ack(ctx, &store.AckParams{IDs: []any{a[0].ID, b[0].ID}, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Lost, "a key the claim does not hold is lost")
	res, err = h1.Ack(ctx, &store.AckParams{IDs: []any{a[0].ID}, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Lost, "a key acked already is lost")
	res, err = h1.Ack(ctx, &store.AckParams{IDs: []any{a[1].ID}, Outcome: store.OutcomeRetry, MaxAttempts: 1, Error: "boom"})
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Parked, "a failure counts as an attempt, and the first reaches MaxAttempts 1")
	require.Equal(t, 1, h1.Unacked())
	require.Equal(t, 0, effects(), "nothing is visible before the commit")
	require.NoError(t, h1.Commit(ctx))
	require.Equal(t, 1, effects())
	require.Equal(t, "SENT", f.row(a[0].ID).Status)
	require.Equal(t, lifecycleRow{status: "FAILED", err: "boom", attempts: 1, runAtNull: true}, f.lifecycle(a[1].ID))
	require.Equal(t, lifecycleRow{status: "PENDING", runAtNull: true}, f.lifecycle(a[2].ID), "the row left alone is pending as it was")

	// h2: a retry with a delay and a handler write, rolled back.
	_, err = h2.Querier().Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES ('%v')", f.q("cl_effect"), f.q("src"), b[0].ID))
	require.NoError(t, err)
	res, err = h2.Ack(ctx, &store.AckParams{IDs: ids(b), Outcome: store.OutcomeRetry, Delay: time.Hour, Error: "later"})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.NoError(t, h2.Rollback(ctx))
	require.Equal(t, 1, effects())
	require.Equal(t, lifecycleRow{status: "PENDING", runAtNull: true}, f.lifecycle(b[0].ID), "the rollback undid the retry")
	_, err = h2.Ack(ctx, &store.AckParams{IDs: ids(b), Outcome: store.OutcomeDone})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "an ack after the end")

	// A key cursor: rows above it first; above every row, from the start.
	hc, above := f.holdFrom(10, keyOf(t, a[2].ID))
	require.Equal(t, ids(b), ids(above), "only the rows above the cursor (the others are held or done)")
	require.NoError(t, hc.Rollback(ctx))
	hc, wrap := f.holdFrom(1, keyOf(t, b[1].ID))
	require.Equal(t, []any{a[2].ID}, ids(wrap), "nothing above the cursor: from the start")
	require.NoError(t, hc.Rollback(ctx))

	// A retry with a delay, committed: the row waits.
	h3, c := f.hold(1, time.Minute)
	require.Len(t, c, 1)
	require.Equal(t, a[2].ID, c[0].ID)
	_, err = h3.Ack(ctx, &store.AckParams{IDs: ids(c), Outcome: store.OutcomeRetry, Delay: time.Hour, Error: "later"})
	require.NoError(t, err)
	require.NoError(t, h3.Commit(ctx))
	require.Equal(t, lifecycleRow{status: "PENDING", err: "later", attempts: 1}, f.lifecycle(a[2].ID))

	// A killed connection releases the rows at once; the holder learns of
	// it from its next statement.
	h4, d := f.hold(10, time.Minute)
	require.Equal(t, ids(b), ids(d), "the delayed row waits")
	_, kill := f.sessionID(h4)
	_, err = f.db.ExecContext(ctx, kill)
	require.NoError(t, err)
	h5, e := f.holdEventually(ids(b), 10*time.Second) // at once
	require.ErrorIs(t, h4.Ping(ctx), dialect.ErrClaimLost)
	_, err = h4.Ack(ctx, &store.AckParams{IDs: ids(d), Outcome: store.OutcomeDone})
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "the held claim has ended")
	require.NoError(t, h5.Rollback(ctx))
	require.Len(t, e, 2)

	// A frozen holder: the server ends its transaction after the hold
	// limit (MySQL counts whole seconds).
	h6, g := f.hold(10, time.Second)
	require.Len(t, g, 2)
	h7, again := f.holdEventually(ids(b), 10*time.Second) // a second, two on MySQL
	require.Len(t, again, 2)
	require.ErrorIs(t, h6.Ping(ctx), dialect.ErrClaimLost)
	require.ErrorIs(t, h6.Commit(ctx), dialect.ErrInvalidConfig, "the held claim has ended")
	res, err = h7.Ack(ctx, &store.AckParams{IDs: ids(again), Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.NoError(t, h7.Commit(ctx))
	require.Equal(t, "SENT", f.row(b[0].ID).Status)
	require.Equal(t, "SENT", f.row(b[1].ID).Status)

	// The pool's connections came back with the server's own limits.
	require.NoError(t, f.db.PingContext(ctx))
}

// testHeldCutShort: a hold whose context ends while it runs fails with the
// context's error and holds nothing, even when its statements returned
// (here the context ends as its rows are read): a driver may have closed
// the connection, and with it the transaction, as the last statement
// returned (go-sql-driver/mysql cancels a statement so), and a batch that
// holds nothing must not be handed out. The rows are free for the next
// holder (at once, or once the server has ended the closed connection's
// transaction).
func testHeldCutShort(t *testing.T, h Harness) {
	f := newFixture(t, h)
	if !f.holder().Holds() {
		return // testHeld checks the refusal
	}
	f.insert(1, 2)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	scanned := 0
	held, n, err := f.holder().Hold(ctx, &store.HoldParams{Limit: 10, ScopeValues: []any{1}, HoldLimit: time.Minute},
		func(sc store.Scanner) error {
			scanned++
			cancel()
			var id, version, attempts, payload any
			return sc.Scan(&id, &version, &attempts, &payload)
		})
	if held != nil {
		f.endOnCleanup(held)
	}
	require.ErrorIs(t, err, context.Canceled, "a hold cut short by its context (%d rows scanned)", scanned)
	require.Nil(t, held, "no held claim is handed out")
	require.Zero(t, n)
	require.NotZero(t, scanned, "the hold read its rows before it failed")
	var all []any
	for _, r := range f.rows() {
		require.Equal(t, "PENDING", r.Status, "a held claim writes nothing")
		all = append(all, r.ID)
	}
	h2, _ := f.holdEventually(all, 10*time.Second)
	require.NoError(t, h2.Rollback(ctxT(t)))
}

// holdEventually holds rows until it gets the keys want (the server
// releasing another holder's locks), failing after limit: what the case
// expects and a few seconds for a loaded machine, not the package's
// timeout.
func (f *fixture) holdEventually(want []any, limit time.Duration) (*store.Held, []claimed) {
	f.t.Helper()
	var h *store.Held
	var got []claimed
	await.Until(f.t, fmt.Sprintf("a held claim of the released rows %v", want), limit, func() (bool, string) {
		h, got = f.hold(10, time.Minute)
		if len(got) == len(want) {
			return true, ""
		}
		require.NoError(f.t, h.Rollback(context.Background()))
		return false, fmt.Sprintf("held %v", ids(got))
	})
	require.Equal(f.t, want, ids(got), "the rows were released")
	return h, got
}

// testHeldDeleteDone: on a DeleteDone table a held ack to done deletes the
// rows, in the held transaction.
func testHeldDeleteDone(t *testing.T, h Harness) {
	f := newFixture(t, h, withDeleteDone)
	if !f.holder().Holds() {
		t.Skip("no held claims on this engine (testHeld checks the refusal)")
	}
	ctx := ctxT(t)
	f.insert(1, 3)
	h1, a := f.hold(10, time.Minute)
	require.Len(t, a, 3)
	res, err := h1.Ack(ctx, &store.AckParams{IDs: ids(a[:2]), Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.Len(t, f.rows(), 3, "not before the commit")
	require.NoError(t, h1.Commit(ctx))
	rows := f.rows()
	require.Len(t, rows, 1)
	require.Equal(t, a[2].ID, rows[0].ID)
}

// testHeldTurns: held claims that share a cursor. Claims started
// together hold every row once; where they take turns (MySQL, MariaDB),
// each claim of ten rows holds ten consecutive keys: each starts past the keys
// the claims before it took, instead of racing the others along the same
// keys and skipping the rows they lock one by one (claims without turns,
// started together, took interleaved keys). With every row held, the next
// claim holds nothing and the cursor goes back to the lowest key. The
// cursor moves past a full batch (the fair order). A claim waiting for its
// turn, or for a table lock, ends with its context.
func testHeldTurns(t *testing.T, h Harness) {
	f := newFixture(t, h)
	hs := f.holder()
	if !hs.Holds() {
		return // testHeld checks the refusal
	}
	// Four claims: each keeps a connection for the case's length, beside
	// the suite's other parallel cases (a server's connection limit).
	claims := 4
	if n := hs.PoolSize(); n > 0 && n-2 < claims {
		claims = n - 2 // every claim keeps its connection; one locks the table, one serves the checks
	}
	require.GreaterOrEqual(t, claims, 2, "a pool of %d connections", hs.PoolSize())
	const limit = 10
	// MySQL's and MariaDB's held claims take turns (store.HeldSQL.Turns);
	// PostgreSQL's run together.
	turns := f.d.Capabilities().Engine != dialect.EnginePostgreSQL
	cur := store.NewHoldCursor()
	hold := func(ctx context.Context) (*store.Held, []any, error) {
		var got []any
		held, _, err := hs.Hold(ctx, &store.HoldParams{Limit: limit, ScopeValues: []any{1}, HoldLimit: time.Minute, Cursor: cur},
			func(sc store.Scanner) error {
				var id, version, attempts, payload any
				err := sc.Scan(&id, &version, &attempts, &payload)
				got = append(got, norm(id))
				return err
			})
		return held, got, err
	}
	// lockTable locks the table from another connection, so that a claim
	// statement waits; waiting counts the sessions the server shows
	// waiting for that lock.
	lockTable := func() (unlock func()) {
		conn, err := f.db.Conn(ctxT(t))
		require.NoError(t, err)
		lock, release := "LOCK TABLES "+f.q(f.spec.Table)+" WRITE", "UNLOCK TABLES"
		if f.d.Capabilities().Engine == dialect.EnginePostgreSQL {
			_, err = conn.ExecContext(ctxT(t), "BEGIN")
			require.NoError(t, err)
			lock, release = "LOCK TABLE "+f.q(f.spec.Table)+" IN ACCESS EXCLUSIVE MODE", "COMMIT"
		}
		_, err = conn.ExecContext(ctxT(t), lock)
		require.NoError(t, err)
		var once sync.Once
		end := func() {
			once.Do(func() {
				_, err := conn.ExecContext(ctxT(t), release)
				require.NoError(t, err)
				require.NoError(t, conn.Close())
			})
		}
		t.Cleanup(end)
		return end
	}
	waitingQuery := "SELECT COUNT(*) FROM information_schema.processlist WHERE state = 'Waiting for table metadata lock' AND db = DATABASE() AND info LIKE ?"
	if f.d.Capabilities().Engine == dialect.EnginePostgreSQL {
		waitingQuery = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1"
	}
	waiting := func() int64 {
		var n int64
		require.NoError(t, f.db.QueryRowContext(ctxT(t), waitingQuery, "%"+f.spec.Table+"%").Scan(&n))
		return n
	}
	for round := range 3 {
		f.insert(1, claims*limit)
		var keys []any
		for _, r := range f.rows() {
			if r.Status == "PENDING" {
				keys = append(keys, r.ID)
			}
		}
		require.Len(t, keys, claims*limit)
		helds := make([]*store.Held, claims)
		got := make([][]any, claims)
		errs := make([]error, claims)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range claims {
			wg.Go(func() {
				<-start
				helds[i], got[i], errs[i] = hold(ctxT(t))
			})
		}
		var unlock func()
		if round == 0 {
			// The claims start behind a table lock: where they take turns,
			// one waits for the lock at the server, the others for their
			// turn; without turns every one reached the lock.
			unlock = lockTable()
		}
		close(start)
		if round == 0 {
			await.Until(t, "a claim waits for the table lock", 10*time.Second, func() (bool, string) {
				n := waiting()
				return n > 0, fmt.Sprintf("%d sessions waiting", n)
			})
			for range 10 {
				time.Sleep(100 * time.Millisecond)
				if n := waiting(); turns {
					require.EqualValues(t, 1, n, "claims waiting for the table lock at once")
				}
			}
			unlock()
		}
		wg.Wait()
		for i := range claims {
			require.NoError(t, errs[i], "round %d, claim %d", round, i)
			f.endOnCleanup(helds[i])
			// Others lock at most the other claims' rows: each finds ten.
			require.Len(t, got[i], limit, "round %d, claim %d", round, i)
		}
		for i := range claims {
			res, err := helds[i].Ack(ctxT(t), &store.AckParams{IDs: got[i], Outcome: store.OutcomeDone})
			require.NoError(t, err)
			require.Empty(t, res.Lost)
		}
		slices.SortFunc(got, func(a, b []any) int { return cmpKeys(t, a[0], b[0]) })
		if turns {
			for i, g := range got {
				require.Equal(t, keys[i*limit:(i+1)*limit], g, "round %d: claims started together hold consecutive keys, each past the last", round)
			}
		}
		all := slices.Concat(got...)
		slices.SortFunc(all, func(a, b any) int { return cmpKeys(t, a, b) })
		require.Equal(t, keys, all, "round %d: claims started together hold every row once", round)
		none, extra, err := hold(ctxT(t))
		require.NoError(t, err)
		f.endOnCleanup(none)
		require.Empty(t, extra, "every pending row is held")
		require.NoError(t, none.Rollback(ctxT(t)))
		for i := range claims {
			require.NoError(t, helds[i].Commit(ctxT(t)))
		}
	}

	// The cursor moves past a full batch: a row pending again below it
	// waits for the rows above it (the fair order).
	f.insert(1, 2*limit)
	var next []any
	for _, r := range f.rows() {
		if r.Status == "PENDING" {
			next = append(next, r.ID)
		}
	}
	first, got, err := hold(ctxT(t))
	require.NoError(t, err)
	f.endOnCleanup(first)
	require.Equal(t, next[:limit], got)
	_, err = first.Ack(ctxT(t), &store.AckParams{IDs: got, Outcome: store.OutcomeDone})
	require.NoError(t, err)
	require.NoError(t, first.Commit(ctxT(t)))
	_, err = f.db.ExecContext(ctxT(t), fmt.Sprintf("UPDATE %s SET %s = 'PENDING' WHERE %s = %v",
		f.q(f.spec.Table), f.q(f.spec.Status), f.q(f.spec.ID), next[0]))
	require.NoError(t, err)
	above, got, err := hold(ctxT(t))
	require.NoError(t, err)
	f.endOnCleanup(above)
	require.Equal(t, next[limit:], got, "the rows above the cursor first")
	again, got, err := hold(ctxT(t))
	require.NoError(t, err)
	f.endOnCleanup(again)
	require.Equal(t, next[:1], got, "then the row below it")
	for _, held := range []*store.Held{above, again} {
		require.NoError(t, held.Rollback(ctxT(t)))
	}
	_, err = f.db.ExecContext(ctxT(t), fmt.Sprintf("UPDATE %s SET %s = 'SENT'", f.q(f.spec.Table), f.q(f.spec.Status)))
	require.NoError(t, err)

	// A claim waiting for its turn, behind one that waits for a table
	// lock, ends with its context.
	f.insert(1, 1)
	unlock := lockTable()
	firstErr := make(chan error, 1)
	go func() {
		held, got, err := hold(ctxT(t))
		if err == nil {
			err = held.Rollback(ctxT(t))
			// Without turns the second claim ran its statement too, behind
			// the lock, and the server may take its cancellation after
			// the lock is gone: it may hold the row for a moment.
			if turns && len(got) != 1 {
				err = fmt.Errorf("the claim behind the table lock held %v", got)
			}
		}
		firstErr <- err
	}()
	await.Until(t, "the first claim waits for the table lock, in its turn", 10*time.Second, func() (bool, string) {
		n := waiting()
		return n > 0, fmt.Sprintf("%d sessions waiting", n)
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		held, _, err := hold(ctx)
		if err == nil {
			err = held.Rollback(ctxT(t))
		}
		second <- err
	}()
	select {
	case err := <-second:
		require.ErrorIs(t, err, context.DeadlineExceeded, "the waiting claim ends with its context")
	case <-time.After(10 * time.Second):
		t.Error("a claim waiting for its turn did not end with its context")
	}
	unlock()
	require.NoError(t, <-firstErr, "the first claim goes on once the lock is gone")
}

// cmpKeys compares two normalised keys of one kind.
func cmpKeys(t *testing.T, a, b any) int {
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, keyOf(t, b))
	case string:
		y, ok := b.(string)
		require.True(t, ok, "text key %v", b)
		return cmp.Compare(x, y)
	}
	t.Fatalf("key %v (%T)", a, a)
	return 0
}
