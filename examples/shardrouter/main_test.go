package main

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestShards drains six tasks on three SQLite shards: every row is handled
// exactly once, by a claimer on its task's shard.
func TestShards(t *testing.T) {
	res, err := runResult(context.Background(), []string{"-shards", "3", "-tasks", "6", "-rows", "100"}, io.Discard)
	require.NoError(t, err)
	for task := int64(1); task <= 6; task++ {
		require.Equal(t, int64(100), res.perTask[task], "task %d", task)
	}
	require.Equal(t, []int64{200, 200, 200}, res.perShard, "tasks 3 and 6 on shard 0, 1 and 4 on 1, 2 and 5 on 2")
}

func TestBadInput(t *testing.T) {
	_, err := runResult(context.Background(), []string{"-driver", "postgres"}, io.Discard)
	require.ErrorContains(t, err, "-dsn is required")
	_, err = runResult(context.Background(), []string{"-tasks", "0"}, io.Discard)
	require.Error(t, err)
}
