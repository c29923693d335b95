package scaleout

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/dialect/postgres"
)

// pool is one connection pool workers share: the library's dialect, and a
// database/sql handle on the same servers for the test's own statements.
type pool struct {
	label  string
	d      dialect.Dialect
	db     *sql.DB
	dollar bool // PostgreSQL placeholders
	// retries counts the library's retries by operation ("claim", "ack",
	// "lease acquire", ...).
	retries *opCounter
}

// opCounter counts retries by operation name.
type opCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

// options returns dialect options whose retry hook counts into c.
func (c *opCounter) options() dialect.Options {
	return dialect.Options{Retry: dialect.RetryPolicy{OnRetry: func(op string, _ int, _ error) {
		c.mu.Lock()
		c.n[op]++
		c.mu.Unlock()
	}}}
}

// snapshot copies the counts.
func (c *opCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		m[k] = v
	}
	return m
}

func newOpCounter() *opCounter { return &opCounter{n: map[string]int64{}} }

// openMySQL opens one MariaDB node the way an application would
// (mysql.Open: READ COMMITTED, causal reads on Galera).
func openMySQL(t *testing.T, label, dsn string, maxConns int) *pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := mysql.Open(ctx, dsn)
	require.NoError(t, err, label)
	return newMySQLPool(t, ctx, label, db, maxConns)
}

// openMySQLCluster opens one pool spread over every node (mysql.OpenCluster).
func openMySQLCluster(t *testing.T, label string, dsns []string, maxConns int) *pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := mysql.OpenCluster(ctx, dsns)
	require.NoError(t, err, label)
	return newMySQLPool(t, ctx, label, db, maxConns)
}

func newMySQLPool(t *testing.T, ctx context.Context, label string, db *sql.DB, maxConns int) *pool {
	t.Helper()
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	t.Cleanup(func() { db.Close() })
	rc := newOpCounter()
	d, err := mysql.New(ctx, db, rc.options())
	require.NoError(t, err, label)
	return &pool{label: label, d: d, db: db, retries: rc}
}

// openPG opens PostgreSQL through pgxpool (the native path). dsn may list
// several hosts with target_session_attrs=read-write: new connections then
// go to whichever is the primary.
func openPG(t *testing.T, label, dsn string, maxConns int) *pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err, label)
	cfg.MaxConns = int32(maxConns)
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pp, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err, label)
	rc := newOpCounter()
	d, err := postgres.New(ctx, pp, rc.options())
	if err != nil {
		pp.Close()
	}
	require.NoError(t, err, label)
	db := stdlib.OpenDBFromPool(pp)
	t.Cleanup(func() { db.Close(); pp.Close() })
	return &pool{label: label, d: d, db: db, dollar: true, retries: rc}
}
