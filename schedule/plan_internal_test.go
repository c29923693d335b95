package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const sec = int64(time.Second / time.Microsecond)

func TestEvery(t *testing.T) {
	e := Every(time.Second)
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC), e.Next(at))
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC), e.Next(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
	require.Equal(t, time.Unix(0, 0).UTC(), e.Next(time.Unix(0, -1)).UTC())
	require.Equal(t, time.Unix(-1, 0).UTC(), e.Next(time.Unix(-2, 0)).UTC())
	require.True(t, Every(0).Next(at).IsZero())
	require.Equal(t, "every 1s", Every(time.Second).(interface{ String() string }).String())
}

func TestDecide(t *testing.T) {
	tl := timeline{s: Every(time.Second), loc: time.UTC, grace: 300 * int64(time.Millisecond/time.Microsecond)}
	base := 1_000_000 * sec // a whole second
	ms := int64(1000)

	// Nothing due yet: the next fire time is reported.
	p, err := tl.decide(base, base+500*ms, SkipMissed)
	require.NoError(t, err)
	require.Equal(t, plan{next: base + sec}, p)

	// Due within grace: run it in [F, F+grace).
	p, err = tl.decide(base, base+sec+100*ms, SkipMissed)
	require.NoError(t, err)
	require.Equal(t, base+sec, p.run)
	require.Equal(t, base+sec, p.runFrom)
	require.Equal(t, base+sec+300*ms, p.runTo)
	require.False(t, p.late)
	require.False(t, p.skipUntil > p.skipFrom, "nothing missed")
	require.Equal(t, base+2*sec, p.next)

	// Past grace: skipped (up to and including the latest fire time).
	p, err = tl.decide(base, base+sec+400*ms, SkipMissed)
	require.NoError(t, err)
	require.True(t, p.skipOnly())
	require.Equal(t, base+sec, p.skipFrom)
	require.Equal(t, base+2*sec, p.skipUntil)
	require.Equal(t, base+sec, p.skipTo)
	require.Equal(t, base+sec+300*ms, p.skipAfter)

	// Down for a day: the latest is found without walking every second,
	// the older ones are missed, the latest runs if within its grace.
	day := 86400 * sec
	p, err = tl.decide(base, base+day+100*ms, SkipMissed)
	require.NoError(t, err)
	require.Equal(t, base+day, p.run)
	require.Equal(t, base+sec, p.skipFrom)
	require.Equal(t, base+day, p.skipUntil)

	// Catch-up: every fire time missed, the latest runs late until the
	// next one.
	p, err = tl.decide(base, base+day+500*ms, CatchUp)
	require.NoError(t, err)
	require.Equal(t, base+day, p.run)
	require.True(t, p.late)
	require.Equal(t, base+day+300*ms, p.runFrom)
	require.Equal(t, base+day+sec, p.runTo)
	require.Equal(t, base+sec, p.skipFrom)
	require.Equal(t, base+day, p.skipUntil)

	// Grace is capped by the next fire time.
	wide := timeline{s: Every(time.Second), loc: time.UTC, grace: 10 * sec}
	require.Equal(t, base+sec, wide.deadline(base))
}

// TestLatestIrregular walks a schedule whose gaps vary.
func TestLatestIrregular(t *testing.T) {
	// Fires at 0, 1, 3, 6, 10, ... seconds past each minute's start.
	tri := scheduleFunc(func(t time.Time) time.Time {
		m := t.Truncate(time.Minute)
		for k, off := 0, 0; ; k++ {
			off += k
			if off >= 60 {
				return m.Add(time.Minute)
			}
			if f := m.Add(time.Duration(off) * time.Second); f.After(t) {
				return f
			}
		}
	})
	tl := timeline{s: tri, loc: time.UTC, grace: sec}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for now := base; now < base+3*60*sec; now += 700 * 1000 {
		first, _ := tl.next(base)
		if first > now {
			continue
		}
		got, err := tl.latest(first, now)
		require.NoError(t, err)
		// Walk it the slow way.
		want := first
		for {
			n, _ := tl.next(want)
			if n > now {
				break
			}
			want = n
		}
		require.Equal(t, want, got, "now %d", now-base)
	}
}

type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }
