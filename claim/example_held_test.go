package claim_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// Holder.Run handles held batches: each handler run writes its rows'
// results in the batch's transaction, and they commit with the acks or not
// at all. Held claims need row locks that other claims skip (PostgreSQL,
// MySQL 8, MariaDB 10.6+), so this example only compiles: d would be a
// postgres or mysql dialect.
func ExampleHolder_Run() {
	var d dialect.Dialect // postgres.New(ctx, pool, dialect.Options{}), say
	if d == nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	claimer, err := claim.New(d, claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: "xxx_task_target", Scope: []string{"task_id"}, Columns: []string{"openid"}, Attempts: "attempts"},
		ScopeValues: []any{42}, BatchSize: 50, MaxAttempts: 5,
	}, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	holder, err := claimer.Holder(claim.HoldConfig{Limit: 10 * time.Second, MaxInFlight: 4})
	if errors.Is(err, dialect.ErrNotSupported) {
		log.Fatal("this engine cannot hold claims: use claimer.Run")
	} else if err != nil {
		log.Fatal(err)
	}
	err = holder.Run(ctx, func(ctx context.Context, b *claim.Held[Message]) error {
		for _, r := range b.Rows() {
			if r.Value.OpenID == "" {
				// One row fails alone; the others are acked on return.
				if err := b.Fail(ctx, r.ID, claim.Park(errors.New("no openid"))); err != nil {
					return err
				}
				continue
			}
			if _, err := b.Exec(ctx, "INSERT INTO greeting (openid) VALUES ($1)", r.Value.OpenID); err != nil {
				return err // the batch's writes are undone and every row fails
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err) // a permanent error: a missing column, say
	}
}
