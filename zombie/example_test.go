package zombie_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// A worker claims two jobs and dies before acking them. The reaper returns
// them to pending once they have been processing longer than the timeout,
// and another worker finishes them; the dead worker's late ack is refused.
func Example() {
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		panic(err)
	}

	// The jobs table (SQLite keeps times as integer milliseconds).
	if _, err := db.ExecContext(ctx, `CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,
		status TEXT NOT NULL DEFAULT 'PENDING', token TEXT, claimed_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0)`); err != nil {
		panic(err)
	}
	// MaxAttempts is the table's parking rule, for claimers and reapers.
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Attempts: "attempts"}, BatchSize: 2, MaxAttempts: 5}
	if _, err := db.ExecContext(ctx, "INSERT INTO jobs (status) VALUES ('PENDING'), ('PENDING'), ('PENDING')"); err != nil {
		panic(err)
	}

	claimer, err := claim.New[struct{}](d, cfg, nil)
	if err != nil {
		panic(err)
	}
	for _, q := range claimer.IndexDDL(false) { // among them the reaper's (status, claimed_at)
		if _, err := db.ExecContext(ctx, q); err != nil {
			panic(err)
		}
	}
	dead, err := claimer.Claim(ctx) // this worker crashes: no ack, no heartbeat
	if err != nil {
		panic(err)
	}
	fmt.Println("claimed by the dead worker:", dead.IDs())

	reaper, err := zombie.New(d, cfg, zombie.Config{Timeout: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	time.Sleep(100 * time.Millisecond)
	res, err := reaper.Sweep(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("returned:", res.Returned, "parked:", res.Parked)

	for { // claims go on above the last key claimed, then from the lowest (docs/claim.md, "Claim order")
		b, err := claimer.Claim(ctx)
		if err != nil {
			panic(err)
		}
		if b.Len() == 0 {
			break
		}
		fmt.Println("claimed again:", b.IDs())
		if err := b.AckAll(ctx); err != nil {
			panic(err)
		}
	}
	err = dead.AckAll(ctx)
	fmt.Println("late ack lost its claim:", err != nil && errors.Is(err, dialect.ErrClaimLost))

	st, err := claimer.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("done:", st.Done, "pending:", st.Pending, "processing:", st.Processing)
	// Output:
	// claimed by the dead worker: [1 2]
	// returned: 2 parked: 0
	// claimed again: [1 3]
	// claimed again: [2]
	// late ack lost its claim: true
	// done: 3 pending: 0 processing: 0
}

// A process took a lease and died holding it. The lease reaper clears it
// once its expiry has passed on the database clock, so that tools listing
// the table see it free (acquisitions do not need this: they take an
// expired lease over by themselves).
func ExampleLeaseReaper() {
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		panic(err)
	}
	if err := tasklock.CreateTable(ctx, d, "claimlock_lease"); err != nil {
		panic(err)
	}
	k, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("claimlock_lease"), TTL: time.Second})
	if err != nil {
		panic(err)
	}
	if _, err := k.Acquire(ctx, "report:daily"); err != nil { // never released: the holder died
		panic(err)
	}
	r, err := zombie.NewLeaseReaper(d, tasklock.KeyTable("claimlock_lease"), zombie.LeaseConfig{})
	if err != nil {
		panic(err)
	}
	n, _ := r.Sweep(ctx)
	fmt.Println("cleared while live:", n)
	time.Sleep(1200 * time.Millisecond)
	n, _ = r.Sweep(ctx)
	fmt.Println("cleared after expiry:", n)
	// Output:
	// cleared while live: 0
	// cleared after expiry: 1
}
