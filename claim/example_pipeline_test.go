package claim_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/hold"
)

// Run with the pipeline on: each loop acks a processed batch and claims the
// next in one operation (one commit per batch instead of two). Whether that
// is faster depends on the server; PipelineAuto uses it where it measured
// faster.
func ExampleWorkerConfig_pipeline() {
	ctx := context.Background()
	cfg := targetConfig() // batches of 3; five pending targets
	d := exampleSetup(cfg)
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var sent atomic.Int32
	err = c.Run(runCtx, claim.WorkerConfig[Message]{
		Pipeline: claim.PipelineOn, PollMin: time.Millisecond, PollMax: 10 * time.Millisecond,
		Handler: func(ctx context.Context, r claim.Row[Message]) error {
			if err := hold.Check(ctx); err != nil {
				return err // the row may be someone else's by now: do not send
			}
			fmt.Println("send to", r.Value.OpenID)
			if sent.Add(1) == 5 {
				cancel() // a real service runs until shutdown
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("done:", st.Done, "pending:", st.Pending)
	// Output:
	// send to user-1
	// send to user-2
	// send to user-3
	// send to user-4
	// send to user-5
	// done: 5 pending: 0
}
