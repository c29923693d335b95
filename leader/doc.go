// Package leader elects one leader among the processes that share a
// database: a leader lease (package tasklock) on one key of a keyed lease
// table, renewed in the background while the leader leads, on
// MySQL/MariaDB, PostgreSQL or SQLite.
//
//	el, err := leader.New(d, leader.Config{Table: tasklock.KeyTable("claimlock_lease"), Name: "billing", TTL: 15 * time.Second})
//	...
//	err = el.Run(ctx, func(ctx context.Context, term leader.Term) error {
//		// Only the leader gets here, one at a time. ctx is cancelled when
//		// leadership is lost: stop then.
//		return billingLoop(ctx, term.Fence)
//	})
//
// # One leader at a time
//
// The lease is decided on the database clock, and its holder stops at its
// local deadline, before the database lets another process take it (see
// tasklock). A process frozen past its deadline (a long GC pause, SIGSTOP,
// a suspended VM) may still act for a moment when it resumes: each term
// has a fencing token ([Term.Fence]) that strictly increases from term to
// term, for the targets of the leader's writes to refuse a smaller one
// than they have seen.
//
// # gocron
//
// An [Elector] is a gocron v2 Elector as it is: its IsLeader method
// reports nil while this process leads. Start [Elector.Campaign] in the
// background and pass the Elector to gocron.WithDistributedElector; gocron
// then runs jobs only on the leader. Leadership says nothing of fire
// times: a handover between a job's ticks on two hosts can run a fire time
// twice or not at all. For once per fire time use package schedule (and
// its gocron Locker in contrib/gocron).
package leader
