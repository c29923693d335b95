package coalesce_test

import (
	"context"
	"database/sql"
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
