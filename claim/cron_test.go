package claim_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// cronFixture is the cron story's schema as users have it: a task table
// holding the task lock and a target table with one row per recipient.
type cronFixture struct {
	e            *env
	task, target string
	mu           sync.Mutex
	sends        map[string]int
	selects      atomic.Int64 // the rounds' selects or claims so far
}

// sending plays a long send: it lasts until another round has selected
// or claimed since the caller's select or claim, the mine-th (at most a
// second: the other run may have ended). On a slow machine a fixed pause
// may end before the other run gets the task lock.
func (f *cronFixture) sending(mine int64) {
	for deadline := time.Now().Add(time.Second); f.selects.Load() == mine && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

func newCronFixture(t *testing.T, e *env, targets int) *cronFixture {
	f := &cronFixture{e: e, task: tableName("xxx_task"), target: tableName("xxx_task_target"),
		sends: map[string]int{}}
	ctx := context.Background()
	ddl, err := store.CreateTableDDL(e.d, store.TableDef{Table: f.task, PrimaryKey: []string{"id"}, Columns: []store.ColumnDef{
		{Name: "id", Type: store.TypeInt, NotNull: true},
		{Name: "status", Type: store.TypeText, Len: 16, NotNull: true},
		{Name: "lock_at", Type: store.TypeTime},
	}})
	require.NoError(t, err)
	require.NoError(t, store.ExecDDL(ctx, e.d, ddl))
	insertRows(t, e, f.task, []string{"id", "status"}, 1, func(int) []any { return []any{42, "IDLE"} })
	createTable(t, e, f.config(dialect.StrategyAuto), store.ColumnDef{Name: "openid", Type: store.TypeText, Len: 64, NotNull: true})
	insertRows(t, e, f.target, []string{"task_id", "openid"}, targets, func(i int) []any {
		return []any{42, fmt.Sprintf("openid-%04d", i)}
	})
	return f
}

func (f *cronFixture) config(s dialect.Strategy) claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: f.target, Token: "cron_token", ClaimedAt: "send_at",
			Done: dialect.StatusString("SENT"), Columns: []string{"openid"}, Scope: []string{"task_id"},
		},
		ScopeValues: []any{42}, RequireScope: true, BatchSize: 50, Strategy: s,
	}
}

// send plays the external side effect (a message to a user).
func (f *cronFixture) send(openid string) {
	f.mu.Lock()
	f.sends[openid]++
	f.mu.Unlock()
}

func (f *cronFixture) duplicates() (dups, distinct int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.sends {
		dups += n - 1
	}
	return dups, len(f.sends)
}

// lockTask is the legacy task lock; it spins until the lock is free.
func (f *cronFixture) lockTask(t *testing.T) {
	for f.e.exec(t, "UPDATE "+f.task+" SET status = 'RUNNING' WHERE id = ? AND status = 'IDLE'", 42) != 1 {
		time.Sleep(time.Millisecond)
	}
}

func (f *cronFixture) unlockTask(t *testing.T) {
	f.e.exec(t, "UPDATE "+f.task+" SET status = 'IDLE' WHERE id = ?", 42)
}

// legacyRound is the old algorithm: under the task lock, select pending
// targets, send, mark them sent. The lock is released early (as when a lock
// timeout is shorter than the sending), so another run starts meanwhile.
// It returns false when nothing was pending.
func (f *cronFixture) legacyRound(t *testing.T) bool {
	ctx := context.Background()
	f.lockTask(t)
	rows, err := f.e.raw.QueryContext(ctx, f.e.rebind("SELECT id, openid FROM "+f.target+
		" WHERE task_id = ? AND status = 'PENDING' ORDER BY id LIMIT 50"), 42)
	require.NoError(t, err)
	var ids []any
	var openids []string
	for rows.Next() {
		var id int64
		var o string
		require.NoError(t, rows.Scan(&id, &o))
		ids = append(ids, id)
		openids = append(openids, o)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	mine := f.selects.Add(1)
	f.unlockTask(t) // the deliberate early release
	if len(ids) == 0 {
		return false
	}
	for _, o := range openids {
		f.send(o)
	}
	f.sending(mine)
	in := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	f.e.exec(t, "UPDATE "+f.target+" SET status = 'SENT' WHERE id IN ("+in+")", ids...)
	return true
}

// claimerRound is the same run through the claimer, with the same early
// task-lock release.
func (f *cronFixture) claimerRound(t *testing.T, c *claim.Claimer[target]) bool {
	ctx := context.Background()
	f.lockTask(t)
	b, err := c.Claim(ctx)
	require.NoError(t, err)
	mine := f.selects.Add(1)
	f.unlockTask(t)
	if b.Len() == 0 {
		return false
	}
	for _, r := range b.Rows() {
		f.send(r.Value.OpenID)
	}
	f.sending(mine)
	require.NoError(t, b.AckAll(ctx))
	return true
}

func twoRuns(round func() bool) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for round() {
			}
		})
	}
	wg.Wait()
}

// TestCronDoubleSend reproduces the double send of a cron job guarded only
// by a task lock, then shows the claimer sending each target exactly once
// under the same schedule.
func TestCronDoubleSend(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env, s dialect.Strategy) {
		const targets = 300
		legacy := newCronFixture(t, e, targets)
		twoRuns(func() bool { return legacy.legacyRound(t) })
		dups, distinct := legacy.duplicates()
		require.Equal(t, targets, distinct)
		require.Positive(t, dups, "the task-lock-only algorithm sends duplicates")

		fixed := newCronFixture(t, e, targets)
		c, err := claim.New(e.d, fixed.config(s), func(x *target) []any { return []any{&x.OpenID} })
		require.NoError(t, err)
		twoRuns(func() bool { return fixed.claimerRound(t, c) })
		cdups, cdistinct := fixed.duplicates()
		require.Equal(t, targets, cdistinct)
		require.Zero(t, cdups, "the claimer never sends twice")
		st, err := c.Stats(context.Background())
		require.NoError(t, err)
		require.EqualValues(t, targets, st.Done)
		t.Logf("%s/%s: task lock only: %d duplicate sends of %d targets; claimer: %d", e.kind, s, dups, targets, cdups)
	})
}
