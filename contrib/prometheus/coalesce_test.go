package claimprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/coalesce"
	claimprom "github.com/claimlock/claimlock/contrib/prometheus"
	"github.com/claimlock/claimlock/internal/testkit/obstest"
)

// A coalescer observed by Metrics: accepts by result, and the folds with
// the changes they folded (their ratio is the coalescing ratio).
func TestCoalesceEvents(t *testing.T) {
	t.Parallel()
	m := claimprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	obstest.CoalesceWorkload(t, m)

	got := series(t, reg)
	ch := "claimlock_coalesce_accepts_total{changes_table=" + coalesce.DefaultChangesTable + ",result="
	require.EqualValues(t, 4, got[ch+"recorded}"], "%v", got)
	require.EqualValues(t, 1, got[ch+"duplicate}"], "%v", got)
	require.EqualValues(t, 1, got[ch+"stale}"], "%v", got)
	keys := "{keys_table=" + coalesce.DefaultKeysTable + "}"
	require.EqualValues(t, 2, got["claimlock_coalesce_folds_total"+keys], "one state write per key: %v", got)
	require.EqualValues(t, 4, got["claimlock_coalesce_changes_folded_total"+keys], "%v", got)
}
