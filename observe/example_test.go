package observe_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
)

// One observer serves every package: it tells the events apart by their
// Source and Op.
func Example() {
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE outbox (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'PENDING',
		token TEXT, claimed_at INTEGER);
		INSERT INTO outbox (id) VALUES (1), (2), (3)`); err != nil {
		log.Fatal(err)
	}
	if err := tasklock.CreateTable(ctx, d, "leases"); err != nil {
		log.Fatal(err)
	}

	obs := observe.Func(func(_ context.Context, e observe.Event) {
		switch e.Op {
		case claim.OpClaim:
			fmt.Printf("%s: %s claimed %d rows of %s\n", e.Source, e.Op.Name(), e.Claimed, e.Table)
		case claim.OpAck:
			fmt.Printf("%s: %s acked %d rows\n", e.Source, e.Op.Name(), e.Acked)
		case tasklock.OpAcquire, tasklock.OpRelease:
			fmt.Printf("%s: %s %v on %s: %v\n", e.Source, e.Op.Name(), e.Key, e.Table, e.OK)
		}
	})
	k, err := tasklock.New(d, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: time.Minute, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	c, err := claim.New[struct{}](d, claim.Config{ClaimTable: dialect.ClaimTable{Table: "outbox"}, Observer: obs}, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = k.Do(ctx, "outbox-sender", func(ctx context.Context, _ *tasklock.Lease) error {
		b, err := c.Claim(ctx)
		if err != nil {
			return err
		}
		return b.AckAll(ctx)
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// tasklock: acquire outbox-sender on leases: true
	// claim: claim claimed 3 rows of outbox
	// claim: ack acked 3 rows
	// tasklock: release outbox-sender on leases: true
}

// Join installs several observers where a configuration takes one.
func ExampleJoin() {
	count := 0
	counter := observe.Func(func(context.Context, observe.Event) { count++ })
	printer := observe.Func(func(_ context.Context, e observe.Event) { fmt.Println(e.Op) })
	obs := observe.Join(counter, nil, printer)
	obs.Observe(context.Background(), observe.Event{Source: observe.SourceClaim, Op: claim.OpAck})
	fmt.Println(count)
	// Output:
	// claim.ack
	// 1
}
