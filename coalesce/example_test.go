package coalesce_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

// Example accepts changes of a hot counter (one of them resent, one
// stale), flushes them into its state row in one write, and reads the
// accepted and persisted versions.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "coalesce-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		panic(err)
	}
	if err := coalesce.CreateTables(ctx, d, db, coalesce.Config{}); err != nil {
		panic(err)
	}
	if _, err := db.Exec("CREATE TABLE counters (k TEXT PRIMARY KEY, total INTEGER NOT NULL)"); err != nil {
		panic(err)
	}

	// snippet: coalesce-accept
	co, err := coalesce.New(d, db, coalesce.Config{})
	if err != nil {
		panic(err)
	}
	for seq, delta := range []string{"5", "7", "-2"} {
		r, err := co.Accept(ctx, coalesce.Change{
			Key: "user:42", EventID: "evt-" + strconv.Itoa(seq+1),
			Source: "phone", Seq: int64(seq + 1), Payload: []byte(delta),
		})
		if err != nil {
			panic(err)
		}
		fmt.Println("accepted", r.EventID, "seq", r.Seq)
	}
	// A client retry of evt-2: the first receipt, nothing new recorded.
	r, _ := co.Accept(ctx, coalesce.Change{Key: "user:42", EventID: "evt-2", Source: "phone", Seq: 2, Payload: []byte("7")})
	fmt.Println("resent evt-2: duplicate", r.Duplicate)
	// An old change from the same source: refused (an HTTP 409).
	_, err = co.Accept(ctx, coalesce.Change{Key: "user:42", EventID: "evt-old", Source: "phone", Seq: 2, Payload: []byte("1")})
	fmt.Println(err)
	// end snippet

	// snippet: coalesce-flush
	f, err := co.Flusher(coalesce.FlusherConfig{
		Fold: func(ctx context.Context, tx *sql.Tx, key string, changes []coalesce.Record) error {
			var sum int64
			for _, ch := range changes {
				d, err := strconv.ParseInt(string(ch.Payload), 10, 64)
				if err != nil {
					return err
				}
				sum += d
			}
			// One state write for all of the key's changes, in the
			// transaction that marks them folded.
			_, err := tx.ExecContext(ctx, `INSERT INTO counters (k, total) VALUES (?, ?)
				ON CONFLICT (k) DO UPDATE SET total = total + excluded.total`, key, sum)
			return err
		},
	})
	if err != nil {
		panic(err)
	}
	// Run(ctx) loops; one round here.
	n, err := f.Flush(ctx)
	if err != nil {
		panic(err)
	}
	// end snippet
	fmt.Println("flushed keys:", n)

	var total int64
	if err := db.QueryRow("SELECT total FROM counters WHERE k = 'user:42'").Scan(&total); err != nil {
		panic(err)
	}
	accepted, persisted, err := co.Versions(ctx, "user:42")
	if err != nil {
		panic(err)
	}
	fmt.Println("total", total, "accepted", accepted, "persisted", persisted)
	// Output:
	// accepted evt-1 seq 1
	// accepted evt-2 seq 2
	// accepted evt-3 seq 3
	// resent evt-2: duplicate true
	// coalesce: stale sequence: key "user:42" source "phone": 2 is not above 3
	// flushed keys: 1
	// total 10 accepted 3 persisted 3
}

// ExampleCoalescer_AcceptBatch records a client's batch of changes in one
// transaction: each change gets what Accept would have given it, a resend
// its first receipt and an old sequence its refusal, the batch's own
// earlier changes counted.
func ExampleCoalescer_AcceptBatch() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "coalesce-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		panic(err)
	}
	if err := coalesce.CreateTables(ctx, d, db, coalesce.Config{}); err != nil {
		panic(err)
	}
	co, err := coalesce.New(d, db, coalesce.Config{})
	if err != nil {
		panic(err)
	}

	// snippet: coalesce-accept-batch
	if _, err := co.Accept(ctx, coalesce.Change{Key: "user:42", EventID: "evt-1", Source: "phone", Seq: 1, Payload: []byte("5")}); err != nil {
		panic(err)
	}
	res, err := co.AcceptBatch(ctx, []coalesce.Change{
		{Key: "user:42", EventID: "evt-1", Source: "phone", Seq: 1, Payload: []byte("5")}, // a resend
		{Key: "user:42", EventID: "evt-2", Source: "phone", Seq: 2, Payload: []byte("7")},
		{Key: "user:42", EventID: "evt-3", Source: "phone", Seq: 2, Payload: []byte("1")}, // not above evt-2's
		{Key: "user:7", EventID: "evt-4", Payload: []byte("3")},
	})
	if err != nil {
		panic(err) // the whole batch: invalid, overloaded, or the database
	}
	for _, r := range res {
		switch {
		case errors.Is(r.Err, coalesce.ErrStale):
			fmt.Println("refused:", r.Err) // an HTTP 409 for this change
		case r.Receipt.Duplicate:
			fmt.Println("resent", r.Receipt.EventID, "first recorded as row", r.Receipt.ID)
		default:
			fmt.Println("accepted", r.Receipt.EventID, "as row", r.Receipt.ID)
		}
	}
	// end snippet
	// Output:
	// resent evt-1 first recorded as row 1
	// accepted evt-2 as row 2
	// refused: coalesce: stale sequence: key "user:42" source "phone": 2 is not above 2
	// accepted evt-4 as row 3
}
