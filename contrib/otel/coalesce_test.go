package claimotel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/obstest"
)

// A coalescer observed by the Observer: accepts counted by result (no
// span), a span per fold, and the folds with the changes they folded.
func TestCoalesceEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	obstest.CoalesceWorkload(t, b.obs)

	sums, _ := b.sums(t)
	require.EqualValues(t, 6, sums["claimlock.coalesce.accepts"], "%v", sums)
	require.EqualValues(t, 2, sums["claimlock.coalesce.folds"], "%v", sums)
	require.EqualValues(t, 4, sums["claimlock.coalesce.changes_folded"], "%v", sums)
	folds := map[string]int64{}
	for _, sp := range b.spans.GetSpans().Snapshots() {
		if sp.Name() != "claimlock.coalesce.fold" {
			continue
		}
		key, _ := attr(sp, "claimlock.coalesce.key")
		changes, _ := attr(sp, "claimlock.coalesce.changes")
		folds[key.AsString()] = changes.AsInt64()
	}
	require.Equal(t, map[string]int64{"a": 3, "b": 1}, folds, "a span per fold, none per accept")
}
