package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/tasklock"
)

const contenders = 32

// held is an interval during which a claim or lease was certainly held:
// from the return of the call that took it to the start of the call that
// gave it up.
type held struct {
	from, to time.Time
	fence    int64
}

// TestHotContention runs 32 claimers with batch 1 on one task and 32
// contenders on one lease key: no row is held twice, no two leases overlap,
// fences grow with time, and no error reaches a caller (deadlocks and busy
// errors are retried inside the dialect and counted).
func TestHotContention(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			d := openT(t, e.driver, e.dsn(t))
			rows := size(320, 3200)
			setup(t, d, rows)
			ctx, cancel := context.WithTimeout(context.Background(), drainLimit())
			defer cancel()
			retries0 := store.Retries(d.d)

			// Claims.
			c, err := claim.New(d.d, itemsConfig(1), itemFields)
			require.NoError(t, err)
			var mu sync.Mutex
			claims := map[int64][]held{}
			var errs []error
			var evs []event
			var wg sync.WaitGroup
			start := time.Now()
			for range contenders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						b, err := c.Claim(ctx)
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						if b.Len() == 0 {
							return
						}
						from := time.Now()
						row := b.Rows()[0]
						id := row.ID.(int64)
						if err := send(ctx, d, id, b.Token(), row.Value.Attempts); err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						to := time.Now()
						err = b.AckAll(ctx)
						mu.Lock()
						evs = append(evs, event{Ev: "claim", Pid: os.Getpid(), Tok: b.Token(), IDs: []int64{id}, T: from.UnixNano()})
						if err != nil {
							errs = append(errs, err)
						} else {
							evs = append(evs, event{Ev: "ack", Pid: os.Getpid(), Tok: b.Token(), IDs: []int64{id}, T0: to.UnixNano()})
						}
						claims[id] = append(claims[id], held{from: from, to: to})
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			claimTime := time.Since(start)
			require.Empty(t, errs, "errors reached the claimers")
			claimRetries := store.Retries(d.d) - retries0
			overlaps := 0
			for id, hs := range claims {
				require.Len(t, hs, 1, "row %d claimed more than once", id)
			}
			st, err := c.Stats(ctx)
			require.NoError(t, err)
			require.EqualValues(t, rows, st.Done)
			require.Zero(t, st.Pending+st.Processing)
			rep := check(t, d, rows, evs, nil)

			// Leases.
			k, err := tasklock.New(d.d, tasklock.Config{Table: lockerConfig(time.Second).Table, TTL: 10 * time.Second})
			require.NoError(t, err)
			target := int64(size(150, 1500))
			var taken atomic.Int64
			var leases []held
			var notAcquired atomic.Int64
			retries1 := store.Retries(d.d)
			start = time.Now()
			for range contenders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil && taken.Load() < target {
						l, err := k.Acquire(ctx, "hot")
						if errors.Is(err, dialect.ErrLeaseHeld) {
							notAcquired.Add(1)
							time.Sleep(time.Millisecond)
							continue
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						from := time.Now()
						taken.Add(1)
						time.Sleep(200 * time.Microsecond)
						to := time.Now()
						ok, err := l.Release(ctx)
						mu.Lock()
						if err != nil || !ok {
							errs = append(errs, fmt.Errorf("release: %v, %w", ok, err))
						}
						leases = append(leases, held{from: from, to: to, fence: l.Fence()})
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			leaseTime := time.Since(start)
			require.Empty(t, errs, "errors reached the lease contenders")
			slices.SortFunc(leases, func(a, b held) int { return a.from.Compare(b.from) })
			for i := 1; i < len(leases); i++ {
				if leases[i].from.Before(leases[i-1].to) {
					overlaps++
					t.Errorf("lease fence %d taken at %v while fence %d held it until %v", leases[i].fence, leases[i].from, leases[i-1].fence, leases[i-1].to)
				}
				if leases[i].fence <= leases[i-1].fence {
					t.Errorf("fence %d after fence %d", leases[i].fence, leases[i-1].fence)
				}
			}
			require.GreaterOrEqual(t, int64(len(leases)), target)
			rep.overlaps += overlaps
			rep.drain = claimTime
			rep.log(t, "hot-contention", e.name)
			line := fmt.Sprintf("chaos-detail: scenario=hot-contention engine=%s claimers=%d rows=%d claim-retries=%d claim-time=%v lease-contenders=%d leases=%d not-acquired=%d lease-retries=%d lease-time=%v overlaps=%d errors=0",
				e.name, contenders, rows, claimRetries, claimTime.Round(time.Millisecond), contenders, len(leases), notAcquired.Load(), store.Retries(d.d)-retries1, leaseTime.Round(time.Millisecond), rep.overlaps)
			t.Log(line)
			fmt.Fprintln(os.Stdout, line)
			require.Zero(t, rep.lost)
			require.Zero(t, rep.overlaps)
		})
	}
}
