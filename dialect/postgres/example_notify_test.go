package postgres_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
)

// Wake idle claimers of other processes with LISTEN/NOTIFY: every worker
// process runs the dialect's listener beside its claim loops, and the
// application notifies in the transaction that inserts rows. The poll
// interval stays as the fallback. (Compile-only: it needs a server.)
func ExampleDialect_Listen() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	d, err := postgres.New(ctx, pool, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cfg := claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}},
		ScopeValues: []any{42},
	}
	c, err := claim.New[struct{}](d, cfg, nil)
	if err != nil {
		log.Fatal(err)
	}

	// Worker process: one listener per dialect, for all its claimers.
	go func() {
		if err := d.Listen(ctx, postgres.ListenConfig{}); err != nil {
			log.Print(err)
		}
	}()
	go func() {
		_ = c.Run(ctx, claim.WorkerConfig[struct{}]{
			Workers: 16, PollMax: 30 * time.Second, // polling is only the fallback now
			Handler: func(ctx context.Context, r claim.Row[struct{}]) error { return nil },
		})
	}()

	// Application: insert and notify in one transaction; the claimers wake
	// when it commits.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO jobs (task_id) VALUES ($1)", 42); err != nil {
		log.Fatal(err)
	}
	if err := postgres.Notify(ctx, tx, cfg.ClaimTable, cfg.ScopeValues...); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
