package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// workerRole claims batches of the task, "sends" each row by inserting into
// the sends log (row, token, pid, attempt), acks it, and heartbeats the
// batch with KeepAlive meanwhile. It writes a claim event per batch and an
// ack, lost or ackerr event per row, and exits once the task has nothing
// pending or processing.
func workerRole(ctx context.Context, out *emitter) error {
	d, err := openRetry(ctx, os.Getenv(envDriver), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer d.close()
	cfg := itemsConfig(envInt(envBatch, 10))
	cfg.HeartbeatInterval = envDuration(envHeartbeat, 200*time.Millisecond)
	c, err := claim.New(d.d, cfg, itemFields)
	if err != nil {
		return err
	}
	delay := envDuration(envSendDelay, 0)
	ackBatch := os.Getenv(envAckBatch) == "true"
	txAck := os.Getenv(envTxAck) == "true"
	for ctx.Err() == nil {
		t0 := time.Now().UnixNano()
		b, err := c.Claim(ctx)
		if err != nil {
			out.emit(event{Ev: "claimerr", Err: err.Error()})
			pause(ctx, 50*time.Millisecond)
			continue
		}
		if b.Len() == 0 {
			st, err := c.Stats(ctx)
			if err == nil && st.Pending == 0 && st.Processing == 0 {
				out.emit(event{Ev: "exit"})
				return nil
			}
			pause(ctx, 30*time.Millisecond)
			continue
		}
		ids := make([]int64, b.Len())
		for i, r := range b.Rows() {
			ids[i] = r.ID.(int64)
		}
		out.emit(event{Ev: "claim", Tok: b.Token(), IDs: ids, T0: t0, T: time.Now().UnixNano()})
		stop := b.KeepAlive(ctx)
		if ackBatch {
			sendAndAckAll(ctx, d, b, out)
			stop()
			continue
		}
		for _, r := range b.Rows() {
			pause(ctx, delay)
			if txAck {
				if !sendAndAckTx(ctx, d, b, r, out) {
					break // the rest is left for the reaper
				}
				continue
			}
			if err := send(ctx, d, r.ID.(int64), b.Token(), r.Value.Attempts); err != nil {
				// Leave this row and the rest for the reaper.
				out.emit(event{Ev: "senderr", Tok: b.Token(), IDs: []int64{r.ID.(int64)}, Err: err.Error()})
				break
			}
			a0 := time.Now().UnixNano()
			err := b.Ack(ctx, r.ID)
			one := []int64{r.ID.(int64)}
			switch {
			case err == nil:
				out.emit(event{Ev: "ack", Tok: b.Token(), IDs: one, T0: a0, T: time.Now().UnixNano()})
			case errors.Is(err, dialect.ErrClaimLost):
				out.emit(event{Ev: "lost", Tok: b.Token(), IDs: one, Err: err.Error()})
			default:
				// Unknown outcome (a dropped connection): the row stays
				// held; the reaper returns it if the ack did not land.
				out.emit(event{Ev: "ackerr", Tok: b.Token(), IDs: one, Err: err.Error()})
			}
		}
		stop()
	}
	return nil
}

// send is the side effect: one row in the sends log per (row, claim). A
// failed insert is retried (checking first whether it landed), as a sender
// with an idempotency key would.
func send(ctx context.Context, d *db, id int64, token string, attempt int64) error {
	var err error
	for try := 0; try < 20 && ctx.Err() == nil; try++ {
		if try > 0 {
			var n int
			if err = d.sql.QueryRowContext(ctx, d.sqlf("SELECT COUNT(*) FROM {chaos_sends} WHERE {row_id} = $1 AND {token} = $2"), id, token).Scan(&n); err != nil {
				pause(ctx, 50*time.Millisecond)
				continue
			}
			if n > 0 {
				return nil
			}
		}
		_, err = d.sql.ExecContext(ctx, d.sqlf("INSERT INTO {chaos_sends} ({row_id}, {token}, {pid}, {attempt}) VALUES ($1, $2, $3, $4)"),
			id, token, os.Getpid(), attempt)
		if err == nil {
			return nil
		}
		pause(ctx, 50*time.Millisecond)
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// openRetry opens the database, retrying while the server is unreachable
// (a restart in progress).
func openRetry(ctx context.Context, driver, dsn string) (*db, error) {
	for {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		d, err := open(octx, driver, dsn)
		cancel()
		if err == nil || ctx.Err() != nil {
			return d, err
		}
		pause(ctx, 200*time.Millisecond)
	}
}

func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sendAndAckAll sends every row of the batch (one multi-row insert into the
// sends log; row by row if that fails), then acks them all in one
// statement, reporting acked, lost and unknown rows.
func sendAndAckAll(ctx context.Context, d *db, b *claim.Batch[item], out *emitter) {
	var sent []int64
	rows := b.Rows()
	var vals []string
	var args []any
	for i, r := range rows {
		vals = append(vals, fmt.Sprintf("($%d, $%d, $%d, $%d)", 4*i+1, 4*i+2, 4*i+3, 4*i+4))
		args = append(args, r.ID.(int64), b.Token(), os.Getpid(), r.Value.Attempts)
	}
	_, err := d.sql.ExecContext(ctx, d.sqlf("INSERT INTO {chaos_sends} ({row_id}, {token}, {pid}, {attempt}) VALUES "+strings.Join(vals, ", ")), args...)
	if err == nil {
		for _, r := range rows {
			sent = append(sent, r.ID.(int64))
		}
	} else {
		for _, r := range rows {
			if err := send(ctx, d, r.ID.(int64), b.Token(), r.Value.Attempts); err != nil {
				out.emit(event{Ev: "senderr", Tok: b.Token(), IDs: []int64{r.ID.(int64)}, Err: err.Error()})
				break
			}
			sent = append(sent, r.ID.(int64))
		}
	}
	if len(sent) == 0 {
		return
	}
	ids := make([]any, len(sent))
	for i, id := range sent {
		ids[i] = id
	}
	a0 := time.Now().UnixNano()
	err = b.Ack(ctx, ids...)
	var lost *claim.LostError
	switch {
	case err == nil:
		out.emit(event{Ev: "ack", Tok: b.Token(), IDs: sent, T0: a0, T: time.Now().UnixNano()})
	case errors.As(err, &lost):
		gone := map[int64]bool{}
		var lostIDs, acked []int64
		for _, id := range lost.IDs {
			gone[id.(int64)] = true
			lostIDs = append(lostIDs, id.(int64))
		}
		for _, id := range sent {
			if !gone[id] {
				acked = append(acked, id)
			}
		}
		if len(acked) > 0 {
			out.emit(event{Ev: "ack", Tok: b.Token(), IDs: acked, T0: a0, T: time.Now().UnixNano()})
		}
		out.emit(event{Ev: "lost", Tok: b.Token(), IDs: lostIDs, Err: err.Error()})
	default:
		out.emit(event{Ev: "ackerr", Tok: b.Token(), IDs: sent, Err: err.Error()})
	}
}

// sendAndAckTx inserts the row's send and acks the row in one transaction
// (Batch.AckTx), so that a send exists if and only if its ack committed. It
// reports ack, lost or ackerr, and whether to go on with the batch.
func sendAndAckTx(ctx context.Context, d *db, b *claim.Batch[item], r claim.Row[item], out *emitter) bool {
	one := []int64{r.ID.(int64)}
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		out.emit(event{Ev: "senderr", Tok: b.Token(), IDs: one, Err: err.Error()})
		return false
	}
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, d.sqlf("INSERT INTO {chaos_sends} ({row_id}, {token}, {pid}, {attempt}) VALUES ($1, $2, $3, $4)"),
		r.ID, b.Token(), os.Getpid(), r.Value.Attempts)
	if err != nil {
		out.emit(event{Ev: "senderr", Tok: b.Token(), IDs: one, Err: err.Error()})
		return false
	}
	a0 := time.Now().UnixNano()
	err = b.AckTx(ctx, dialect.SQLTx(tx), r.ID)
	if errors.Is(err, dialect.ErrClaimLost) {
		out.emit(event{Ev: "lost", Tok: b.Token(), IDs: one, Err: err.Error()})
		return false // rolled back: the new owner sends it
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		out.emit(event{Ev: "ackerr", Tok: b.Token(), IDs: one, Err: err.Error()})
		return false
	}
	out.emit(event{Ev: "ack", Tok: b.Token(), IDs: one, T0: a0, T: time.Now().UnixNano()})
	return true
}
