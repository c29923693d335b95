package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

// requireOnce checks that an error line of command cmd names claimctl, then
// the command, once each, and that no part of the message repeats the one
// before it ("stats: stats: ..."). The library's error follows, naming its
// package and operation once ("claimctl: reap: zombie: sweep jobs: ...",
// "claimctl: stats: claim: stats: ...").
func requireOnce(t *testing.T, cmd, line string) {
	t.Helper()
	line = strings.TrimSuffix(line, "\n")
	rest, ok := strings.CutPrefix(line, "claimctl: ")
	require.True(t, ok, line)
	parts := strings.Split(rest, ": ")
	require.Contains(t, []string{cmd, strings.ReplaceAll(cmd, "-", " ")}, parts[0], "the command comes first: %s", line)
	for i, p := range parts {
		if i > 0 {
			require.NotEqual(t, parts[i-1], p, "%q repeated: %s", p, line)
		}
		require.NotEqual(t, "claimctl", p, line)
	}
}

// A database that fails an operation fails every command with one line
// that names claimctl and the command once, then the operation and its
// cause, each once: reads blocked by a table lock past the command's
// timeout, and writes refused by a trigger once their reads went through.
// (PostgreSQL: how claimctl words an error does not depend on the engine.)
func TestErrorsNameTheCommandOnce(t *testing.T) {
	t.Parallel()
	e, _ := testengine.ByName(testengine.Postgres)
	f := obstest.New(t, e, 3, 0)
	ctx := context.Background()
	require.NoError(t, tasklock.CreateTable(ctx, f.Dialect, "leases"))
	k, err := tasklock.New(f.Dialect, tasklock.Config{Table: tasklock.KeyTable("leases"), TTL: time.Hour})
	require.NoError(t, err)
	_, err = k.Acquire(ctx, "a")
	require.NoError(t, err)
	conf := writeConfig(t, f)
	// One stale processing row (reap), one parked (unpark), one waiting
	// for its run-at (retry-now).
	f.Exec(t, "UPDATE jobs SET status = 'PROCESSING', token = 'dead', attempts = 1, claimed_at = now() - interval '1 hour' WHERE id = (SELECT MIN(id) FROM jobs)")
	f.Exec(t, "UPDATE jobs SET status = 'FAILED', attempts = 3 WHERE id = (SELECT MIN(id) + 1 FROM jobs)")
	f.Exec(t, "UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = (SELECT MAX(id) FROM jobs)")

	// check runs the commands, then checks each one's error. Commands that
	// wait for their timeout run at once (the timeout must leave room for
	// connecting on a loaded machine); commands that fail at once run one
	// after the other, since the reaper's statements skip rows another
	// statement has locked: two reaps at once may leave one with nothing
	// to do (and nothing to fail on).
	check := func(t *testing.T, cause string, concurrent bool, cases [][]string) {
		stderr := make([]string, len(cases))
		codes := make([]int, len(cases))
		runOne := func(i int) {
			var out, errOut bytes.Buffer
			codes[i] = run(ctx, append(cases[i], "-config", conf, "-timeout", "5s"), strings.NewReader(""), &out, &errOut)
			stderr[i] = errOut.String()
		}
		var wg sync.WaitGroup
		for i := range cases {
			if concurrent {
				wg.Go(func() { runOne(i) })
			} else {
				runOne(i)
			}
		}
		wg.Wait()
		for i, args := range cases {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				require.Equal(t, exitFailed, codes[i], stderr[i])
				require.Contains(t, stderr[i], cause)
				require.Equal(t, 1, strings.Count(stderr[i], "\n"), "one line: %q", stderr[i])
				requireOnce(t, args[0], stderr[i])
			})
		}
	}
	t.Run("reads", func(t *testing.T) {
		tx, err := f.DB.BeginTx(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback() })
		_, err = tx.ExecContext(ctx, "LOCK TABLE jobs, leases IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		check(t, "deadline exceeded", true, [][]string{
			{"stats"}, {"stats", "-scope", "42"}, {"stuck", "-scope", "42"}, {"parked", "-scope", "42"}, {"scheduled", "-scope", "42"},
			{"unpark", "-scope", "42", "-yes"}, {"reap", "-scope", "42", "-older", "1m", "-yes"},
			{"reap", "-all-scopes", "-older", "1m", "-yes"}, {"leases"}, {"leases", "-key", "a"}, {"force-release", "-key", "a", "-yes"},
		})
	})
	t.Run("writes", func(t *testing.T) {
		// A command of the reads above whose cancellation did not reach
		// the server ran when the lock went; wait for the table's locks to
		// go, then set the rows up again.
		require.Eventually(t, func() bool {
			var n int
			err := f.DB.QueryRowContext(ctx, "SELECT count(*) FROM pg_locks WHERE relation IN ('jobs'::regclass, 'leases'::regclass) AND pid <> pg_backend_pid()").Scan(&n)
			return err == nil && n == 0
		}, time.Minute, 50*time.Millisecond)
		f.Exec(t, "UPDATE jobs SET status = 'PROCESSING', token = 'dead', attempts = 1, claimed_at = now() - interval '1 hour' WHERE id = (SELECT MIN(id) FROM jobs)")
		f.Exec(t, "UPDATE jobs SET status = 'FAILED', attempts = 3 WHERE id = (SELECT MIN(id) + 1 FROM jobs)")
		f.Exec(t, "UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = (SELECT MAX(id) FROM jobs)")
		if _, err := k.Acquire(ctx, "a"); err != nil && !errors.Is(err, dialect.ErrLeaseHeld) {
			require.NoError(t, err)
		}
		// Reads go through; every write fails.
		f.Exec(t, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`)
		f.Exec(t, "CREATE TRIGGER refuse BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse()")
		f.Exec(t, "CREATE TRIGGER refuse BEFORE UPDATE ON leases FOR EACH ROW EXECUTE FUNCTION refuse()")
		check(t, "refused by the test", false, [][]string{
			{"unpark", "-scope", "42", "-yes"}, {"unpark", "-scope", "42", "-ids", "1,2,3", "-yes"},
			{"retry-now", "-scope", "42", "-yes"}, {"reap", "-scope", "42", "-older", "1m", "-yes"},
			{"reap", "-all-scopes", "-older", "1m", "-yes"}, {"force-release", "-key", "a", "-yes"},
		})
	})
}
