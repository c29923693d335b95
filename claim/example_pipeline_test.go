package claim_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/claimlock/claimlock/claim"
)

// A hand-written loop that acks each batch together with the claim of the
// next: one commit per batch instead of two. Rows whose processing failed
// are failed first; AckAllAndClaim acks the rest.
func ExampleClaimer_AckAllAndClaim() {
	ctx := context.Background()
	cfg := targetConfig() // batches of 3; five pending targets
	d := exampleSetup(cfg)
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.Claim(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for b.Len() > 0 {
		for _, r := range b.Rows() {
			fmt.Println("send to", r.Value.OpenID)
		}
		next, err := c.AckAllAndClaim(ctx, b)
		var lost *claim.LostError
		switch {
		case errors.As(err, &lost):
			// Reaped rows were not acked; the next batch was claimed.
			log.Printf("lost %v", lost.IDs)
		case err != nil:
			// Nothing was written: b still holds its rows.
			log.Fatal(err)
		}
		b = next
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
