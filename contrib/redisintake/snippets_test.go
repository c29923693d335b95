package redisintake_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/contrib/redisintake"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

// The guide's snippets, verbatim between the "snippet" markers, on SQLite
// and the test Redis: three writes (one stale), a drain and a flush, and
// the profile row holds the newest state.
func TestSnippetGuide(t *testing.T) {
	t.Parallel()
	rdb, prefix := newRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	db, err := sqlite.Open(t.TempDir() + "/app.db")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	require.NoError(t, coalesce.CreateTables(ctx, d, db, coalesce.Config{}))
	_, err = db.ExecContext(ctx, "CREATE TABLE profiles (k TEXT PRIMARY KEY, version INTEGER NOT NULL, body BLOB NOT NULL)")
	require.NoError(t, err)
	co, err := coalesce.New(d, db, coalesce.Config{})
	require.NoError(t, err)
	var out []string
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	goRun := func(run func(context.Context) error) { wg.Go(func() { _ = run(ctx) }) }

	// snippet: redisintake-accept
	in, err := redisintake.New(rdb, co, redisintake.Config{Prefix: prefix})
	if err != nil {
		panic(err)
	}
	for v, name := range []string{"Ada", "Ada L."} {
		r, err := in.Accept(ctx, redisintake.Write{Key: "user:42", Version: int64(v + 1), State: []byte(name)})
		if err != nil {
			panic(err)
		}
		out = append(out, fmt.Sprint("accepted version ", r.Version))
	}
	// A late write of an older version: refused (an HTTP 409).
	_, err = in.Accept(ctx, redisintake.Write{Key: "user:42", Version: 1, State: []byte("Ada")})
	out = append(out, err.Error())
	// end snippet

	// snippet: redisintake-flush
	f, err := co.Flusher(coalesce.FlusherConfig{
		Fold: func(ctx context.Context, tx *sql.Tx, key string, changes []coalesce.Record) error {
			last, _ := redisintake.Latest(changes)
			// The newest state, written only over an older one.
			_, err := tx.ExecContext(ctx, `INSERT INTO profiles (k, version, body) VALUES (?, ?, ?)
				ON CONFLICT (k) DO UPDATE SET version = excluded.version, body = excluded.body
				WHERE excluded.version > profiles.version`, key, last.Seq, last.Payload)
			return err
		},
	})
	if err != nil {
		panic(err)
	}
	goRun(in.Run) // Redis to the coalescer's tables
	goRun(f.Run)  // the coalescer's tables to profiles
	// end snippet

	require.Equal(t, []string{"accepted version 1", "accepted version 2",
		`coalesce: stale sequence: key "user:42" source "redis": 1 is not above 2`}, out)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var v int64
		var body string
		err := db.QueryRowContext(ctx, "SELECT version, body FROM profiles WHERE k = 'user:42'").Scan(&v, &body)
		if err == nil && v == 2 {
			require.Equal(t, "Ada L.", body)
			break
		}
		require.True(t, time.Now().Before(deadline), "profile not persisted in 30 s (%v)", err)
		time.Sleep(20 * time.Millisecond)
	}
	accepted, persisted, err := in.Versions(ctx, "user:42")
	require.NoError(t, err)
	require.Equal(t, [2]int64{2, 2}, [2]int64{accepted, persisted})
}
