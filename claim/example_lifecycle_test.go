package claim_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// lifecycleSetup opens an in-memory SQLite database with cfg's jobs table
// and two pending jobs.
func lifecycleSetup(cfg claim.Config) (dialect.Dialect, *sql.DB) {
	d, db := exampleTable(cfg)
	if _, err := db.Exec("INSERT INTO jobs (payload) VALUES ('a'), ('b')"); err != nil {
		log.Fatal(err)
	}
	return d, db
}

// A failed row waits for its backoff on the database clock, with its error
// stored; an operator lists it and retries it now.
func ExampleBatch_Fail_backoff() {
	ctx := context.Background()
	cfg := claim.Config{
		ClaimTable: dialect.ClaimTable{Table: "jobs", Attempts: "attempts", RunAt: "run_at", Error: "last_error",
			Columns: []string{"payload"}},
		MaxAttempts: 5,
		Backoff:     claim.ExponentialBackoff(time.Minute, time.Hour),
	}
	d, _ := lifecycleSetup(cfg)
	c, err := claim.New(d, cfg, func(p *string) []any { return []any{p} })
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.Claim(ctx)
	if err != nil {
		log.Fatal(err)
	}
	first := b.Rows()[0]
	if err := b.Fail(ctx, first.ID, errors.New("send API: 503")); err != nil {
		log.Fatal(err)
	}
	if err := b.AckAll(ctx); err != nil {
		log.Fatal(err)
	}
	again, _ := c.Claim(ctx)
	fmt.Println("claimable now:", again.Len())

	waiting, _ := c.List(ctx, claim.Scheduled, 0, 10)
	for _, r := range waiting {
		fmt.Printf("row %v: attempt %d failed with %q, retried in about a minute: %v\n",
			r.ID, r.Attempts, r.Error, r.RunIn > 40*time.Second && r.RunIn < 80*time.Second)
	}
	n, _ := c.RetryNow(ctx)
	fmt.Println("retried now:", n)
	// Output:
	// claimable now: 0
	// row 1: attempt 1 failed with "send API: 503", retried in about a minute: true
	// retried now: 1
}

// The handler's write and the ack commit together: a crash between them
// can no longer leave the write without the ack.
func ExampleBatch_AckTx() {
	ctx := context.Background()
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Columns: []string{"payload"}}}
	d, db := lifecycleSetup(cfg)
	if _, err := db.Exec("CREATE TABLE results (job_id INTEGER NOT NULL, result TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	c, err := claim.New(d, cfg, func(p *string) []any { return []any{p} })
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.Claim(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range b.Rows() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO results VALUES (?, ?)", r.ID, "done:"+r.Value); err != nil {
			log.Fatal(err)
		}
		if err := b.AckTx(ctx, dialect.SQLTx(tx), r.ID); err != nil {
			_ = tx.Rollback() // lost: another worker has the row
			continue
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
	}
	var results int
	_ = db.QueryRow("SELECT COUNT(*) FROM results").Scan(&results)
	st, _ := c.Stats(ctx)
	fmt.Println("results:", results, "done:", st.Done)
	// Output: results: 2 done: 2
}

// With Config.AckDelay, acks of rows processed one at a time are deferred
// and written together:
// one statement for the batch instead of one per row.
func ExampleBatch_Flush() {
	ctx := context.Background()
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs", Columns: []string{"payload"}}, AckDelay: time.Second}
	d, _ := lifecycleSetup(cfg)
	c, err := claim.New(d, cfg, func(p *string) []any { return []any{p} })
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.Claim(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range b.Rows() {
		// ... process r ...
		if err := b.Ack(ctx, r.ID); err != nil {
			log.Fatal(err)
		}
	}
	// Flush writes what is still deferred and reports every deferred ack's
	// outcome (rows found lost, with errors.Is(err, dialect.ErrClaimLost)).
	if err := b.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	st, _ := c.Stats(ctx)
	fmt.Println("done:", st.Done)
	// Output: done: 2
}
