package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
)

// Claim marks up to the batch size of pending rows in scope as processing
// under a fresh token and returns them in key order. When nothing is pending
// it returns an empty batch (Len() == 0) and no error. Each returned row must
// be acked, failed or released through the batch; rows left alone stay
// processing until a reaper returns them. When the claim fails, rows it may
// have marked (a statement of unknown outcome) are released before Claim
// returns, or in the background once ctx has ended, so that a stalled
// server never holds the call past ctx's deadline. With Config.PauseTable,
// a claim of a paused table or scope claims nothing and returns an error
// matching [ErrPaused].
func (c *Claimer[T]) Claim(ctx context.Context) (*Batch[T], error) {
	return c.claimVia(ctx, c.core.limit, c.core.cs.Claim)
}

// claimRun runs the claim statement(s) of one batch.
type claimRun func(ctx context.Context, p *store.ClaimParams, scan func(store.Scanner) error) (int, error)

// claimVia is [Claimer.Claim] of at most limit rows with run in place of
// the store's Claim (an ack+claim in pipeline.go); it reports the claim to
// the observer.
func (c *Claimer[T]) claimVia(ctx context.Context, limit int, run claimRun) (*Batch[T], error) {
	start := time.Now()
	b, err := c.claimWith(ctx, limit, run)
	switch {
	case b != nil:
		c.core.observeClaim(ctx, start, b.token, len(b.rows)+len(b.unreadable), nil)
	case errors.Is(err, ErrPaused):
		c.core.observePaused(ctx, start, false)
	default:
		c.core.observeClaim(ctx, start, "", 0, err)
	}
	return b, err
}

// failedClaimRelease bounds the release of a failed claim's rows.
const failedClaimRelease = 30 * time.Second

// releaseFailedClaim releases the rows a failed claim may hold under token,
// on its own deadline (failedClaimRelease), not ctx's: the claim may have
// failed because ctx ended. The caller waits for the first try only while
// ctx lasts, so an operation still returns by its context's deadline when
// the server stalls; past that the release finishes in the background.
//
// A release hands the claim's attempt back, so a release an outage fails is
// tried again in the background, with jittered backoff, until the server
// answers or a reaper could have taken the rows (the claim's lifetime,
// [core.lifetime]; the release's own deadline without a ReapTimeout): rows
// a claim of unknown outcome marked while the server went away then come
// back without moving toward parking. Only a reap keeps the attempt. The
// caller does not wait for those tries: a claim refused by a read-only
// server returns at once, not when the server becomes writable.
//
// After a claim of unknown outcome ([dialect.ErrOutcomeUnknown]: its
// context ended or its connection broke while the server had the
// statement), a release that finds nothing is tried again a few times over
// the next seconds ([core.releaseLate]): the server may still be running
// the claim's statement, which a client that stopped waiting for it cannot
// stop (go-sql-driver/mysql closes the connection, and MySQL finishes and
// commits the statement anyway; a PostgreSQL cancel request can come too
// late), and whose rows would otherwise stay processing until a reaper.
func (k *core) releaseFailedClaim(ctx context.Context, token string, claimed time.Time, unknown bool) {
	detach.Run(ctx, failedClaimRelease, func(fctx context.Context) {
		n, err := k.cs.Release(fctx, token, nil)
		if err == nil {
			if n == 0 && unknown {
				k.releaseLate(ctx, token, claimed)
			}
			return
		}
		if !outage(err) || fctx.Err() != nil {
			k.logger.Warn("claimlock: could not release rows of a failed claim; the reaper will", "token", token, "err", err)
			return
		}
		go k.retryRelease(context.WithoutCancel(ctx), token, claimed, unknown, err)
	})
}

// releaseLate releases the rows of a failed claim of unknown outcome
// again after each of [detach.LatePauses], until a release finds rows (the
// statement that marked them has committed: no later one will) or fails
// with an error that is not an [outage] (one that is, such as a server out
// of connections, is for the next try), or until a reaper could have taken
// them (the claim's lifetime, [core.lifetime]). A claim that never marked
// a row costs these few statements on the token index, which no other
// claim's rows are under.
func (k *core) releaseLate(ctx context.Context, token string, claimed time.Time) {
	var until time.Time
	if life := k.lifetime(); life > 0 {
		until = claimed.Add(life)
	}
	detach.Late(ctx, failedClaimRelease, until, func(ctx context.Context) bool {
		n, err := k.cs.Release(ctx, token, nil)
		switch {
		case err != nil && !outage(err):
			k.logger.Warn("claimlock: could not release rows of a failed claim; the reaper will", "token", token, "err", err)
			return true
		case err != nil:
			k.logger.Debug("claimlock: a late release of a failed claim's rows failed; tried again", "token", token, "err", err)
		case n > 0:
			k.logger.Info("claimlock: released the rows of a failed claim, which the server marked after the claim had returned", "token", token, "rows", n)
		}
		return n > 0
	})
}

// retryRelease tries the release of a failed claim's rows again after an
// outage (see [core.releaseFailedClaim]); err is the last try's error. A
// release that succeeds but finds nothing after a claim of unknown outcome
// goes on as [core.releaseLate].
func (k *core) retryRelease(parent context.Context, token string, claimed time.Time, unknown bool, err error) {
	ctx, cancel := context.WithTimeout(parent, failedClaimRelease)
	defer cancel()
	until, ok := ctx.Deadline()
	if life := k.lifetime(); life > 0 {
		until, ok = claimed.Add(life), true
	}
	for n := 0; ; n++ {
		pause := loop.Backoff(n, outageRetryBase, outageRetryMax)
		if !outage(err) || ctx.Err() != nil || ok && !time.Now().Add(pause).Before(until) {
			k.logger.Warn("claimlock: could not release rows of a failed claim; the reaper will", "token", token, "err", err)
			return
		}
		loop.Sleep(ctx, pause, nil)
		var released int64
		if released, err = k.cs.Release(ctx, token, nil); err == nil {
			if released == 0 && unknown {
				k.releaseLate(parent, token, claimed) // not ctx: it ends on return
			}
			return
		}
	}
}

// claimWith claims one batch of at most limit rows with run.
func (c *Claimer[T]) claimWith(ctx context.Context, limit int, run claimRun) (*Batch[T], error) {
	k := c.core
	if err := k.verify(ctx); err != nil {
		return nil, errclass.EndedWith(ctx, err)
	}
	if err := k.checkPaused(ctx); err != nil {
		return nil, errclass.EndedWith(ctx, err)
	}
	k.checkIndexes(ctx)
	token := store.NewToken()
	var scanned []Row[T]
	p := &store.ClaimParams{Token: token, Limit: limit, ScopeValues: k.scope, Strategy: k.strategy, Worker: k.worker}
	release, err := k.claimSlot(ctx)
	if err != nil {
		return nil, err
	}
	var claimed time.Time // local start of the claim statement: see startLoss
	n, err := func() (int, error) {
		defer release()
		claimed = time.Now()
		return run(ctx, p, func(s store.Scanner) error {
			r, err := c.scan(s)
			if err != nil {
				return &scanError{err}
			}
			scanned = append(scanned, r)
			return nil
		})
	}()
	if se := (*scanError)(nil); errors.As(err, &se) {
		// A row the row type cannot hold (a NULL into a string field,
		// say) must not stop the batch: read the rows again one by one,
		// fail the unreadable ones alone and hand out the rest.
		rows, unreadable, serr := c.salvage(ctx, token)
		if serr == nil {
			b := newBatch(k, token, rows, claimed)
			b.unreadable = k.failUnreadable(ctx, token, unreadable)
			return b, nil
		}
		k.logger.Warn("claimlock: could not read a claimed batch row by row", "token", token, "err", serr)
	}
	if err != nil {
		// Rows marked before a scan failure, or by a write of unknown
		// outcome, stay under the token: give them back so they are not
		// stranded until the reaper runs.
		k.releaseFailedClaim(ctx, token, claimed, errors.Is(err, dialect.ErrOutcomeUnknown))
		return nil, errclass.EndedWith(ctx, storeError(opClaim, err))
	}
	// A retried statement calls scan again from its first row: the last n
	// rows are the ones the token holds.
	if n < len(scanned) {
		scanned = scanned[len(scanned)-n:]
	}
	sortRows(scanned)
	return newBatch(k, token, scanned, claimed), nil
}

// scanError marks an error of the caller's row type, not of the database.
type scanError struct{ err error }

func (e *scanError) Error() string { return e.err.Error() }

func (e *scanError) Unwrap() error { return e.err }

// salvage reads the rows token holds one at a time, so that a row the row
// type cannot hold fails only its own read: it returns the readable rows in
// key order and the unreadable ones.
func (c *Claimer[T]) salvage(ctx context.Context, token string) ([]Row[T], []RowError, error) {
	var keys []any
	_, err := c.core.cs.Read(ctx, token, nil, func(s store.Scanner) error {
		id, err := c.scanKey(s)
		keys = append(keys, id)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	var rows []Row[T]
	var bad []RowError
	for _, id := range keys {
		var got []Row[T]
		_, err := c.core.cs.Read(ctx, token, []any{id}, func(s store.Scanner) error {
			r, err := c.scan(s)
			if err != nil {
				return &scanError{err}
			}
			got = append(got, r)
			return nil
		})
		var se *scanError
		switch {
		case errors.As(err, &se):
			bad = append(bad, RowError{ID: id, Err: se.err})
		case err != nil:
			return nil, nil, err
		default:
			rows = append(rows, got...)
		}
	}
	return rows, bad, nil
}

// failUnreadable parks, under the claim's token, the rows the caller's
// destinations could not hold, so that one such row neither blocks its
// scope nor stays processing. Reading it again would fail the same way, so
// it is parked at once, with the error stored, whatever MaxAttempts says;
// an operator unparks it once the row or the row type is mended. It returns
// them, with a row whose park could not be written marked in its error.
func (k *core) failUnreadable(ctx context.Context, token string, rows []RowError) []RowError {
	ids := make([]any, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	p := &store.AckParams{Token: token, IDs: ids, Outcome: store.OutcomeFailed,
		Error: fmt.Sprintf("claimlock: the row could not be read into the row type: %v", rows[0].Err)}
	_, err := k.cs.Ack(ctx, p)
	for _, r := range rows {
		k.logger.Error("claimlock: a claimed row could not be read into the row type; parked it", "token", token, "id", r.ID, "err", r.Err)
	}
	if err != nil {
		// The rows stay under the token until a reaper returns them.
		k.logger.Warn("claimlock: could not fail unreadable rows", "token", token, "rows", len(rows), "err", err)
		for i := range rows {
			rows[i].Err = fmt.Errorf("%w (and failing it: %v)", rows[i].Err, err)
		}
	}
	return rows
}

// sortRows orders rows by key: engines return UPDATE ... RETURNING rows in
// no particular order.
func sortRows[T any](rows []Row[T]) {
	slices.SortFunc(rows, func(a, b Row[T]) int {
		switch x := a.ID.(type) {
		case int64:
			return cmp.Compare(x, b.ID.(int64))
		case string:
			return cmp.Compare(x, b.ID.(string))
		}
		return 0
	})
}

// scanKey reads the key of the current row alone.
func (c *Claimer[T]) scanKey(s store.Scanner) (any, error) {
	var id any
	dest := []any{&id}
	if c.core.spec.Version != "" {
		dest = append(dest, new(any))
	}
	if c.core.spec.Attempts != "" {
		dest = append(dest, new(any))
	}
	for range c.nfields {
		dest = append(dest, new(any))
	}
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	return store.NormalizeKey(c.core.spec.IDKind, id)
}

func (c *Claimer[T]) scan(s store.Scanner) (Row[T], error) {
	var r Row[T]
	var idInt int64
	var idStr string
	dest := make([]any, 0, 2+c.nfields)
	if c.core.spec.IDKind == dialect.IDText {
		dest = append(dest, &idStr)
	} else {
		dest = append(dest, &idInt)
	}
	if c.core.spec.Version != "" {
		dest = append(dest, &r.Version)
	}
	if c.core.spec.Attempts != "" {
		dest = append(dest, &r.Attempts)
	}
	if c.fields != nil {
		f := c.fields(&r.Value)
		if len(f) != c.nfields {
			return r, fmt.Errorf("fields returned %d pointers for %d columns", len(f), c.nfields)
		}
		dest = append(dest, f...)
	}
	if err := s.Scan(dest...); err != nil {
		return r, err
	}
	if c.core.spec.IDKind == dialect.IDText {
		r.ID = idStr
	} else {
		r.ID = idInt
	}
	return r, nil
}

// newBatch returns the batch of rows claimed under token; claimed is the
// local time just before the claim statement was sent.
func newBatch[T any](k *core, token string, rows []Row[T], claimed time.Time) *Batch[T] {
	b := &Batch[T]{token: token, core: k}
	b.setRows(rows)
	b.startLoss(claimed)
	return b
}

// startLoss sets up the batch's context and, with a ReapTimeout, arms its
// local deadline from claimed, the local time just before the claim
// statement was sent.
//
// Why the deadline comes before any other worker's claim: the claim
// statement wrote claimed_at on the database clock at some instant after
// claimed; a reaper returns the row only once claimed_at + its Timeout +
// the column's resolution (the reaper's slack, which covers a claimed_at
// stored early by a whole-second column) has passed on the database clock,
// and only then can another worker claim it. With ReapTimeout at most the
// reaper's Timeout, and both clocks running at the rate of real time, that
// is after claimed + ReapTimeout, and the deadline is SafetyMargin earlier.
// The margin absorbs clock-rate differences and the time a handler needs to
// notice. Heartbeats move claimed_at, and the deadline, the same way.
func (b *Batch[T]) startLoss(claimed time.Time) {
	b.ctx, b.cancel = context.WithCancelCause(context.Background())
	b.closed = make(chan struct{})
	if b.nOpen == 0 {
		b.end(ErrBatchDone)
		close(b.closed)
		return
	}
	if life := b.core.lifetime(); life > 0 {
		b.lmu.Lock()
		b.armLocked(claimed.Add(life))
		b.lmu.Unlock()
	}
}

// armLocked sets the local deadline and (re)arms the timer that ends the
// batch at it. Callers hold b.lmu.
func (b *Batch[T]) armLocked(deadline time.Time) {
	b.deadline = deadline
	b.gen++
	gen := b.gen
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timer = time.AfterFunc(time.Until(deadline), func() { b.expire(gen) })
}

// verify checks the table's schema (and the pause table's) until a check
// has passed, one caller at a time (the check is shared by the claimer's
// scope views): the workers of a claimer that start together run it once,
// not each (16 held claimers' checks at once delayed their first claims on
// PostgreSQL by about 0.2 s, on two cores).
func (k *core) verify(ctx context.Context) error {
	return k.verified.Run(ctx, "claim: schema check", k.verifyNow)
}

func (k *core) verifyNow(ctx context.Context) error {
	if err := k.cs.VerifySchema(ctx); err != nil {
		return storeError("verify schema", err)
	}
	if k.pauses != nil {
		if err := k.pauses.st.VerifySchema(ctx); err != nil {
			return storeError("verify pause table", err)
		}
	}
	return nil
}

func (k *core) checkIndexes(ctx context.Context) {
	k.indexOnce.Do(func() {
		key := indexCheckKey{d: k.d, table: k.spec.Table, scope: strings.Join(k.spec.Scope, ",")}
		if _, seen := indexChecks.LoadOrStore(key, struct{}{}); seen {
			return
		}
		missing, err := k.cs.MissingIndexes(ctx)
		if err != nil {
			indexChecks.Delete(key) // try again with the next claimer
			k.logger.Debug("claimlock: could not check for recommended indexes", "err", err)
			return
		}
		if len(missing) > 0 {
			k.logger.Warn("claimlock: recommended indexes are missing; claims will scan and lock more rows than they take",
				"create", missing)
		}
	})
}

// claimSlot waits for one of the claimer's ClaimConcurrency slots and
// returns the function that frees it.
func (k *core) claimSlot(ctx context.Context) (release func(), err error) {
	if k.gate == nil {
		return func() {}, nil
	}
	select {
	case k.gate <- struct{}{}:
		return func() { <-k.gate }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("claim: waiting for a claim slot: %w", context.Cause(ctx))
	}
}
