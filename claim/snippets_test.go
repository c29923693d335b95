package claim_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/hold"
	"github.com/claimlock/claimlock/internal/testkit/await"
)

// The tests in this file run the code snippets of the documentation
// (README.md and the claim package's doc comments), verbatim between the
// "snippet" markers; the repository's snippet test checks that the
// documentation still holds exactly this code.

// Msg is the row type of the documentation's snippets.
type Msg struct{ OpenID string }

// The README's claim section, on SQLite as it names.
func TestSnippetReadmeClaim(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := context.Background()
	var sent sync.Map
	send := func(ctx context.Context, id any, openID string) {
		require.NoError(t, ctx.Err())
		_, again := sent.LoadOrStore(id, openID)
		require.False(t, again, "sent twice: %v", id)
	}
	{
		db, err := sqlite.Open("app.db")
		require.NoError(t, err)
		_, err = db.Exec(`CREATE TABLE xxx_task_target (id INTEGER PRIMARY KEY, task_id INTEGER NOT NULL,
			openid TEXT NOT NULL, status INTEGER NOT NULL DEFAULT 0, cron_token VARCHAR(40), send_at INTEGER,
			attempts INTEGER NOT NULL DEFAULT 0)`)
		require.NoError(t, err)
		for i := range 150 {
			_, err = db.Exec("INSERT INTO xxx_task_target (task_id, openid) VALUES (42, ?)", fmt.Sprintf("o%d", i))
			require.NoError(t, err)
		}
		require.NoError(t, db.Close())
	}
	run := func() error {
		// snippet: readme-claim
		db, err := sqlite.Open("app.db") // or mysql.Open, pgxpool.New
		if err != nil {
			return err
		}
		d, err := sqlite.New(ctx, db, dialect.Options{}) // mysql.New, postgres.New, postgres.NewStdlib
		if err != nil {
			return err
		}
		c, err := claim.New(d, claim.Config{
			ClaimTable: dialect.ClaimTable{ // the table, described once (the reaper reuses it)
				Table: "xxx_task_target", Token: "cron_token", ClaimedAt: "send_at", Attempts: "attempts",
				Columns: []string{"openid"},
				Scope:   []string{"task_id"},
				// The cron story's TINYINT statuses. String statuses work too, and
				// default to PENDING, PROCESSING, DONE and FAILED.
				Pending: dialect.StatusInt(0), Processing: dialect.StatusInt(1),
				Done: dialect.StatusInt(2), Failed: dialect.StatusInt(3),
			},
			ScopeValues: []any{42}, // task_id = 42
			MaxAttempts: 5,
			BatchSize:   100,
			ReapTimeout: time.Minute, // the reaper's timeout: gives batches a local deadline
		}, func(m *Msg) []any { return []any{&m.OpenID} })
		if err != nil {
			return err
		}

		b, err := c.Claim(ctx) // rows are PROCESSING under b.Token() now
		if err != nil {
			return err
		}
		stop := b.KeepAlive(ctx)       // heartbeat while sending (every ReapTimeout/3)
		defer stop()                   // the heartbeat stops last
		wctx, cancel := b.Context(ctx) // cancelled if the rows are lost
		defer cancel()
		var sent []any
		for _, r := range b.Rows() {
			if hold.Check(wctx) != nil { // the last check before the send
				break // the rows are lost or past their local deadline: send no more
			}
			send(wctx, r.ID, r.Value.OpenID) // idempotent on (task, r.ID)
			sent = append(sent, r.ID)
		}
		if err := b.Ack(ctx, sent...); err != nil { // one statement; errors.Is(err, dialect.ErrClaimLost) for reaped rows
			return err
		}
		_, err = b.Release(ctx) // rows not sent go back to pending
		return err
		// end snippet
	}
	require.NoError(t, run())
	db, err := sqlite.Open("app.db")
	require.NoError(t, err)
	defer db.Close()
	var pending, done int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FILTER (WHERE status = 0), COUNT(*) FILTER (WHERE status = 2) FROM xxx_task_target").Scan(&pending, &done))
	require.Equal(t, [2]int{50, 100}, [2]int{pending, done})
}

// The README's failure settings and the claim.Config doc example describe
// valid configurations.
func TestSnippetConfigs(t *testing.T) {
	e := open(t, engines[0])
	fields := func(t *Target) []any { return []any{&t.OpenID} }
	cfgs := []claim.Config{
		// snippet: readme-failures
		claim.Config{
			ClaimTable: dialect.ClaimTable{ /* ... */ Attempts: "attempts",
				RunAt: "run_at",     // nullable time: NULL means now
				Error: "last_error", // nullable text: the last failure's message
			},
			MaxAttempts: 5,
			Backoff:     claim.ExponentialBackoff(5*time.Second, 10*time.Minute), // default: 1 s doubling to 1 h, ±25% jitter
		},
		// end snippet
		// snippet: godoc-claim-config
		claim.Config{
			ClaimTable: dialect.ClaimTable{
				Table: "xxx_task_target", Token: "cron_token", ClaimedAt: "send_at",
				Attempts: "attempts", Columns: []string{"openid"},
				Scope: []string{"task_id"}, Done: dialect.StatusString("SENT"),
			},
			ScopeValues: []any{42},
			MaxAttempts: 5,
		},
		// end snippet
	}
	cfgs[0].Table, cfgs[0].Columns = "jobs", []string{"openid"}
	for _, cfg := range cfgs {
		createTable(t, e, cfg)
		c, err := claim.New(e.d, cfg, fields)
		require.NoError(t, err)
		require.NoError(t, c.Verify(context.Background()))
	}
	// The fields function of the claim.New doc.
	type Target struct{ OpenID, Payload string }
	fn :=
		// snippet: godoc-fields
		func(r *Target) []any { return []any{&r.OpenID, &r.Payload} }
	// end snippet
	require.Len(t, fn(&Target{}), 2)
}

// Target is the row type of the configuration snippets.
type Target struct{ OpenID string }

// The package doc's idempotency key for a send.
func TestSnippetSendKey(t *testing.T) {
	row := claim.Row[Msg]{ID: int64(7)}
	// snippet: godoc-send-key
	key := fmt.Sprintf("%s:%v", "task-42", row.ID) // one send per row, ever
	// end snippet
	require.Equal(t, "task-42:7", key)
}

// The claim.BatchOf doc's handler, as a new user writes a service with it:
// on every engine, 1,000 rows, four workers, the send log and the ack in
// one transaction begun on the handler's context. Every row is logged
// exactly once, no commit fails and no row is claimed twice.
func TestSnippetAckTxService(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e := open(t, en)
			ctx := context.Background()
			const rows = 1000
			cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: tableName("outbox"), Columns: []string{"openid"}}, BatchSize: 20}
			createTable(t, e, cfg)
			insertRows(t, e, cfg.Table, []string{"openid"}, rows, func(i int) []any { return []any{fmt.Sprintf("o%d", i)} })
			e.exec(t, "CREATE TABLE send_log (msg_id BIGINT NOT NULL)")
			c, err := claim.New(e.d, cfg, func(m *Msg) []any { return []any{&m.OpenID} })
			require.NoError(t, err)
			logs := &recordingHandler{}
			c2, err := claim.New(e.d, func() claim.Config { cfg.Logger = slog.New(logs); return cfg }(), func(m *Msg) []any { return []any{&m.OpenID} })
			require.NoError(t, err)
			_ = c

			db, insertLog := e.raw, e.rebind("INSERT INTO send_log (msg_id) VALUES (?)")
			var calls, commitErrs atomic.Int64
			seen := sync.Map{}
			var reclaims atomic.Int64
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- c2.Run(runCtx, claim.WorkerConfig[Msg]{Workers: 4, PollMin: 2 * time.Millisecond, PollMax: 20 * time.Millisecond,
					Handler: countCommits(&calls, &commitErrs, &reclaims, &seen, func() func(ctx context.Context, r claim.Row[Msg]) error {
						return claim.WorkerConfig[Msg]{
							// snippet: godoc-acktx-handler
							Handler: func(ctx context.Context, r claim.Row[Msg]) error {
								b, _ := claim.BatchOf[Msg](ctx) // always there in a Run handler
								tx, err := db.BeginTx(ctx, nil)
								if err != nil {
									return err
								}
								defer tx.Rollback()
								if _, err := tx.ExecContext(ctx, insertLog, r.ID); err != nil {
									return err
								}
								if err := b.AckTx(ctx, dialect.SQLTx(tx), r.ID); err != nil {
									return err // lost: someone else has the row now; roll back
								}
								return tx.Commit()
							},
							// end snippet
						}.Handler
					}()),
				})
			}()
			awaitStats(t, "every row to be done", c2.Stats, func(st claim.Stats) bool { return st.Done == rows },
				func() string {
					return fmt.Sprintf("%d failed commits, %d re-claims", commitErrs.Load(), reclaims.Load())
				})
			cancel()
			require.NoError(t, <-done)
			var total, distinct int
			require.NoError(t, e.raw.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT msg_id) FROM send_log").Scan(&total, &distinct))
			require.Equal(t, [2]int{rows, rows}, [2]int{total, distinct}, "one send_log row per row")
			require.Zero(t, commitErrs.Load(), "failed commits")
			require.Zero(t, reclaims.Load(), "rows handled twice")
			require.EqualValues(t, rows, calls.Load())
			require.Empty(t, logs.atLeast(slog.LevelWarn), "nothing logged at Warn or above")
			t.Logf("%s: %d rows, %d handler calls, %d failed commits, %d re-claims", e.kind, rows, calls.Load(), commitErrs.Load(), reclaims.Load())
		})
	}
}

// countCommits wraps a handler, counting its calls, the rows handled more
// than once and its errors (the doc's handler returns the commit's error
// last).
func countCommits(calls, errs, reclaims *atomic.Int64, seen *sync.Map, h func(context.Context, claim.Row[Msg]) error) func(context.Context, claim.Row[Msg]) error {
	return func(ctx context.Context, r claim.Row[Msg]) error {
		calls.Add(1)
		if _, again := seen.LoadOrStore(r.ID, true); again {
			reclaims.Add(1)
		}
		err := h(ctx, r)
		if err != nil {
			errs.Add(1)
		}
		return err
	}
}

// RateLimited is the send error of the docs' Run snippet: the API asks to
// come back after Wait.
type RateLimited struct{ Wait time.Duration }

func (e *RateLimited) Error() string { return fmt.Sprintf("rate limited: retry in %v", e.Wait) }

// ErrNoSuchUser is the send error of the docs' Run snippet that retrying
// cannot cure.
var ErrNoSuchUser = errors.New("no such user")

// The claim guide's Run snippet: on every engine, the handler's errors
// decide each row's fate: acked, retried when the API says, parked at once.
func TestSnippetDocsClaimRun(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e := open(t, en)
			cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: tableName("run"), Columns: []string{"openid"},
				Attempts: "attempts", RunAt: "run_at", Error: "last_error"}, BatchSize: 4, MaxAttempts: 3}
			createTable(t, e, cfg)
			insertRows(t, e, cfg.Table, []string{"openid"}, 10, func(i int) []any { return []any{fmt.Sprintf("o%d", i)} })
			c, err := claim.New(e.d, cfg, func(m *Msg) []any { return []any{&m.OpenID} })
			require.NoError(t, err)
			var sends sync.Map
			send := func(_ context.Context, openID string) error {
				_, again := sends.LoadOrStore(openID, true)
				require.False(t, again, "sent twice: %s", openID)
				switch openID {
				case "o3":
					return &RateLimited{Wait: time.Hour}
				case "o5":
					return fmt.Errorf("send %s: %w", openID, ErrNoSuchUser)
				}
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				// snippet: docs-claim-run
				err := c.Run(ctx, claim.WorkerConfig[Msg]{
					Workers: 8,
					Handler: func(ctx context.Context, r claim.Row[Msg]) error {
						if err := hold.Check(ctx); err != nil {
							return err // the row may be someone else's by now: do not send
						}
						err := send(ctx, r.Value.OpenID) // idempotent on r.ID
						var busy *RateLimited
						switch {
						case errors.As(err, &busy):
							return claim.RetryAfter(busy.Wait, err) // when the API says, not after the backoff
						case errors.Is(err, ErrNoSuchUser):
							return claim.Park(err) // retrying cannot help: park it now, with its error
						}
						return err // nil: acked with the batch; else retried after Config.Backoff, parked at MaxAttempts
					},
				})
				// end snippet
				done <- err
			}()
			awaitStats(t, "8 rows done, 1 parked, 1 waiting", c.Stats, func(st claim.Stats) bool {
				return st.Done == 8 && st.Failed == 1 && st.Pending == 1
			}, nil)
			cancel()
			require.NoError(t, <-done)
			var status, lastErr string
			var attempts int
			require.NoError(t, e.raw.QueryRowContext(context.Background(), e.rebind(fmt.Sprintf(
				"SELECT status, attempts, last_error FROM %s WHERE openid = ?", cfg.Table)), "o5").Scan(&status, &attempts, &lastErr))
			require.Equal(t, []any{"FAILED", 1, "send o5: no such user"}, []any{status, attempts, lastErr}, "parked at its first attempt")
			rows, err := c.List(context.Background(), claim.Scheduled, 0, 10)
			require.NoError(t, err)
			require.Len(t, rows, 1)
			require.Equal(t, "rate limited: retry in 1h0m0s", rows[0].Error)
			require.InDelta(t, time.Hour.Seconds(), rows[0].RunIn.Seconds(), 60, "waits for the hour the API asked")
		})
	}
}

// docs/claim.md, "Draining, and many tasks in one pool": a cron job drains
// the tasks due, in turn, and returns; every row is sent exactly once,
// rows of tasks not listed are left alone.
func TestSnippetDocsClaimDrain(t *testing.T) {
	t.Parallel()
	for _, en := range engines {
		t.Run(en.kind, func(t *testing.T) {
			t.Parallel()
			e := open(t, en)
			cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: tableName("drain"), Columns: []string{"openid"},
				Scope: []string{"task_id"}}, ScopeValues: []any{0}, BatchSize: 5}
			createTable(t, e, cfg)
			insertRows(t, e, cfg.Table, []string{"task_id", "openid"}, 40, func(i int) []any {
				return []any{1 + i%4, fmt.Sprintf("o%d", i)} // tasks 1 to 4, 10 rows each
			})
			c, err := claim.New(e.d, cfg, func(m *Msg) []any { return []any{&m.OpenID} })
			require.NoError(t, err)
			tasks := []int64{1, 2, 3}
			var sent sync.Map
			send := func(_ context.Context, openID string) error {
				_, again := sent.LoadOrStore(openID, true)
				require.False(t, again, "sent twice: %s", openID)
				return nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// snippet: docs-claim-drain
			scopes := make([][]any, 0, len(tasks))
			for _, id := range tasks { // the tasks due now, as the job lists them
				scopes = append(scopes, []any{id})
			}
			err = c.Run(ctx, claim.WorkerConfig[Msg]{
				Workers:       8,
				Drain:         true,   // return once nothing is left to claim now
				Scopes:        scopes, // one pool of workers, the tasks in turn
				ScopeInFlight: 200,    // at most 200 rows of one task at once
				Handler: func(ctx context.Context, r claim.Row[Msg]) error {
					return send(ctx, r.Value.OpenID)
				},
			})
			// end snippet
			require.NoError(t, err)
			require.NoError(t, ctx.Err())
			n := 0
			sent.Range(func(any, any) bool { n++; return true })
			require.Equal(t, 30, n)
			for task, pending := range map[int]int64{1: 0, 2: 0, 3: 0, 4: 10} {
				v, err := c.Scope(task)
				require.NoError(t, err)
				st, err := v.Stats(context.Background())
				require.NoError(t, err)
				require.Equal(t, [4]int64{pending, 0, 10 - pending, 0}, [4]int64{st.Pending, st.Processing, st.Done, st.Failed},
					"task %d: pending, processing, done, failed", task)
			}
		})
	}
}

// The pause section of docs/claim.md: the snippet creates the pause table
// and pauses task 42; a claimer configured by it claims nothing of task 42
// until the resume, and task 7 meanwhile.
func TestSnippetDocsClaimPause(t *testing.T) {
	t.Parallel()
	e := open(t, engines[0])
	d, ctx := e.d, ctxT(t)
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "xxx_task_target", Columns: []string{"openid"},
		Scope: []string{"task_id"}}, ScopeValues: []any{42}}
	createTable(t, e, cfg)
	insertRows(t, e, cfg.Table, []string{"task_id", "openid"}, 6, func(i int) []any {
		return []any{[]int{42, 7}[i%2], fmt.Sprintf("o%d", i)}
	})
	run := func() error {
		// snippet: docs-claim-pause
		// Once, like the claim table: CREATE TABLE IF NOT EXISTS claimlock_pauses.
		if err := claim.CreatePauseTable(ctx, d, ""); err != nil {
			return err
		}
		// Claimers honour the pauses of that table (PauseRefresh: 1 s by default).
		cfg.PauseTable = claim.DefaultPauseTable

		// An operator, anywhere: pause task 42 of xxx_task_target.
		p, err := claim.NewPauses(d, "")
		if err != nil {
			return err
		}
		_, err = p.Pause(ctx, "xxx_task_target", []any{42}, claim.PauseNote{Reason: "provider down", By: "ana"})
		if err != nil {
			return err
		}
		// end snippet
		return nil
	}
	require.NoError(t, run())
	c, err := claim.New(d, cfg, func(m *Msg) []any { return []any{&m.OpenID} })
	require.NoError(t, err)
	_, err = c.Claim(ctx)
	require.ErrorIs(t, err, claim.ErrPaused)
	seven, err := c.Scope(7)
	require.NoError(t, err)
	b, err := seven.Claim(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, b.Len())
	p, err := claim.NewPauses(d, "")
	require.NoError(t, err)
	list, err := p.List(ctx, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "ana", list[0].By)
	ok, err := p.Resume(ctx, "xxx_task_target", []any{42})
	require.NoError(t, err)
	require.True(t, ok)
	// PauseRefresh (a second) passes before the claimer reads the resume.
	await.Until(t, "the resume reaches the claimer", time.Minute, func() (bool, string) {
		b, err := c.Claim(ctx)
		return err == nil && b.Len() == 3, fmt.Sprint(err)
	})
}
