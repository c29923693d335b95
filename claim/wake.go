package claim

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimlock/claimlock/internal/detach"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
)

// Wake tells the claimer's idle [Claimer.Run] loops that rows may be
// pending: one idle loop claims at once instead of waiting out its poll
// interval, and if it fills a whole batch it wakes the next idle loop, and
// so on, so that a backlog brings every loop back while a single row costs
// one claim. Call it after committing rows you inserted (or made pending)
// in this process. It never blocks and never touches the database; a Wake
// with no loop idle is remembered once (the next loop to go idle claims
// again at once), never queued.
//
// Rows made pending by other processes reach idle loops through the
// dialect's notifications where it has them (PostgreSQL, while its
// Dialect.Listen runs), and through polling everywhere.
func (c *Claimer[T]) Wake() { c.core.wake.kick() }

// waker coordinates the idle loops of one claimer (of every [Claimer.Run]
// on it): at most one of them polls the database at a time, backing off
// between PollMin and PollMax while the polls find nothing; the others wait
// for a wake-up ([Claimer.Wake], a notification, or a full batch claimed by
// another loop). So an idle claimer costs one claim per poll interval, not
// one per loop. The zero value is ready to use.
type waker struct {
	once  sync.Once
	kicks chan struct{} // capacity 1: a pending wake-up
	poll  chan struct{} // capacity 1: holds the poller slot while free
	// empty counts the polls that found nothing since a loop last claimed
	// rows; it sets the poller's backoff.
	empty atomic.Int32
}

func (w *waker) init() {
	w.once.Do(func() {
		w.kicks = make(chan struct{}, 1)
		w.poll = make(chan struct{}, 1)
		w.poll <- struct{}{}
	})
}

// kick records a wake-up for one idle loop; it never blocks.
func (w *waker) kick() {
	w.init()
	select {
	case w.kicks <- struct{}{}:
	default: // one is pending already
	}
}

// worked records a claim that returned n rows of a batch of limit: polling
// starts again from PollMin, and a full batch wakes another idle loop (more
// rows are likely pending).
func (w *waker) worked(n, limit int) {
	w.empty.Store(0)
	if n >= limit {
		w.kick()
	}
}

// idle waits until the calling loop should claim again: a wake-up arrived,
// or the loop took the poller slot and waited out the backoff, or ctx
// ended. It returns a function the loop calls once its next claim is done,
// which frees the poller slot if the loop holds it: a claim made by the
// poller runs with the slot held, so at most one poll is in flight per
// claimer.
func (w *waker) idle(ctx context.Context, pollMin, pollMax time.Duration) (done func()) {
	w.init()
	select {
	case <-ctx.Done():
		return func() {}
	case <-w.kicks:
		return func() {}
	case <-w.poll:
	}
	free := func() { w.poll <- struct{}{} }
	n := int(w.empty.Add(1)) - 1
	loop.Sleep(ctx, loop.Backoff(n, pollMin, pollMax), w.kicks)
	return free
}

// subscribe asks the dialect's notifier, where it has one, to call kick
// (the claimer's own wake-up, or that of the Run serving its scope) when
// another process makes rows of its scope pending. It returns the function
// that ends the subscription.
func (k *core) subscribe(kick func()) (cancel func()) {
	n := store.NotifierOf(k.d)
	if n == nil {
		return func() {}
	}
	return n.Subscribe(k.spec, k.scopeValues(), kick)
}

// NotifyPending tells the idle claimers of this claimer's table and scope
// in other processes that rows became pending, through the dialect's
// notifications where it has them (PostgreSQL: they hear it while their
// Dialect.Listen runs), so that they claim at once rather than at their
// next poll. Call it after committing the statement that made the rows
// pending; it sends the notification in a statement of its own, and does
// nothing (returning nil) where the dialect has no notifications. To
// notify inside the inserting transaction instead, use the dialect's own
// function (postgres.Notify).
//
// The notification runs on a deadline of its own (5 s), not ctx's, as the
// library's own notifications do: a caller whose context ends right after
// its commit (an HTTP request answered, say) still wakes the other
// processes. NotifyPending waits for it only while ctx lasts: once ctx
// has ended it returns ctx's cause, whether the notification is sent
// already or finishes in the background. A notification that fails is only a later pickup: the
// rows are pending, and the other processes find them at their next poll.
func (c *Claimer[T]) NotifyPending(ctx context.Context) error {
	n, ok := store.NotifierOf(c.core.d).(store.PendingNotifier)
	if !ok {
		return nil
	}
	errc := make(chan error, 1)
	detach.Run(ctx, store.NotifyTimeout, func(nctx context.Context) {
		errc <- n.NotifyPending(nctx, c.core.spec, c.core.scopeValues())
	})
	if ctx.Err() != nil {
		// ctx ended before NotifyPending returns: the caller is told so,
		// whether the notification is sent already or goes on.
		return context.Cause(ctx)
	}
	return <-errc
}

// OnNotify calls wake each time another process notifies that rows of this
// claimer's table and scope became pending ([Claimer.NotifyPending],
// postgres.Notify), while the dialect's notifications are heard
// (PostgreSQL: while its Dialect.Listen runs), until the returned stop is
// called. wake runs on the listener's goroutine and must not block.
// [Claimer.Run] subscribes by itself; OnNotify is for loops of your own.
// Where the dialect has no notifications it does nothing.
func (c *Claimer[T]) OnNotify(wake func()) (stop func()) {
	if wake == nil {
		return func() {}
	}
	return c.core.subscribe(wake)
}
