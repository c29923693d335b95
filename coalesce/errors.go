package coalesce

import (
	"errors"
	"fmt"
	"time"
)

// ErrStale matches a [*StaleError]: a change whose sequence is not above
// the last one accepted from its source for its key.
var ErrStale = errors.New("coalesce: stale sequence")

// ErrOverloaded matches an [*OverloadError]: the coalescer refused a change
// because its backlog is over the configured limits.
var ErrOverloaded = errors.New("coalesce: overloaded")

// StaleError is the refusal of a change whose sequence is not above the
// last sequence accepted from its source for its key (an HTTP 409). Nothing
// was written.
type StaleError struct {
	Key, Source string
	// Seq is the refused change's sequence; Current the last sequence
	// accepted from Source for Key.
	Seq, Current int64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("coalesce: stale sequence: key %q source %q: %d is not above %d", e.Key, e.Source, e.Seq, e.Current)
}

// Is makes a StaleError match [ErrStale].
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// OverloadError is the refusal of a change because the backlog is over a
// limit of the [Config] (an HTTP 429 with Retry-After). Nothing was
// written.
type OverloadError struct {
	// RetryAfter is how long the caller should wait ([Config.RetryAfter]).
	RetryAfter time.Duration
	// Backlog is the number of dirty keys measured, and OldestAge the age
	// of the oldest unfolded change, on the database clock (each zero when
	// its limit is not configured).
	Backlog   int64
	OldestAge time.Duration
}

func (e *OverloadError) Error() string {
	return fmt.Sprintf("coalesce: overloaded: %d dirty keys, oldest unfolded change %v old; retry after %v", e.Backlog, e.OldestAge, e.RetryAfter)
}

// Is makes an OverloadError match [ErrOverloaded].
func (e *OverloadError) Is(target error) bool { return target == ErrOverloaded }
