package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/internal/testkit/testtable"
	"github.com/claimlock/claimlock/tasklock"
)

// leaseShape is one lease table shape the library supports, how claimctl
// is told about it, and a key held in it.
type leaseShape struct {
	name string
	// def creates the table (nil: tasklock.CreateTable).
	def *testtable.Def
	// insert adds the row of key to a task table.
	insert string
	// spec is the library's description; conf is claimctl's, as config
	// file fields.
	spec dialect.LeaseTable
	conf map[string]any
	key  any
}

func leaseShapes() []leaseShape {
	col := func(name string, typ testtable.Type) testtable.Column {
		return testtable.Column{Name: name, Type: typ}
	}
	intKey := testtable.Column{Name: "id", Type: testtable.Int, NotNull: true}
	zero := dialect.StatusInt(0)
	custom := dialect.LeaseTable{
		Table: "job_lock", Key: "job", KeyKind: dialect.IDText, KeyMaxLen: 64, Owner: "holder", LockedAt: "taken_at",
		ExpiresAt: "until_at", Fence: "generation",
	}
	return []leaseShape{
		{
			name: "key table", spec: tasklock.KeyTable("lease_keys"), key: "nightly",
			conf: map[string]any{"lease-table": "lease_keys"},
		},
		{
			name: "task table",
			def: &testtable.Def{Table: "xxx_task", PrimaryKey: []string{"id"}, Columns: []testtable.Column{
				intKey, col("status", testtable.Int), col("lock_at", testtable.Time),
				{Name: "lock_owner", Type: testtable.Text, Len: testtable.TokenLen},
				{Name: "lock_fence", Type: testtable.Int, NotNull: true, Default: &zero},
			}},
			insert: "INSERT INTO xxx_task (id, status) VALUES (7, 0)",
			spec: func() dialect.LeaseTable {
				t := tasklock.TaskTable("xxx_task")
				t.Fence = "lock_fence"
				return t
			}(),
			conf: map[string]any{"lease-table": "xxx_task", "lease-kind": "task", "lease-fence": "lock_fence"},
			key:  int64(7),
		},
		{
			// The cron story's task table as it is: xxx_task(id, status,
			// lock_at) with whole-second lock times.
			name: "task table without owner",
			def: &testtable.Def{Table: "xxx_task", PrimaryKey: []string{"id"}, Columns: []testtable.Column{
				intKey, col("status", testtable.Int), col("lock_at", testtable.TimeSeconds),
			}},
			insert: "INSERT INTO xxx_task (id, status) VALUES (7, 0)",
			spec:   tasklock.TaskTableNoOwner("xxx_task"),
			conf:   map[string]any{"lease-table": "xxx_task", "lease-kind": "task-no-owner"},
			key:    int64(7),
		},
		{
			name: "custom table",
			def: &testtable.Def{Table: "job_lock", PrimaryKey: []string{"job"}, Columns: []testtable.Column{
				{Name: "job", Type: testtable.Text, Len: 64, NotNull: true},
				{Name: "holder", Type: testtable.Text, Len: testtable.TokenLen},
				col("taken_at", testtable.Time), col("until_at", testtable.Time),
				{Name: "generation", Type: testtable.Int, NotNull: true, Default: &zero},
			}},
			insert: "INSERT INTO job_lock (job) VALUES ('export')",
			spec:   custom,
			conf: map[string]any{
				"lease-table": "job_lock", "lease-kind": "task", "lease-key": "job", "lease-key-kind": "text", "lease-key-len": 64,
				"lease-owner": "holder", "lease-locked-at": "taken_at", "lease-expires-at": "until_at", "lease-fence": "generation",
			},
			key: "export",
		},
	}
}

// Every lease command works on every lease table shape the library
// supports (a key table, a task table with and without an owner column, a
// custom table), described in the config file like the claim table, on
// every engine: inspection matches the holder, listing needs an expiry
// column, force-release frees the lease (the holder's renewal then finds it
// lost) and asks first.
func TestLeaseShapes(t *testing.T) {
	t.Parallel()
	for _, e := range testengine.All {
		for _, s := range leaseShapes() {
			t.Run(e.Name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				c := testengine.Open(t, e, 4)
				if s.def == nil {
					require.NoError(t, tasklock.CreateTable(ctx, c.Dialect, s.spec.Table))
				} else {
					require.NoError(t, testtable.Create(ctx, c.Dialect, *s.def))
					_, err := c.DB.ExecContext(ctx, s.insert)
					require.NoError(t, err)
				}
				cfg := map[string]any{"driver": e.Name, "dsn": c.DSN}
				for k, v := range s.conf {
					cfg[k] = v
				}
				data, err := json.Marshal(cfg)
				require.NoError(t, err)
				conf := filepath.Join(t.TempDir(), "claimctl.json")
				require.NoError(t, os.WriteFile(conf, data, 0o600))

				// claimctl's description is the library's.
				o, err := parseOptions("leases", []string{"-config", conf})
				require.NoError(t, err)
				lt, err := o.leaseTable()
				require.NoError(t, err)
				require.Equal(t, s.spec, lt)

				k, err := tasklock.New(c.Dialect, tasklock.Config{Table: s.spec, TTL: time.Minute})
				require.NoError(t, err)
				l, err := k.Acquire(ctx, s.key)
				require.NoError(t, err)
				key := fmt.Sprint(s.key)

				code, out, stderr := ctl(t, "", "leases", "-config", conf, "-key", key, "-json")
				require.Equal(t, exitOK, code, stderr)
				var leases []leaseOut
				require.NoError(t, json.Unmarshal([]byte(out), &leases))
				require.Len(t, leases, 1)
				require.Equal(t, l.Owner(), leases[0].Owner)
				require.Equal(t, l.Fence(), leases[0].Fence)
				holder := l.Owner()
				if s.spec.Owner == "" {
					holder = unknownHold
				}
				require.Equal(t, holder, leases[0].Holder)
				if s.spec.ExpiresAt != "" {
					require.Equal(t, "held", leases[0].State)
					require.InDelta(t, 60, leases[0].RemainingSeconds, 10)
				} else {
					// Without -lease-ttl the holders' TTL is unknown: the
					// lease is locked since its lock time, expiry unknown.
					require.Equal(t, "locked", leases[0].State)
					require.Nil(t, leases[0].ExpiresAt)
					require.NotNil(t, leases[0].LockedAt)
					require.WithinDuration(t, time.Now(), *leases[0].LockedAt, 30*time.Second, "the lock time, not a raw stamp")
					require.Equal(t, noteNoTTL, leases[0].Note)
				}
				code, out, stderr = ctl(t, "", "leases", "-config", conf, "-key", key)
				require.Equal(t, exitOK, code, stderr)
				require.Equal(t, []string{"KEY", "STATE", "HOLDER", "FENCE", "LOCKED", "AT", "EXPIRES", "AT", "REMAINING"}, fields(out)[0])
				require.Equal(t, []string{key, leases[0].State}, fields(out)[1][:2])
				require.Contains(t, out, "times are UTC on the database clock")
				if s.spec.ExpiresAt == "" {
					require.Contains(t, out, "give it with -lease-ttl")
				}

				// Every holder, with or without an expiry column; without
				// one, by the TTL -lease-ttl gives.
				for _, ttl := range []string{"", "60", "1s"} {
					args := []string{"leases", "-config", conf, "-json"}
					if ttl != "" {
						args = append(args, "-lease-ttl", ttl)
					}
					code, out, stderr = ctl(t, "", args...)
					require.Equal(t, exitOK, code, stderr)
					var holders []leaseOut
					require.NoError(t, json.Unmarshal([]byte(out), &holders))
					require.Len(t, holders, 1)
					h := holders[0]
					require.Equal(t, l.Owner(), h.Owner)
					require.Equal(t, holder, h.Holder)
					switch {
					case s.spec.ExpiresAt != "":
						require.Equal(t, "held", h.State, "an expiry column's expiry, whatever -lease-ttl")
						require.True(t, h.DBClock)
					case ttl == "":
						require.Equal(t, "locked", h.State)
						require.Nil(t, h.ExpiresAt)
					case ttl == "60":
						require.Equal(t, "held", h.State)
						require.True(t, h.DBClock)
						require.InDelta(t, 60, h.RemainingSeconds, 10)
						require.Equal(t, h.LockedAt.Add(time.Minute), *h.ExpiresAt)
						require.EqualValues(t, 60, h.TTLSeconds)
					default:
						// By a 1 s TTL the lease is past its expiry once the
						// database clock has moved on (whole seconds: 2 s).
						require.Eventually(t, func() bool {
							_, out, _ := ctl(t, "", args...)
							require.NoError(t, json.Unmarshal([]byte(out), &holders))
							return holders[0].State == "expired"
						}, 10*time.Second, 200*time.Millisecond)
					}
				}

				code, out, _ = ctl(t, "n\n", "force-release", "-config", conf, "-key", key)
				require.Equal(t, exitRefused, code)
				require.Contains(t, out, "Force-release lease "+key+" of "+s.spec.Table)
				require.NoError(t, l.Renew(ctx), "refused: still held")
				code, out, stderr = ctl(t, "", "force-release", "-config", conf, "-key", key, "-yes", "-json")
				require.Equal(t, exitOK, code, stderr)
				var res actionResult
				require.NoError(t, json.Unmarshal([]byte(out), &res))
				require.Equal(t, actionResult{Action: "force-release", Table: s.spec.Table, Rows: 1}, res)
				require.ErrorIs(t, l.Renew(ctx), dialect.ErrLeaseLost)

				code, out, stderr = ctl(t, "", "leases", "-config", conf, "-key", key, "-json")
				require.Equal(t, exitOK, code, stderr)
				require.NoError(t, json.Unmarshal([]byte(out), &leases))
				require.Equal(t, "free", leases[0].State)
				code, out, stderr = ctl(t, "", "force-release", "-config", conf, "-key", key, "-yes")
				require.Equal(t, exitOK, code, stderr)
				require.Contains(t, out, "is free; nothing changed")

				// The lease table passes ddl with nothing to add.
				code, out, stderr = ctl(t, "", "ddl", "-config", conf)
				require.Equal(t, exitOK, code, stderr)
				if s.def != nil {
					require.Contains(t, out, "(nothing to do)")
				}
			})
		}
	}
}

// A lease table's optional columns are dropped with "-"; a required one
// cannot be, and an unknown kind is named.
func TestLeaseTableFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want dialect.LeaseTable
		err  string
	}{
		{args: []string{"-lease-kind", "task", "-lease-owner", "-"}, want: func() dialect.LeaseTable {
			t := tasklock.TaskTable("t")
			t.Owner = ""
			return t
		}()},
		{args: []string{"-lease-kind", "task-no-owner", "-lease-status", "-", "-lease-key", "task_id"}, want: dialect.LeaseTable{
			Table: "t", Key: "task_id", LockedAt: "lock_at",
		}},
		{args: []string{"-lease-fence", "-", "-lease-key-len", "100"}, want: func() dialect.LeaseTable {
			t := tasklock.KeyTable("t")
			t.Fence, t.KeyMaxLen = "", 100
			return t
		}()},
		{args: []string{"-lease-kind", "task", "-lease-locked-at", "-"}, err: "-lease-locked-at: the lease table needs"},
		{args: []string{"-lease-kind", "cron"}, err: `-lease-kind "cron": want key, task or task-no-owner`},
		{args: []string{"-lease-owner", "-"}, err: "Owner"},
		{args: []string{"-lease-key-len", "-1"}, err: "-lease-key-len"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parseOptions("leases", append([]string{"-lease-table", "t"}, tc.args...))
			require.NoError(t, err)
			lt, err := o.leaseTable()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				var ee *exitError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, exitUsage, ee.code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, lt)
		})
	}
}

// leaseFrom turns the library's reading into what claimctl shows: the lock
// time before the reckoned expiry, the TTL known or not, the holder known
// or not.
func TestLeaseFrom(t *testing.T) {
	t.Parallel()
	exp := time.Date(2026, 12, 3, 16, 55, 36, 0, time.UTC)
	noOwner := tasklock.TaskTableNoOwner("xxx_task")
	owned := tasklock.KeyTable("leases")
	held := tasklock.State{Exists: true, Owner: "1796190636000000", ExpiresAt: exp}
	for _, tc := range []struct {
		name string
		lt   dialect.LeaseTable
		ttl  time.Duration
		st   tasklock.State
		want leaseOut
	}{
		{"absent", noOwner, 0, tasklock.State{}, leaseOut{Key: 42, State: "absent"}},
		{"free", noOwner, 0, tasklock.State{Exists: true, Status: "2"}, leaseOut{Key: 42, State: "free"}},
		{"no TTL", noOwner, 0, held, leaseOut{Key: 42, State: "locked", Owner: held.Owner, Holder: unknownHold,
			LockedAt: ptr(exp.Add(-unknownTTL)), Note: noteNoTTL}},
		{"TTL", noOwner, 5 * time.Minute, held, leaseOut{Key: 42, State: "held", Owner: held.Owner, Holder: unknownHold,
			LockedAt: ptr(exp.Add(-5 * time.Minute)), ExpiresAt: &exp, TTLSeconds: 300, RemainingSeconds: 12, DBClock: true}},
		{"TTL passed", noOwner, 5 * time.Minute, tasklock.State{Exists: true, Owner: "1", ExpiresAt: exp, Expired: true},
			leaseOut{Key: 42, State: "expired", Owner: "1", Holder: unknownHold, LockedAt: ptr(exp.Add(-5 * time.Minute)), ExpiresAt: &exp, TTLSeconds: 300}},
		{"expiry column", owned, 0, tasklock.State{Exists: true, Owner: "tok", ExpiresAt: exp, Fence: 3},
			leaseOut{Key: 42, State: "held", Owner: "tok", Holder: "tok", Fence: 3, ExpiresAt: &exp, RemainingSeconds: 12, DBClock: true}},
		{"owner without expiry", owned, 0, tasklock.State{Exists: true, Owner: "tok"},
			leaseOut{Key: 42, State: "expired", Owner: "tok", Holder: "tok", Note: "no expiry or lock time: an acquisition takes it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{LeaseTTL: tc.ttl}
			require.Equal(t, tc.want, o.leaseFrom(tc.lt, 42, tc.st, 12*time.Second, true))
		})
	}
}
