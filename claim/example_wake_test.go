package claim_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
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
