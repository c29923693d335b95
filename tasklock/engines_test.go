package tasklock_test

import (
	"context"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

// engine opens isolated databases of one engine. dsn creates a fresh
// database (file, schema or database) for the test; connect opens a dialect
// on it, also from a child process.
type engine struct {
	name    string
	dsn     func(t testing.TB) string
	connect func(ctx context.Context, dsn string) (dialect.Dialect, func(), error)
}

// engines is every engine the tests run on.
var engines = func() []engine {
	var out []engine
	for _, e := range testengine.All {
		out = append(out, engine{
			name: e.Name,
			dsn:  e.DSN,
			connect: func(ctx context.Context, dsn string) (dialect.Dialect, func(), error) {
				c, closeFn, err := testengine.Connect(ctx, e.Name, dsn, 0, dialect.Options{})
				if err != nil {
					return nil, nil, err
				}
				return c.Dialect, closeFn, nil
			},
		})
	}
	return out
}()

func engineByName(name string) (engine, bool) {
	for _, e := range engines {
		if e.name == name {
			return e, true
		}
	}
	return engine{}, false
}

// open returns a dialect on a fresh database, closed when the test ends.
func (e engine) open(t testing.TB) dialect.Dialect {
	t.Helper()
	return e.openDSN(t, e.dsn(t))
}

func (e engine) openDSN(t testing.TB, dsn string) dialect.Dialect {
	t.Helper()
	d, closeFn, err := e.connect(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(closeFn)
	return d
}

// forEachEngine runs fn as a parallel subtest per engine.
func forEachEngine(t *testing.T, fn func(t *testing.T, e engine)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}

const leaseTable = "leases"

// keyed creates the library-managed key table on d and returns a Locker on
// it with cfg (Table and, when zero, TTL filled in). The table is verified
// here, so that tests timing an Acquire time only its statement.
func keyed(t testing.TB, d dialect.Dialect, cfg tasklock.Config) *tasklock.Locker {
	t.Helper()
	require.NoError(t, tasklock.CreateTable(context.Background(), d, leaseTable))
	cfg.Table = tasklock.KeyTable(leaseTable)
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Second
	}
	k, err := tasklock.New(d, cfg)
	require.NoError(t, err)
	require.NoError(t, k.Verify(context.Background()))
	return k
}

// setup opens a fresh database of e and returns a keyed Locker on it.
func setup(t testing.TB, e engine, cfg tasklock.Config) (*tasklock.Locker, dialect.Dialect) {
	t.Helper()
	d := e.open(t)
	return keyed(t, d, cfg), d
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// deadlineOf returns l's local deadline (every lease has one).
func deadlineOf(l *tasklock.Lease) time.Time {
	d, _ := l.Deadline()
	return d
}
