package observe_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/observe"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// Every operation of every package is distinct, named after its source.
func TestOpsAreNamespaced(t *testing.T) {
	ops := map[observe.Source][]observe.Op{
		observe.SourceClaim: {claim.OpClaim, claim.OpAck, claim.OpFail, claim.OpSnooze, claim.OpHeartbeat,
			claim.OpRelease, claim.OpCommit, claim.OpRollback, claim.OpLost, claim.OpPaused},
		observe.SourceTasklock: {tasklock.OpAcquire, tasklock.OpRenew, tasklock.OpRelease, tasklock.OpFinish,
			tasklock.OpForceRelease, tasklock.OpLost},
		observe.SourceZombie:   {zombie.OpSweep, zombie.OpLeaseSweep, zombie.OpLeader},
		observe.SourceCoalesce: {coalesce.OpAccept, coalesce.OpFold},
	}
	seen := map[observe.Op]bool{}
	for src, list := range ops {
		for _, op := range list {
			require.False(t, seen[op], "%s is declared twice", op)
			seen[op] = true
			require.Equal(t, string(src)+"."+op.Name(), string(op), "an Op is its source, a dot and its name")
			require.NotContains(t, op.Name(), ".", "a name has no dot of its own")
		}
	}
	require.Equal(t, "release", claim.OpRelease.Name())
	require.Equal(t, claim.OpRelease.Name(), tasklock.OpRelease.Name())
	require.NotEqual(t, claim.OpRelease, tasklock.OpRelease)
	require.Equal(t, "plain", observe.Op("plain").Name(), "an Op without a source is its own name")
}

type counter struct{ n int }

func (c *counter) Observe(context.Context, observe.Event) { c.n++ }

func TestJoin(t *testing.T) {
	require.Nil(t, observe.Join(), "no observer: none")
	require.Nil(t, observe.Join(nil, nil), "only nil observers: none")
	one := &counter{}
	require.Same(t, one, observe.Join(nil, one), "one observer is itself")

	a, b := &counter{}, &counter{}
	var order []string
	first := observe.Func(func(context.Context, observe.Event) { order = append(order, "first") })
	last := observe.Func(func(context.Context, observe.Event) { order = append(order, "last") })
	j := observe.Join(first, a, nil, b, last)
	j.Observe(context.Background(), observe.Event{})
	j.Observe(context.Background(), observe.Event{})
	require.Equal(t, 2, a.n)
	require.Equal(t, 2, b.n)
	require.Equal(t, []string{"first", "last", "first", "last"}, order, "in the order given")
}
