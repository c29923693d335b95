package dialecttest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/store/render"
	"github.com/claimlock/claimlock/internal/testkit/lockwait"
)

// testLockOrder: a heartbeat and a release, which write every row their
// token holds, and the row locks of an ack in the caller's transaction
// (of the keys listed) lock those rows in key order (text keys in byte order),
// whatever the rows' physical order, the order in which writers that lock
// several of the same rows lock them (the coalesce package's dirty marks
// and multi-key flushes). Two rows are held by one token, the row of the
// higher key written first; a transaction locks the lower key's row; the
// heartbeat (or release) starts and waits for it; the transaction then
// locks the higher key's row, which the waiting statement must not hold.
// Locked in the physical order, the statement held it while it waited and
// the server found a deadlock. The test waits until the server shows the
// statement waiting for the transaction (package lockwait), and runs it
// as bound, without the store's retries, which would retry a deadlock
// away. On PostgreSQL the text key column has a collation in which "a"
// sorts before "B", so only byte order passes. SQLite has one writer and
// no row locks.
func testLockOrder(t *testing.T, h Harness) {
	d, _ := h.Open(t)
	if d.Capabilities().Engine == dialect.EngineSQLite {
		t.Logf("%s: one writer, no row locks", d.Capabilities().Engine)
		return
	}
	kinds := []struct {
		name   string
		kind   dialect.IDKind
		lo, hi any
	}{
		{"int", dialect.IDInt, int64(1), int64(2)},
		// "B" < "a" in byte order, the other way round in most
		// collations that ignore case first.
		{"text", dialect.IDText, "B", "a"},
	}
	literal := func(v any) string {
		if s, ok := v.(string); ok {
			return "'" + s + "'"
		}
		return fmt.Sprint(v)
	}
	// Each statement runs as bound, without the store's retries: a deadlock
	// must fail the case, not be retried away.
	ops := []struct {
		name, stmt string
		keys       bool
		query      bool // a locking SELECT: it returns the rows it locked
	}{
		{"heartbeat", "heartbeat", false, false},
		{"release", "release", false, false},
		{"release keys", "release keys", true, false},
		// The row locks of an ack in the caller's transaction (AckTx).
		{"ack lock", "ack lock", true, true},
		// The same naming the primary key, where the engine has them
		// (MySQL, once the key column is found to be the primary key).
		{"release keys by key", "release keys by key", true, false},
		{"ack lock by key", "ack lock by key", true, true},
	}
	for _, k := range kinds {
		for _, op := range ops {
			t.Run(k.name+"/"+op.name, func(t *testing.T) {
				table := "cl_lockorder_" + k.name
				f := newFixture(t, h, func(c *dialect.ClaimTable) { c.IDKind = k.kind; c.Table = table })
				ctx := ctxT(t)
				args := &render.Args{Token: "tok-lockorder"}
				if op.keys {
					args.Keys = []any{k.hi, k.lo}
				}
				q, qargs, ok := f.cs.(*store.Claims).Bind(op.stmt, args)
				if !ok && strings.HasSuffix(op.stmt, " by key") {
					t.Logf("%s: no statement naming the primary key", d.Capabilities().Engine)
					return
				}
				require.True(t, ok, "statement %q", op.stmt)
				if k.kind == dialect.IDText && d.Capabilities().Engine == dialect.EnginePostgreSQL {
					// A key column whose collation orders "a" before "B":
					// the lock order must still be byte order.
					var icu int
					require.NoError(t, f.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_collation WHERE collname = 'und-x-icu'").Scan(&icu))
					if icu == 0 {
						t.Log("no ICU collation: the key column keeps the database's collation")
					} else {
						_, err := f.db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN %s TYPE text COLLATE "und-x-icu"`, f.q(table), f.q(f.spec.ID)))
						require.NoError(t, err)
					}
				}
				// One statement writes both rows, the higher key's first, with
				// one claimed-at, as a claim that did not wrap round the key
				// order gives its batch. On MySQL a statement may reach a
				// token's rows through the reap index (status, claimed-at,
				// key), which is in key order only among rows of one
				// claimed-at: there a wrapped claim's rows can deadlock,
				// which InnoDB detects at once (docs/coalesce.md).
				row := func(key any) string {
					return fmt.Sprintf("(%s, 1, 'p', 'PROCESSING', 'tok-lockorder', CURRENT_TIMESTAMP)", literal(key))
				}
				_, err := f.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s, %s, %s, %s, %s, %s) VALUES %s, %s",
					f.q(table), f.q(f.spec.ID), f.q(f.spec.Scope[0]), f.q("payload"), f.q(f.spec.Status), f.q(f.spec.Token), f.q(f.spec.ClaimedAt), row(k.hi), row(k.lo)))
				require.NoError(t, err)
				lockRow := fmt.Sprintf("UPDATE %s SET %s = %s + 1 WHERE %s = ", f.q(table), f.q(f.spec.Version), f.q(f.spec.Version), f.q(f.spec.ID))

				tx, err := f.db.BeginTx(ctx, nil)
				require.NoError(t, err)
				defer func() { _ = tx.Rollback() }()
				_, err = tx.ExecContext(ctx, lockRow+literal(k.lo))
				require.NoError(t, err)

				sess, err := lockwait.Of(ctx, f.db, tx, d.Capabilities().Engine)
				require.NoError(t, err)
				done := make(chan lockOrderResult, 1)
				go func() {
					done <- runLockOrder(ctx, f.db, op.query, q, qargs)
				}()
				require.NoError(t, sess.Await(ctx, 10*time.Second, func() error {
					select {
					case r := <-done:
						return fmt.Errorf("the %s did not wait for the lower key's row: %d rows, %v", op.name, r.n, r.err)
					default:
						return nil
					}
				}), "the %s waits for the lower key's row", op.name)
				locked := make(chan error, 1)
				go func() {
					_, err := tx.ExecContext(ctx, lockRow+literal(k.hi))
					locked <- err
				}()
				select {
				case err := <-locked:
					require.NoError(t, err, "locking the higher key's row after the lower one's")
				case <-time.After(5 * time.Second):
					t.Fatalf("the higher key's row is held by the %s waiting for the lower one's: locked out of key order", op.name)
				}
				require.NoError(t, tx.Commit())
				r := <-done
				require.NoError(t, r.err)
				require.Equal(t, 2, r.n, "the %s took both rows", op.name)
			})
		}
	}
}

// lockOrderResult is what a statement of testLockOrder did: rows written
// (or locked and returned), or its error.
type lockOrderResult struct {
	n   int
	err error
}

// runLockOrder runs a statement of testLockOrder on its own: an UPDATE
// counts the rows it wrote, a locking SELECT (query) the rows it returned.
func runLockOrder(ctx context.Context, db *sql.DB, query bool, q string, args []any) lockOrderResult {
	if !query {
		res, err := db.ExecContext(ctx, q, args...)
		if err != nil {
			return lockOrderResult{0, err}
		}
		n, err := res.RowsAffected()
		return lockOrderResult{int(n), err}
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return lockOrderResult{0, err}
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return lockOrderResult{n, rows.Err()}
}
