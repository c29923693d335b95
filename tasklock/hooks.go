package tasklock

import "time"

// Hooks are optional callbacks for metrics and tracing. Each is called
// synchronously from the goroutine that observed the event, so it must be
// cheap and safe for concurrent use. Nil hooks are skipped.
type Hooks struct {
	// Acquired is called after a successful acquisition with the fence.
	Acquired func(key any, fence int64)
	// Renewed is called after a successful renewal with the time the
	// renew statement took.
	Renewed func(key any, fence int64, took time.Duration)
	// RenewFailed is called when a renewal failed without proof of loss (a
	// timeout or a database error); the keep-alive retries until the local
	// deadline.
	RenewFailed func(key any, fence int64, err error)
	// Lost is called once when a lease ends other than by Release: err
	// matches [ErrLeaseLost] (and [ErrLocalDeadline] for a local deadline).
	Lost func(key any, fence int64, err error)
	// Released is called after Release with whether the database row was
	// still held by this lease.
	Released func(key any, fence int64, released bool)
}
