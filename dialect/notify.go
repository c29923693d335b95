package dialect

// Notifier is implemented by dialects that can tell the claimers of one
// process that another process made rows pending (PostgreSQL's
// LISTEN/NOTIFY, with the dialect's listener running). It is optional: a
// claimer checks for it with a type assertion, and without it (or while
// the listener is down) idle claimers find new rows by polling.
//
// A dialect that implements it also sends the notification itself whenever
// one of its stores returns rows to pending (a release, a failed row to be
// retried, a requeued versioned ack, a reap), so that other processes'
// claimers do not wait for their next poll.
type Notifier interface {
	// Subscribe registers wake to be called when a notification arrives for
	// spec's table and the scope values scopeValues (in the order of
	// spec.Scope; nil for a table without scope), or for the table as a
	// whole (a reap of every scope), until cancel is called. wake must
	// return quickly and must not block; it may be called when no row is
	// pending (a notification is a hint, never a promise), and it may be
	// called after cancel returns if a notification was being dispatched.
	Subscribe(spec ClaimTable, scopeValues []any, wake func()) (cancel func())
}
