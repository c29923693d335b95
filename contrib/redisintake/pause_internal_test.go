package redisintake

import (
	"math"
	"testing"
	"time"
)

// idlePause doubles from PollMin to PollMax and never overflows, whatever
// the bounds and however long the intake has been idle.
func TestIdlePause(t *testing.T) {
	for _, tc := range []struct {
		min, max time.Duration
		idle     int
		want     time.Duration
	}{
		{10 * time.Millisecond, time.Second, 0, 10 * time.Millisecond},
		{10 * time.Millisecond, time.Second, 3, 80 * time.Millisecond},
		{10 * time.Millisecond, time.Second, 7, time.Second},
		{10 * time.Millisecond, time.Second, 1000, time.Second},
		{3 * time.Hour, 12 * time.Hour, 1, 6 * time.Hour},
		{3 * time.Hour, 12 * time.Hour, 40, 12 * time.Hour},
		{time.Hour, time.Duration(math.MaxInt64), 1000, time.Duration(math.MaxInt64)},
		{time.Second, time.Second, 5, time.Second},
	} {
		if got := idlePause(tc.min, tc.max, tc.idle); got != tc.want {
			t.Errorf("idlePause(%v, %v, %d) = %v, want %v", tc.min, tc.max, tc.idle, got, tc.want)
		}
	}
}
