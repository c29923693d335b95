package claim_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
	"github.com/claimlock/claimlock/observe"
)

// An application that inserts work in the same process wakes the claimer's
// idle Run loops after its commit, so a new row is picked up at once
// instead of after the poll interval (an hour here).
func ExampleClaimer_Wake() {
	ctx := context.Background()
	cfg := targetConfig()
	d, db := exampleTable(cfg)
	// Each loop's first claim finds nothing; then every loop is idle.
	const workers = 4
	var empties atomic.Int32
	idle := make(chan struct{})
	cfg.Observer = observe.Func(func(_ context.Context, e observe.Event) {
		if e.Op == claim.OpClaim && e.Claimed == 0 && empties.Add(1) == workers {
			close(idle)
		}
	})
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	handled := make(chan string)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		done <- c.Run(ctx, claim.WorkerConfig[Message]{
			Workers: workers, PollMin: time.Hour, PollMax: time.Hour,
			Handler: func(_ context.Context, r claim.Row[Message]) error {
				handled <- r.Value.OpenID
				return nil
			},
		})
	}()
	<-idle // every loop found nothing: none claims again for an hour

	if _, err := db.Exec("INSERT INTO xxx_task_target (task_id, openid) VALUES (42, 'user-7')"); err != nil {
		log.Fatal(err)
	}
	c.Wake()
	select {
	case id := <-handled:
		fmt.Println("handled", id)
	case <-time.After(time.Minute):
		fmt.Println("not handled: no loop was woken")
	}
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// handled user-7
}

// Across processes on PostgreSQL: the process that makes rows pending
// calls NotifyPending after its commit, and the idle claimers of the same
// table and scope in other processes claim at once, while their dialect's
// listener runs. Claimer.Run subscribes by itself; a loop of your own
// subscribes with OnNotify. (Not run here: it needs a PostgreSQL server.)
func ExampleClaimer_NotifyPending() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	d, err := postgres.New(ctx, pool, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := claim.New(d, targetConfig(), func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}

	// The consuming process: its listener, and a loop of its own woken by
	// the other processes' notifications (Claimer.Run needs neither call).
	go func() { _ = d.Listen(ctx, postgres.ListenConfig{}) }()
	wake := make(chan struct{}, 1)
	stop := c.OnNotify(func() {
		select {
		case wake <- struct{}{}:
		default: // one wake-up pending is enough
		}
	})
	defer stop()

	// The producing process, after committing its insert.
	if _, err := pool.Exec(ctx, "INSERT INTO xxx_task_target (task_id, openid) VALUES (42, 'user-7')"); err != nil {
		log.Fatal(err)
	}
	if err := c.NotifyPending(ctx); err != nil {
		log.Print("not notified; the others find the row at their next poll: ", err)
	}

	select {
	case <-wake:
		b, err := c.Claim(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("claimed", b.Len())
	case <-time.After(5 * time.Second):
	}
}
