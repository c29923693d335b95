package coalesce

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
)

// Record is a change as the fold receives it: the change as accepted and
// its row id in the changes table.
type Record struct {
	ID int64
	Change
}

// FoldFunc applies a key's unfolded changes to its state. It runs in tx,
// the transaction that also marks those changes folded and completes the
// key (and, with [FlusherConfig.KeysPerTx], folds other keys of the same
// claim), so the state's writes must go through tx: they commit together
// with the marks, and a change is folded exactly once whatever crashes. changes
// are in the order they were accepted (for one source, sequence order) and
// never empty. An error rolls tx back: a retryable one
// ([dialect.IsRetryable]) runs the fold again, any other fails the key
// (retried after the backoff, parked after the maximum attempts; see
// [FlusherConfig]).
type FoldFunc func(ctx context.Context, tx *sql.Tx, key string, changes []Record) error

// FlusherConfig configures a [Flusher]. Zero values take the documented
// defaults.
type FlusherConfig struct {
	// Fold applies changes to the state (required).
	Fold FoldFunc
	// BatchSize is how many dirty keys one claim takes; default 16.
	// Each key is folded in a transaction of its own unless KeysPerTx
	// says otherwise.
	BatchSize int
	// KeysPerTx is how many of a claim's keys one transaction folds
	// together; default 1, a transaction per key. Where many keys are
	// dirty a flush is bound by its transactions, not by its changes:
	// folding KeysPerTx keys in one transaction takes one commit, one
	// statement marking their changes folded and one completing the keys
	// for all of them. Their folds then commit or roll back together, and
	// each fold's locks are held until the group commits. A fold that
	// fails, other than retryably, rolls its group back, and the group's
	// keys are then folded one per transaction, so that the failing key
	// alone is failed (its fold runs a second time, in a transaction of
	// its own). Values above BatchSize act as BatchSize.
	KeysPerTx int
	// Workers is how many flush loops [Flusher.Run] runs at once; default
	// 1, at most MaxFlushWorkers. Each claims its own batch of keys and
	// folds them one after another, so up to Workers folds are in
	// progress at once; each loop uses up to two connections of the pool
	// at a time (its batch's heartbeat and its fold's transaction).
	Workers int
	// Linger is how long a flusher waits after a round that claimed fewer
	// keys than BatchSize, letting changes accumulate (more changes per
	// state write); default 0.
	Linger time.Duration
	// PollMin and PollMax bound the jittered, doubling pause while no key
	// is dirty (a key dirtied by this process's coalescer wakes the
	// flusher at once, and one dirtied by another process's does where
	// that coalescer has Config.Notify); default 10 ms and 1 s.
	PollMin, PollMax time.Duration
	// MaxAttempts is how many failed folds park a key; zero means
	// [dialect.DefaultMaxAttempts]. Backoff is the pause before a failed
	// key is tried again, given its attempts; nil means
	// [claim.DefaultBackoff].
	MaxAttempts int
	Backoff     func(attempts int) time.Duration
	// ReapTimeout and HeartbeatInterval are the claim's (see
	// [claim.Config]): declare the reaper's timeout so a flusher stops
	// before its keys can be reaped, and heartbeat well within it.
	ReapTimeout, HeartbeatInterval time.Duration
	// MaxChanges is the most changes one fold takes; default 1000. A key
	// with more unfolded changes is folded in several transactions (the
	// key goes back to pending after each), so that no transaction grows
	// with the backlog.
	MaxChanges int
	// Retain, if positive, is how long folded changes are kept, on the
	// database clock: Run deletes older ones every StrandAfter
	// ([Flusher.Prune]). While a change is kept its event id refuses
	// resends; once it is deleted a resend is accepted as new, so keep
	// folded changes longer than any client retries. Zero keeps them.
	Retain time.Duration
	// StrandAfter is how old an unfolded change of a key that is not dirty
	// must be before the flusher marks its key dirty again (a process that
	// died between recording a change and marking its key leaves such a
	// change); it is also how often a flusher looks for them. Default 10 s.
	StrandAfter time.Duration
}

// Flusher claims dirty keys and folds their changes. Any number of
// flushers, in any number of processes, may run on the same tables: a key
// is held by one at a time (a claim of package claim on the keys table).
type Flusher struct {
	c       *Coalescer
	cfg     FlusherConfig
	claimer *claim.Claimer[struct{}]
	// keys is the claim config, for a reaper (zombie) of the keys table.
	keys claim.Config
}

// Flusher returns a flusher of c's tables, or an error wrapping
// [dialect.ErrInvalidConfig] naming the bad field.
func (c *Coalescer) Flusher(fc FlusherConfig) (*Flusher, error) {
	switch {
	case fc.Fold == nil:
		return nil, invalid("Fold", "is nil")
	case fc.BatchSize < 0 || fc.BatchSize > claim.MaxBatchSize:
		return nil, invalid("BatchSize", "must be between 0 and %d", claim.MaxBatchSize)
	case fc.KeysPerTx < 0:
		return nil, invalid("KeysPerTx", "must not be negative")
	case fc.Workers < 0 || fc.Workers > MaxFlushWorkers:
		return nil, invalid("Workers", "must be between 0 and %d", MaxFlushWorkers)
	case fc.MaxChanges < 0 || fc.MaxChanges > 10000:
		return nil, invalid("MaxChanges", "must be between 0 and 10000")
	case fc.Linger < 0, fc.PollMin < 0, fc.PollMax < 0, fc.StrandAfter < 0, fc.Retain < 0:
		return nil, invalid("Linger, PollMin, PollMax, StrandAfter, Retain", "must not be negative")
	}
	if fc.BatchSize == 0 {
		fc.BatchSize = 16
	}
	if fc.Workers == 0 {
		fc.Workers = 1
	}
	fc.KeysPerTx = min(max(fc.KeysPerTx, 1), fc.BatchSize)
	if fc.PollMin == 0 {
		fc.PollMin = 10 * time.Millisecond
	}
	if fc.PollMax == 0 {
		fc.PollMax = time.Second
	}
	if fc.PollMax < fc.PollMin {
		return nil, invalid("PollMax", "%v is below PollMin %v", fc.PollMax, fc.PollMin)
	}
	if fc.MaxChanges == 0 {
		fc.MaxChanges = 1000
	}
	if fc.StrandAfter == 0 {
		fc.StrandAfter = 10 * time.Second
	}
	cc := claimConfig(c.cfg)
	cc.BatchSize, cc.MaxAttempts, cc.Backoff = fc.BatchSize, fc.MaxAttempts, fc.Backoff
	cc.ReapTimeout, cc.HeartbeatInterval = fc.ReapTimeout, fc.HeartbeatInterval
	cl, err := claim.New[struct{}](c.d, cc, nil)
	if err != nil {
		return nil, fmt.Errorf("coalesce: flusher: %w", err)
	}
	return &Flusher{c: c, cfg: fc, claimer: cl, keys: cc}, nil
}

// ClaimConfig returns the claim configuration of the keys table, for
// a reaper (zombie.New) that returns the keys of dead flushers: a
// flusher killed mid-flush leaves its keys processing until a reaper's
// timeout, and their changes unfolded (nothing of an uncommitted fold
// remains).
func (f *Flusher) ClaimConfig() claim.Config { return f.keys }

// Claimer returns the claimer of the keys table: its Stats, List and
// Unpark are the operator's view of the keys (a parked key's last_error
// says why its fold failed).
func (f *Flusher) Claimer() *claim.Claimer[struct{}] { return f.claimer }

// MaxFlushWorkers bounds [FlusherConfig.Workers].
const MaxFlushWorkers = 256

// Run flushes with FlusherConfig.Workers loops until ctx ends, then returns
// nil. Each loop claims dirty keys, folds each (see [Flusher.Flush]),
// pauses Linger after a short batch and polls with a backoff while nothing
// is dirty; the first loop also, now and then, marks the keys of stranded
// changes dirty (FlusherConfig.StrandAfter) and, with
// FlusherConfig.Retain, deletes old folded changes. An error that running
// again cannot cure ([dialect.IsPermanent]) stops every loop, and Run
// returns it once they have returned; other errors are logged and retried
// after a pause.
func (f *Flusher) Run(ctx context.Context) error {
	// Keys made dirty by other processes' coalescers (Config.Notify) wake
	// this process's idle flushers, as this process's own do.
	stop := f.claimer.OnNotify(f.c.Wake)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, f.cfg.Workers)
	var wg sync.WaitGroup
	for i := range f.cfg.Workers {
		wg.Go(func() {
			if errs[i] = f.loop(ctx, i == 0); errs[i] != nil {
				cancel(errs[i]) // a permanent error stops the other loops
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loop is one of Run's flush loops; sweep makes it the one that also
// looks for stranded changes and prunes folded ones.
func (f *Flusher) loop(ctx context.Context, sweep bool) error {
	idle := 0 // empty rounds in a row
	nextSweep := time.Now()
	return loop.Loop{Wake: f.c.wake}.Run(ctx, func(ctx context.Context) loop.Next {
		if sweep && !time.Now().Before(nextSweep) {
			if _, err := f.Unstrand(ctx); err != nil && ctx.Err() == nil {
				f.c.cfg.Logger.Warn("coalesce: looking for stranded changes", "err", err)
			}
			if f.cfg.Retain > 0 {
				if _, err := f.Prune(ctx); err != nil && ctx.Err() == nil {
					f.c.cfg.Logger.Warn("coalesce: pruning folded changes", "err", err)
				}
			}
			nextSweep = time.Now().Add(f.cfg.StrandAfter)
		}
		n, err := f.Flush(ctx)
		switch {
		case ctx.Err() != nil:
			return loop.End(nil)
		case err != nil && dialect.IsPermanent(err):
			return loop.End(err)
		case err != nil:
			f.c.cfg.Logger.Error("coalesce: flush", "err", err)
			return loop.After(f.cfg.PollMax)
		case n == 0:
			// Nothing dirty: a jittered, doubling poll, which a key
			// dirtied by this process's coalescer cuts short.
			idle++
			return loop.Poll(loop.Backoff(min(idle-1, 20), f.cfg.PollMin, f.cfg.PollMax))
		case n < f.cfg.BatchSize:
			idle = 0
			return loop.After(f.cfg.Linger)
		default:
			idle = 0
			return loop.Next{}
		}
	})
}

// Flush claims up to BatchSize dirty keys and folds each, returning how
// many it claimed. For each key, in one transaction (shared by KeysPerTx
// keys): read the key's unfolded changes, call Fold, mark the changes
// folded, record the highest sequence as persisted, and ack the key by
// version ([claim.Batch.AckTx]): a key that got a change since the claim
// goes back to pending instead of done and is flushed again. A fold that
// fails fails its key ([claim.Batch.Fail]); a key lost to a reaper is left
// to its new holder. Run calls Flush in a loop; call it yourself for a
// hand-written loop.
func (f *Flusher) Flush(ctx context.Context) (int, error) {
	b, err := f.claimer.Claim(ctx)
	if err != nil {
		return 0, err
	}
	if b.Len() == 0 {
		return 0, nil
	}
	stop := b.KeepAlive(context.WithoutCancel(ctx))
	defer stop()
	// Keys still held at the end (a fold whose transaction rolled back
	// after its ack) go back to pending.
	defer func() { _, _ = b.Release(context.WithoutCancel(ctx)) }()
	bctx, cancel := b.Context(ctx)
	defer cancel()
	// Record the version each key starts from, committed before any
	// change is read: writers skip their dirty mark when a bump since then
	// already guarantees a requeue (see Coalescer.markDirty).
	if err := dialect.Retry(bctx, f.c.cfg.Retry, "coalesce start flush", func() error {
		_, err := f.c.db.ExecContext(bctx, f.c.sq.startFlush, b.Token())
		return err
	}); err != nil {
		return b.Len(), fmt.Errorf("coalesce: flush: %w", err)
	}
	var errs []error
	rows := b.Rows()
	for len(rows) > 0 && ctx.Err() == nil {
		group := rows[:min(f.cfg.KeysPerTx, len(rows))]
		rows = rows[len(group):]
		if len(group) > 1 {
			done, err := f.flushGroup(bctx, b, group)
			if err != nil {
				errs = append(errs, err)
			}
			if done {
				continue
			}
		}
		for _, r := range group {
			if err := f.flushOne(ctx, bctx, b, r.ID); err != nil {
				errs = append(errs, err)
			}
			if ctx.Err() != nil {
				break
			}
		}
	}
	if len(errs) > 0 {
		return b.Len(), fmt.Errorf("coalesce: flush: %w", errors.Join(errs...))
	}
	return b.Len(), nil
}

// flushOne folds the key id in a transaction of its own and returns the
// error to report: nil also when the key was lost to a reaper (or the
// batch's local deadline passed), which leaves it to its new holder, and
// when its fold failed and the key was failed ([claim.Batch.Fail]).
func (f *Flusher) flushOne(ctx, bctx context.Context, b *claim.Batch[struct{}], id any) error {
	key, _ := id.(string)
	kctx, kcancel := b.RowContext(bctx, id)
	err := f.flushKey(kctx, b, key)
	lost := kctx.Err() != nil && errors.Is(context.Cause(kctx), dialect.ErrClaimLost)
	kcancel()
	if err == nil || lost || errors.Is(err, dialect.ErrClaimLost) {
		return nil
	}
	var fe *foldError
	if errors.As(err, &fe) {
		if ferr := b.Fail(context.WithoutCancel(ctx), id, fe.err); ferr != nil && !errors.Is(ferr, dialect.ErrClaimLost) {
			return ferr
		}
		return nil
	}
	return fmt.Errorf("key %q: %w", key, err)
}

// foldError is a fold's own failure, which fails its key.
type foldError struct{ err error }

func (e *foldError) Error() string { return "fold: " + e.err.Error() }
func (e *foldError) Unwrap() error { return e.err }

// flushKey folds key's unfolded changes and acks it, in one transaction,
// retrying it on deadlocks and serialization failures until its ack has
// been written (the batch then considers the key acked, and a rolled-back
// transaction leaves it to the batch's release).
func (f *Flusher) flushKey(ctx context.Context, b *claim.Batch[struct{}], key string) (err error) {
	start := time.Now()
	folded := 0
	defer func() {
		f.c.observeFold(ctx, start, key, folded, slices.Contains(b.Requeued(), any(key)), err)
	}()
	acked := false
	var commitErr error
	err = dialect.Retry(ctx, f.c.cfg.Retry, "coalesce fold", func() error {
		if acked {
			return nil // unreachable: fn returns nil once the ack is written
		}
		tx, err := f.c.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		recs, err := f.readChanges(ctx, tx, key)
		if err != nil {
			return err
		}
		folded = len(recs)
		if len(recs) > 0 {
			if err := f.fold(ctx, tx, key, recs); err != nil {
				return err
			}
		}
		if len(recs) == f.cfg.MaxChanges {
			// More may be waiting: move the version so that the ack
			// sends the key back to pending for the rest.
			if _, err := tx.ExecContext(ctx, f.c.sq.bumpHeld, key); err != nil {
				return err
			}
		}
		if err := b.AckTx(ctx, dialect.SQLTx(tx), key); err != nil {
			return err
		}
		acked = true
		// Not retried past this point: the batch considers the key acked,
		// and if the commit failed, its release returns the key to pending.
		if err := tx.Commit(); err != nil {
			commitErr = fmt.Errorf("commit (the key goes back to pending): %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return commitErr
}

// fold calls the user's fold and marks recs folded in tx.
func (f *Flusher) fold(ctx context.Context, tx *sql.Tx, key string, recs []Record) error {
	if err := f.callFold(ctx, tx, key, recs); err != nil {
		return err
	}
	ids := make([]any, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if err := f.markFolded(ctx, tx, []string{key}, ids); err != nil {
		return err
	}
	return f.persist(ctx, tx, key, recs)
}

// callFold calls the user's fold of key's changes recs in tx: an error
// that is not retryable is a *foldError.
func (f *Flusher) callFold(ctx context.Context, tx *sql.Tx, key string, recs []Record) error {
	if err := f.cfg.Fold(ctx, tx, key, recs); err != nil {
		if dialect.IsRetryable(err) {
			return err
		}
		return &foldError{err: err}
	}
	return nil
}

// persist records in tx that key's changes recs are folded: the highest
// sequence of a source among them and their number.
func (f *Flusher) persist(ctx context.Context, tx *sql.Tx, key string, recs []Record) error {
	var maxSeq int64
	for _, r := range recs {
		if r.Source != "" {
			maxSeq = max(maxSeq, r.Seq)
		}
	}
	_, err := tx.ExecContext(ctx, f.c.sq.persist, maxSeq, len(recs), key)
	return err
}

// markFolded marks the changes ids of keys folded in tx.
func (f *Flusher) markFolded(ctx context.Context, tx *sql.Tx, keys []string, ids []any) error {
	if len(ids) == 0 {
		return nil
	}
	q := f.c.e.bind(f.c.sq.markFolded) + f.c.e.in(len(ids), 1)
	n, err := execN(ctx, tx, q, ids...)
	if err != nil {
		return err
	}
	if n != int64(len(ids)) {
		// Only a holder of a key folds its changes, and the changes read
		// in this transaction were unfolded: another flush of the key ran
		// concurrently (a reaper timeout shorter than a flush). Roll back.
		return fmt.Errorf("keys %q: %d of %d changes were folded by another flush meanwhile", keys, int64(len(ids))-n, len(ids))
	}
	return nil
}

// readChanges reads key's first MaxChanges unfolded changes in id order.
func (f *Flusher) readChanges(ctx context.Context, tx *sql.Tx, key string) ([]Record, error) {
	rows, err := tx.QueryContext(ctx, f.c.sq.readChanges, key, f.cfg.MaxChanges)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []Record
	for rows.Next() {
		r := Record{Change: Change{Key: key}}
		if err := rows.Scan(&r.ID, &r.EventID, &r.Source, &r.Seq, &r.Payload); err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// Unstrand marks dirty the keys of changes older than StrandAfter that are
// unfolded while their key is neither pending, being flushed nor parked
// (the process that accepted them died between recording them and marking
// their key), and returns how many keys it marked. One call marks at most
// 1000 keys, those of the oldest such changes (it reads at most 1000 of
// them): Run calls it every StrandAfter, and a larger number waits for
// the next calls. To find them it reads every unfolded change older than
// StrandAfter (through an index, with its key): with a backlog of many
// old changes whose keys are dirty anyway, raise StrandAfter.
func (f *Flusher) Unstrand(ctx context.Context) (int, error) {
	rows, err := f.c.db.QueryContext(ctx, f.c.sq.stranded, f.cfg.StrandAfter.Milliseconds(), unstrandKeys)
	if err != nil {
		return 0, fmt.Errorf("coalesce: unstrand: %w", err)
	}
	var keys []string
	seen := map[string]bool{}
	for len(keys) < unstrandKeys && rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, fmt.Errorf("coalesce: unstrand: %w", err)
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("coalesce: unstrand: %w", err)
	}
	for i, k := range keys {
		if err := dialect.Retry(ctx, f.c.cfg.Retry, "coalesce unstrand", func() error { return f.c.markDirty(ctx, k) }); err != nil {
			return i, fmt.Errorf("coalesce: unstrand: key %q: %w", k, err)
		}
	}
	return len(keys), nil
}

// Prune deletes the changes folded more than Retain ago, oldest first, in
// statements of at most 1000 rows, and returns how many it deleted. Without a Retain it
// deletes nothing. Run calls it every StrandAfter.
func (f *Flusher) Prune(ctx context.Context) (int64, error) {
	if f.cfg.Retain <= 0 {
		return 0, nil
	}
	var total int64
	for {
		var n int64
		err := dialect.Retry(ctx, f.c.cfg.Retry, "coalesce prune", func() error {
			var err error
			n, err = execN(ctx, f.c.db, f.c.sq.prune, f.cfg.Retain.Milliseconds())
			return err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("coalesce: prune: %w", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}
