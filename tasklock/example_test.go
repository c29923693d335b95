package tasklock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/tasklock"
)

// Example runs a job under a keyed lease with Do: the lease is kept alive
// while the job runs and released afterwards.
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
	if err := tasklock.CreateTable(ctx, d, "leases"); err != nil {
		panic(err)
	}
	lk, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	err = lk.Do(ctx, "nightly-report", func(ctx context.Context, l *tasklock.Lease) error {
		// Attach l.Fence() to the writes the lease protects.
		fmt.Println("running with fence", l.Fence())
		_, err := lk.Acquire(ctx, "nightly-report")
		fmt.Println("second acquire held:", errors.Is(err, dialect.ErrLeaseHeld))
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// running with fence 1
	// second acquire held: true
	// done: <nil>
}

// ExampleLocker_Acquire takes a lease by hand, renews it and releases it.
func ExampleLocker_Acquire() {
	ctx := context.Background()
	db, _ := sqlite.Open(":memory:")
	defer db.Close()
	d, _ := sqlite.New(ctx, db, dialect.Options{})
	_ = tasklock.CreateTable(ctx, d, "leases")
	lk, _ := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: 10 * time.Second})

	l, err := lk.Acquire(ctx, "import")
	if err != nil {
		panic(err)
	}
	stop := l.KeepAlive(ctx) // renew every TTL/3 in the background
	defer stop()
	select {
	case <-l.Done():
		fmt.Println("lost:", l.Err())
	default:
		fmt.Println("holding fence", l.Fence())
	}
	released, err := l.Release(ctx)
	fmt.Println("released:", released, err)
	fmt.Println("why it ended:", l.Err())

	again, _ := lk.Acquire(ctx, "import")
	fmt.Println("next fence:", again.Fence())
	_, _ = again.Release(ctx)
	// Output:
	// holding fence 1
	// released: true <nil>
	// why it ended: tasklock: lease released
	// next fence: 2
}

// ExampleAlterTaskTableDDL prints the columns to add to an existing task
// table for leases on its rows.
func ExampleAlterTaskTableDDL() {
	ctx := context.Background()
	db, _ := sqlite.Open(":memory:")
	defer db.Close()
	d, _ := sqlite.New(ctx, db, dialect.Options{})

	spec := tasklock.TaskTable("xxx_task") // id, lock_at, lock_owner
	spec.ExpiresAt = "lock_expires_at"
	spec.Fence = "lock_fence"
	stmts, err := tasklock.AlterTaskTableDDL(d, spec)
	if err != nil {
		panic(err)
	}
	for _, s := range stmts {
		fmt.Println(s)
	}
	// Output:
	// ALTER TABLE `xxx_task` ADD COLUMN `lock_owner` VARCHAR(40)
	// -- ALTER TABLE `xxx_task` ADD COLUMN `lock_expires_at` <the type of `lock_at`>
	// ALTER TABLE `xxx_task` ADD COLUMN `lock_fence` BIGINT NOT NULL DEFAULT 0
}

// ExampleConfig_minHold runs a job scheduled on many hosts once per window:
// with MinHold the key stays taken for ten minutes after each acquisition,
// even though the job finishes at once, so the other hosts' runs of the
// same schedule (a moment later by their clocks) find it held.
func ExampleConfig_minHold() {
	ctx := context.Background()
	db, _ := sqlite.Open(":memory:")
	defer db.Close()
	d, _ := sqlite.New(ctx, db, dialect.Options{})
	_ = tasklock.CreateTable(ctx, d, "leases")
	lk, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: 30 * time.Second, MinHold: 10 * time.Minute})
	if err != nil {
		panic(err)
	}
	job := func(ctx context.Context, l *tasklock.Lease) error {
		fmt.Println("sending the digest")
		return nil
	}
	fmt.Println("first host:", lk.Do(ctx, "hourly-digest", job))
	err = lk.Do(ctx, "hourly-digest", job) // another host, a moment later
	fmt.Println("second host skipped:", errors.Is(err, dialect.ErrLeaseHeld))
	// Output:
	// sending the digest
	// first host: <nil>
	// second host skipped: true
}
