package coalesce

import (
	"context"
	"math"
)

// maxGroupInFlight bounds Config.GroupInFlight.
const maxGroupInFlight = 64

// groupable reports whether an Accept of ch may share a grouped
// transaction (Config.Group). A change with a Source and the lowest Seq
// may not: a batch keeps that value for itself (see checkBatch), and
// Accept takes it.
func groupable(ch Change) bool {
	return ch.Source == "" || ch.Seq != math.MinInt64
}

// acceptGroup records the changes of concurrent Accepts (Config.Group)
// together, as AcceptBatch records a batch, and returns each Accept's
// outcome. A batch takes an event id once: a change whose event id is
// already in the batch goes into a batch after it, where it meets the
// first as any resend does. An error of a whole batch (backpressure, the
// database) is each of its changes' error.
func (c *Coalescer) acceptGroup(ctx context.Context, chs []Change) ([]Receipt, []error, error) {
	outs, errs := make([]Receipt, len(chs)), make([]error, len(chs))
	rest := make([]int, len(chs))
	for i := range rest {
		rest[i] = i
	}
	for len(rest) > 0 {
		var now, later []int
		seen := make(map[string]bool, len(rest))
		for _, i := range rest {
			if seen[chs[i].EventID] {
				later = append(later, i)
				continue
			}
			seen[chs[i].EventID] = true
			now = append(now, i)
		}
		batch := make([]Change, len(now))
		for j, i := range now {
			batch[j] = chs[i]
		}
		res, err := c.acceptBatch(ctx, batch)
		for j, i := range now {
			if err != nil {
				errs[i] = err
				continue
			}
			outs[i], errs[i] = res[j].Receipt, res[j].Err
		}
		rest = later
	}
	return outs, errs, nil
}
