package coalesce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// errGroupRolledBack is the observed error of a key whose fold was rolled
// back with its group's transaction because another key of the group had
// been lost to a reaper: the key goes back to pending and is folded again.
var errGroupRolledBack = errors.New("coalesce: fold rolled back with its group: a key of the group was lost to a reaper")

// flushGroup folds the keys of rows (FlusherConfig.KeysPerTx of them) in
// one transaction and acks them in it. done reports that the keys need
// nothing more of this flush: their transaction committed, or their ack
// was written and the batch's release returns them to pending (its commit
// failed, or a key of the group had been lost to a reaper and the group
// rolled back), or the batch has ended; err is then what the flush
// reports. done false means nothing was written and the caller folds the
// keys one per transaction: a fold failed, or the transaction could not
// be run.
func (f *Flusher) flushGroup(ctx context.Context, b *claim.Batch[struct{}], rows []claim.Row[struct{}]) (done bool, err error) {
	// The keys' rows are locked in the keys' byte order, the order in
	// which writers' dirty marks of several keys lock them (bumpKeys):
	// a group holds several keys' rows at once, and a mark locking them
	// in another order would wait for the group while the group waits
	// for it. The folds run in that order too.
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i], _ = r.ID.(string)
	}
	slices.Sort(keys)
	ids := make([]any, len(keys))
	for i, k := range keys {
		ids[i] = k
	}
	start := time.Now()
	// The changes each key's fold read, in the attempt that was acked.
	recs := make([][]Record, len(keys))
	var acked bool
	var lost, commitErr error
	// Unless the keys were acked, the error is left to the fold of each
	// key in a transaction of its own, which runs and reports it again.
	_ = dialect.Retry(ctx, f.c.cfg.Retry, "coalesce fold", func() error {
		if acked {
			return nil // unreachable: fn returns nil once the ack is written
		}
		clear(recs)
		tx, err := f.c.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		// The folds first, then the keys' rows: a key's row is locked from
		// its first write to the commit, and writers' dirty marks of a key
		// being folded wait for it.
		var recIDs []any
		for i, key := range keys {
			if recs[i], err = f.readChanges(ctx, tx, key); err != nil {
				return err
			}
			if len(recs[i]) == 0 {
				continue
			}
			if err := f.callFold(ctx, tx, key, recs[i]); err != nil {
				return err
			}
			for _, r := range recs[i] {
				recIDs = append(recIDs, r.ID)
			}
		}
		if err := f.markFolded(ctx, tx, keys, recIDs); err != nil {
			return err
		}
		for i, key := range keys {
			// Every key's row, with changes or not, so that each is
			// locked here, in order, and not by the ack.
			if err := f.persist(ctx, tx, key, recs[i]); err != nil {
				return err
			}
			if len(recs[i]) == f.cfg.MaxChanges {
				if _, err := tx.ExecContext(ctx, f.c.sq.bumpHeld, key); err != nil {
					return err
				}
			}
		}
		if err := b.AckTx(ctx, dialect.SQLTx(tx), ids...); err != nil {
			if !errors.Is(err, dialect.ErrClaimLost) {
				return err // nothing recorded: run again, or fold one by one
			}
			// The keys still held count as acked in a transaction that
			// rolls back now: the batch's release returns them to pending.
			acked, lost = true, err
			return nil
		}
		acked = true
		// Not retried past this point: the batch considers the keys acked,
		// and if the commit failed, its release returns them to pending.
		if err := tx.Commit(); err != nil {
			commitErr = fmt.Errorf("commit (the keys %q go back to pending): %w", keys, err)
		}
		return nil
	})
	if !acked {
		if ctx.Err() != nil {
			return true, nil // the batch was lost or the flush stopped: its release returns the keys
		}
		return false, nil
	}
	requeued := b.Requeued()
	var le *claim.LostError
	errors.As(lost, &le)
	for i, key := range keys {
		var kerr error
		switch {
		case commitErr != nil:
			kerr = commitErr
		case le != nil && slices.Contains(le.IDs, any(key)):
			kerr = lost
		case le != nil:
			kerr = errGroupRolledBack
		}
		f.c.observeFold(ctx, start, key, len(recs[i]), slices.Contains(requeued, any(key)), kerr)
	}
	return true, commitErr
}
