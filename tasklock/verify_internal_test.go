package tasklock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/store"
)

// countedChecks is a lease store that counts its schema checks and makes
// each take a while, as a catalog query on a loaded server does.
type countedChecks struct {
	store.LeaseStore
	n atomic.Int32
}

func (c *countedChecks) VerifySchema(ctx context.Context) error {
	c.n.Add(1)
	time.Sleep(50 * time.Millisecond)
	return c.LeaseStore.VerifySchema(ctx)
}

// TestAcquisitionsAtOnceCheckOnce: sixteen acquisitions of different keys
// that start together run the lease table's schema check once between
// them.
func TestAcquisitionsAtOnceCheckOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k := newTestLocker(t, ctx, "once_leases")
	counted := &countedChecks{LeaseStore: k.ls}
	k.ls = counted
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			l, err := k.Acquire(ctx, fmt.Sprintf("key-%d", i))
			if err == nil {
				_, err = l.Release(ctx)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, counted.n.Load(), "schema checks of 16 acquisitions at once")
}
