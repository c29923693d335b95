// Package observe is the one hook through which claimlock's packages report
// what they did: every claim, ack and heartbeat of package claim, every
// acquisition and renewal of package tasklock, every sweep of package
// zombie, and the events of any package added later, reach one [Observer]
// as one [Event] type.
//
// An adapter implements [Observer] once and is installed in each package's
// configuration (claim.Config.Observer, tasklock.Config.Observer,
// zombie.Config.Observer and zombie.LeaseConfig.Observer):
//
//	obs := observe.Func(func(ctx context.Context, e observe.Event) {
//		if e.Err != nil {
//			log.Printf("%s on %s failed: %v", e.Op, e.Table, e.Err)
//		}
//	})
//	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "outbox"}, Observer: obs}
//
// The contrib modules github.com/claimlock/claimlock/contrib/otel (spans and
// metrics) and github.com/claimlock/claimlock/contrib/prometheus (a
// collector) are such adapters; [Join] installs several at once.
//
// # Sources and operations
//
// [Event.Source] names the package that reported the event; [Event.Op] the
// operation. Each package declares its operations as constants of type
// [Op] next to the methods they report (claim.OpAck, tasklock.OpRenew,
// zombie.OpSweep), and documents there which fields of [Event] each one
// sets. An Op's value is its source, a dot and its name ("claim.ack",
// "tasklock.release", "zombie.sweep"), so the operations of two packages
// never compare equal even where their names do ("claim.release",
// "tasklock.release"); [Op.Name] is the name alone, for a label or a span
// name that carries the source elsewhere.
//
// A package added to claimlock reports through the same [Observer] and
// [Event]: it adds its [Source] here, declares its operations, and uses
// the fields of Event that already say what it did, adding a field only
// for a quantity none of them measures. An adapter therefore keeps
// compiling when a package is added, and sees the new events by their
// Source.
package observe
