package claim_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/hold"
	"github.com/claimlock/claimlock/zombie"
)

// Message is what a worker reads from each claimed row.
type Message struct {
	OpenID string
}

// exampleSetup opens an in-memory SQLite database holding the cron story's
// target table with five pending targets of task 42.
func exampleSetup(cfg claim.Config) dialect.Dialect {
	d, db := exampleTable(cfg)
	// The application inserts work; claimlock only claims it.
	for i := 1; i <= 5; i++ {
		if _, err := db.Exec("INSERT INTO xxx_task_target (task_id, openid) VALUES (42, ?)", fmt.Sprintf("user-%d", i)); err != nil {
			log.Fatal(err)
		}
	}
	return d
}

// exampleTable opens an in-memory SQLite database holding cfg's table and
// its recommended indexes.
func exampleTable(cfg claim.Config) (dialect.Dialect, *sql.DB) {
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	if err != nil {
		log.Fatal(err)
	}
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	spec, err := cfg.Resolve()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, createTableSQL(spec)); err != nil {
		log.Fatal(err)
	}
	idx := cfg
	idx.Columns = nil // the indexes do not depend on the row type
	c, err := claim.New[struct{}](d, idx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range c.IndexDDL(false) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			log.Fatal(err)
		}
	}
	return d, db
}

// createTableSQL is the SQLite table an application would have for t:
// times are integer milliseconds, the status a text with the pending
// value as its default.
func createTableSQL(t dialect.ClaimTable) string {
	cols := []string{t.ID + " INTEGER PRIMARY KEY AUTOINCREMENT"}
	for _, c := range t.Scope {
		cols = append(cols, c+" INTEGER NOT NULL")
	}
	cols = append(cols, t.Status+" TEXT NOT NULL DEFAULT "+t.Pending.Literal(), t.Token+" TEXT", t.ClaimedAt+" INTEGER")
	for _, c := range []string{t.Attempts, t.Version} {
		if c != "" {
			cols = append(cols, c+" INTEGER NOT NULL DEFAULT 0")
		}
	}
	for _, c := range []string{t.RunAt, t.CreatedAt} {
		if c != "" {
			cols = append(cols, c+" INTEGER")
		}
	}
	if t.Error != "" {
		cols = append(cols, t.Error+" TEXT")
	}
	for _, c := range t.Columns {
		cols = append(cols, c+" TEXT")
	}
	return "CREATE TABLE " + t.Table + " (" + strings.Join(cols, ", ") + ")"
}

func targetConfig() claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table:     "xxx_task_target",
			Token:     "cron_token",
			ClaimedAt: "send_at",
			Done:      dialect.StatusString("SENT"),
			Columns:   []string{"openid"},
			Scope:     []string{"task_id"},
		},
		ScopeValues:  []any{42},
		RequireScope: true,
		BatchSize:    3,
	}
}

// Claim a batch, process it, and ack it in one statement.
func Example() {
	ctx := context.Background()
	cfg := targetConfig()
	d := exampleSetup(cfg)
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	for {
		b, err := c.Claim(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if b.Len() == 0 {
			break
		}
		wctx, cancel := b.Context(ctx) // ends if every row is lost
		for _, r := range b.Rows() {
			if hold.Check(wctx) != nil { // the last check before a send
				break // lost: someone else may be sending them now
			}
			fmt.Println("send to", r.Value.OpenID)
		}
		cancel()
		if err := b.AckAll(ctx); err != nil {
			log.Fatal(err)
		}
	}
	st, _ := c.Stats(ctx)
	fmt.Println("sent:", st.Done, "pending:", st.Pending)
	// Output:
	// send to user-1
	// send to user-2
	// send to user-3
	// send to user-4
	// send to user-5
	// sent: 5 pending: 0
}

// A worker whose rows were reaped and re-claimed cannot overwrite the new
// owner: its ack reports the lost rows.
func ExampleBatch_Ack_lost() {
	ctx := context.Background()
	cfg := targetConfig()
	d := exampleSetup(cfg)
	c, _ := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })

	reaper, _ := zombie.New(d, cfg, zombie.Config{Timeout: time.Millisecond})

	stalled, _ := c.Claim(ctx)
	time.Sleep(10 * time.Millisecond) // the worker stalls; the reaper returns its rows
	_, _ = reaper.Sweep(ctx)
	fresh, _ := c.Claim(ctx)

	err := stalled.AckAll(ctx)
	var lost *claim.LostError
	fmt.Println(errors.Is(err, dialect.ErrClaimLost), errors.As(err, &lost), lost.IDs)
	fmt.Println(fresh.IDs(), fresh.AckAll(ctx))
	// Output:
	// true true [1 2 3]
	// [1 4 5] <nil>
}

// Run is the worker loop: N workers claim, handle each row, ack the
// successes per batch and back off while nothing is pending.
func ExampleClaimer_Run() {
	cfg := targetConfig()
	d := exampleSetup(cfg)
	c, _ := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })

	ctx, cancel := context.WithCancel(context.Background())
	sent := 0
	err := c.Run(ctx, claim.WorkerConfig[Message]{
		Workers: 1,
		Handler: func(ctx context.Context, r claim.Row[Message]) error {
			// An idempotent send: the receiver deduplicates on this key.
			key := fmt.Sprintf("task-42:%v", r.ID)
			fmt.Println("send", key, "to", r.Value.OpenID)
			if sent++; sent == 5 {
				cancel()
			}
			return nil
		},
		ShutdownMode: claim.ShutdownFinish,
	})
	st, _ := c.Stats(context.Background())
	fmt.Println(err, st.Done)
	// Output:
	// send task-42:1 to user-1
	// send task-42:2 to user-2
	// send task-42:3 to user-3
	// send task-42:4 to user-4
	// send task-42:5 to user-5
	// <nil> 5
}

// A worker keeps its batch alive and does its work under the batch's
// context, which is cancelled if the rows are lost (reaped and maybe
// re-claimed) or the local deadline derived from ReapTimeout passes: the
// worker then stops instead of working on rows another worker may hold.
func ExampleBatch_Context() {
	ctx := context.Background()
	cfg := targetConfig()
	cfg.ReapTimeout = 5 * time.Minute // the reaper's Timeout (zombie.Config)
	d := exampleSetup(cfg)
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.Claim(ctx)
	if err != nil {
		log.Fatal(err)
	}
	stop := b.KeepAlive(ctx) // every ReapTimeout/3; stops by itself once nothing is held
	defer stop()             // and at the latest here, after the acks
	wctx, cancel := b.Context(ctx)
	defer cancel()
	for _, r := range b.Rows() {
		if err := wctx.Err(); err != nil {
			fmt.Println("stopping:", context.Cause(wctx))
			break
		}
		fmt.Println("send to", r.Value.OpenID)
	}
	if err := b.AckAll(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("batch:", b.Err())
	// Output:
	// send to user-1
	// send to user-2
	// send to user-3
	// batch: claim: batch holds no rows
}
