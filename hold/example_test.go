package hold_test

import (
	"context"
	"fmt"

	"github.com/claimlock/claimlock/hold"
)

// Check right before the send, on the context claimlock handed to the
// work. On a context that carries no claim or lease (here, Background:
// the claim's context was not passed down) it refuses.
func ExampleCheck() {
	var sent []string
	send := func(_ context.Context, msg string) { sent = append(sent, msg) }
	deliver := func(ctx context.Context, msg string) error {
		// snippet: hold-check
		if err := hold.Check(ctx); err != nil {
			return err // the rows may be someone else's by now: do not send
		}
		send(ctx, msg)
		// end snippet
		return nil
	}
	fmt.Println(deliver(context.Background(), "hello"), sent)
	// Output: hold: the context carries no claim or lease []
}
