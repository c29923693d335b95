package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/await"
	"github.com/claimlock/claimlock/internal/testkit/dbtest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
)

// Environment variables of this package.
const (
	envLong    = "CLAIMLOCK_CHAOS_LONG"
	envRestart = "CLAIMLOCK_CHAOS_RESTART"
)

// long reports whether the big sizes were asked for.
func long() bool { return os.Getenv(envLong) == "1" }

// size picks the short or the long figure.
func size(short, big int) int {
	if long() {
		return big
	}
	return short
}

// The tables every scenario uses.
const (
	itemsTable = "chaos_items"
	sendsTable = "chaos_sends"
	leaseTable = "chaos_leases"
	fenceTable = "chaos_fenced"
	taskID     = 1
)

// engine is one database engine under test.
type engine struct {
	name   string
	driver string
	// dsn returns a DSN of a fresh, isolated database.
	dsn func(t *testing.T) string
}

func engines() []engine {
	return []engine{
		{"sqlite", testengine.SQLite, func(t *testing.T) string { return dbtest.SQLitePath(t) }},
		{"postgres", testengine.Postgres, func(t *testing.T) string { return dbtest.PostgresDSN(t) }},
		{"mariadb", testengine.MySQL, func(t *testing.T) string { return dbtest.MySQLDSN(t) }},
	}
}

// db is an open database: the dialect for the library and a database/sql
// handle for the test's own statements (the sends log, the checks, the
// faults).
type db struct {
	driver string
	d      dialect.Dialect
	sql    *sql.DB
	close  func()
}

// open connects to driver at dsn.
func open(ctx context.Context, driver, dsn string) (*db, error) {
	c, closeFn, err := testengine.Connect(ctx, driver, dsn, 0, dialect.Options{})
	if err != nil {
		return nil, err
	}
	return &db{driver: driver, d: c.Dialect, sql: c.DB, close: closeFn}, nil
}

// openT opens the database for the test and closes it at the end.
func openT(t *testing.T, driver, dsn string) *db {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := open(ctx, driver, dsn)
	require.NoError(t, err)
	t.Cleanup(d.close)
	return d
}

// ph is the n-th (1-based) placeholder.
func (d *db) ph(n int) string {
	if d.driver == "postgres" {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// q quotes a constant identifier through the dialect.
func (d *db) q(name string) string {
	s, err := store.QuoteIdent(d.d, "name", name)
	if err != nil {
		panic(err)
	}
	return s
}

// sqlf renders a statement: {name} is a quoted identifier, $n a placeholder.
func (d *db) sqlf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{':
			j := strings.IndexByte(s[i:], '}')
			b.WriteString(d.q(s[i+1 : i+j]))
			i += j
		case c == '$' && i+1 < len(s) && s[i+1] >= '1' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(s[i+1 : j])
			b.WriteString(d.ph(n))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// withParam adds a connection parameter to a DSN (PostgreSQL URL or
// key=value form, or go-sql-driver/mysql form).
func withParam(driver, dsn, key, value string) string {
	if driver == "mysql" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + key + "=" + url.QueryEscape(value)
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value
}

// itemsConfig is the claim configuration of the items table, shared by the
// workers, the reaper and the checks. attempts is read back into each row
// so that the sends log records which attempt sent it.
func itemsConfig(batch int) claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: itemsTable, Attempts: "attempts", Columns: []string{"attempts"}, Scope: []string{"task_id"},
		},
		ScopeValues: []any{taskID}, RequireScope: true, BatchSize: batch,
	}
}

// item is the part of a row the sender reads.
type item struct{ Attempts int64 }

func itemFields(r *item) []any { return []any{&r.Attempts} }

// setup creates the items table with its recommended indexes, the sends
// log, the lease and fence tables, and rows pending items of the task plus
// a few rows of another task that must never change.
func setup(t *testing.T, d *db, rows int) {
	t.Helper()
	ctx := context.Background()
	spec, err := itemsConfig(10).Resolve()
	require.NoError(t, err)
	itemsDef := store.ClaimTableDef(spec)
	for i := range itemsDef.Columns {
		if itemsDef.Columns[i].Name == "attempts" {
			// Columns lists attempts too, so it appears twice.
			itemsDef.Columns = append(itemsDef.Columns[:i+1:i+1], dedupe(itemsDef.Columns[i+1:], "attempts")...)
			break
		}
	}
	defs := []store.TableDef{
		itemsDef,
		{Table: sendsTable, PrimaryKey: []string{"row_id", "token"}, Columns: []store.ColumnDef{
			{Name: "row_id", Type: store.TypeInt, NotNull: true},
			{Name: "token", Type: store.TypeText, Len: store.MaxTokenLen, NotNull: true},
			{Name: "pid", Type: store.TypeInt, NotNull: true},
			{Name: "attempt", Type: store.TypeInt, NotNull: true},
		}},
		store.LeaseTableDef(leaseTable, 64),
		{Table: fenceTable, PrimaryKey: []string{"k"}, Columns: []store.ColumnDef{
			{Name: "k", Type: store.TypeText, Len: 64, NotNull: true},
			{Name: "fence", Type: store.TypeInt, NotNull: true},
			{Name: "writer", Type: store.TypeText, Len: 64, NotNull: true},
		}},
	}
	for _, def := range defs {
		ddl, err := store.CreateTableDDL(d.d, def)
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, d.d, ddl))
	}
	c, err := claim.New(d.d, itemsConfig(10), itemFields)
	require.NoError(t, err)
	missing, err := c.MissingIndexes(ctx)
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, d.d, missing))
	insertItems(t, d, taskID, rows)
	insertItems(t, d, taskID+1, 3)
	_, err = d.sql.ExecContext(ctx, d.sqlf("INSERT INTO {chaos_fenced} ({k}, {fence}, {writer}) VALUES ('job', 0, 'none')"))
	require.NoError(t, err)
}

func dedupe(cols []store.ColumnDef, name string) []store.ColumnDef {
	var out []store.ColumnDef
	for _, c := range cols {
		if c.Name != name {
			out = append(out, c)
		}
	}
	return out
}

// insertItems adds n pending rows of task.
func insertItems(t *testing.T, d *db, task, n int) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 500 {
		end := min(start+500, n)
		var b strings.Builder
		b.WriteString(d.sqlf("INSERT INTO {chaos_items} ({task_id}) VALUES "))
		args := make([]any, 0, end-start)
		for i := start; i < end; i++ {
			if i > start {
				b.WriteString(", ")
			}
			args = append(args, task)
			b.WriteString("(" + d.ph(len(args)) + ")")
		}
		_, err := d.sql.ExecContext(ctx, b.String(), args...)
		require.NoError(t, err)
	}
}

// stats counts the task's rows by status.
func stats(ctx context.Context, d *db) (claim.Stats, error) {
	c, err := claim.New(d.d, itemsConfig(1), itemFields)
	if err != nil {
		return claim.Stats{}, err
	}
	return c.Stats(ctx)
}

// waitDrained polls until the task has nothing pending or processing, and
// returns how long that took. It fails when no row has reached a final
// state for stall (long enough for the scenario's outages and reap
// timeouts: a hang, not a pause), or after limit.
func waitDrained(t *testing.T, d *db, limit, stall time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	await.Progress(t, "the task to drain (nothing pending or processing)", stall, limit, func() (await.State, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := stats(ctx, d)
		if err != nil { // a server away for a while: no progress
			return await.State{Progress: math.MinInt64, Seen: fmt.Sprintf("stats failed: %v", err)}, nil
		}
		return await.State{Done: st.Pending == 0 && st.Processing == 0, Progress: st.Done + st.Failed - st.Pending - st.Processing,
			Seen: fmt.Sprintf("%+v", st)}, nil
	})
	return time.Since(start)
}
