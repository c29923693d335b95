package leader_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/leader"
	"github.com/claimlock/claimlock/tasklock"
)

// Example runs a loop only while this process leads; a second elector of
// the same election waits.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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

	// snippet: leader-run
	el, err := leader.New(d, leader.Config{Table: tasklock.KeyTable("claimlock_lease"), Name: "billing", TTL: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	other, err := leader.New(d, leader.Config{Table: tasklock.KeyTable("claimlock_lease"), Name: "billing", TTL: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	err = el.Run(ctx, func(ctx context.Context, term leader.Term) error {
		// Only the leader gets here; ctx ends when leadership is lost.
		fmt.Println("leading with fence", term.Fence)
		fmt.Println("the other leads:", !errors.Is(other.IsLeader(ctx), leader.ErrNotLeader))
		cancel() // done: step down and stop competing
		return nil
	})
	// end snippet
	fmt.Println("run:", err)
	// Output:
	// leading with fence 1
	// the other leads: false
	// run: <nil>
}
