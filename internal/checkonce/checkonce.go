// Package checkonce runs a start-up check until it has passed, one caller
// at a time: the callers that start together (the workers of a claimer,
// the acquisitions of a locker's keys) run it once between them, not each.
package checkonce

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Check is a check that passes once for good. Make it with [New].
type Check struct {
	passed atomic.Bool
	turn   chan struct{} // holds a value while a check runs
}

// New returns a check that has not passed yet.
func New() *Check { return &Check{turn: make(chan struct{}, 1)} }

// Run returns nil at once if a check passed before. Otherwise it runs
// check, or waits for the check another caller runs and returns nil if
// that one passes; a failed check is run again by the next caller. A caller
// whose ctx ends while it waits returns an error matching ctx's error,
// prefixed by what.
func (c *Check) Run(ctx context.Context, what string, check func(context.Context) error) error {
	if c.passed.Load() {
		return nil
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for the check in progress: %w", what, context.Cause(ctx))
	}
	defer func() { <-c.turn }()
	if c.passed.Load() {
		return nil
	}
	if err := check(ctx); err != nil {
		return err
	}
	c.passed.Store(true)
	return nil
}
