package claim

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/claimlock/claimlock/dialect"
)

// runState is what the loops of one [Claimer.Run] or [Holder.Run] share,
// so that both follow one set of rules: the table is verified before the
// first claim, the loops hear the wake-ups of the scopes they serve, and
// an error that retrying cannot cure stops every loop and is what Run
// returns. runner and heldRunner embed it.
type runState struct {
	name   string // the method, in errors and logs: "Run", "Holder.Run"
	claims string // what its loops do, in logs: "claims", "holds"
	logger *slog.Logger
	stop   context.CancelCauseFunc // shuts every loop down
	fatal  atomic.Pointer[error]   // the permanent error that stopped Run
}

// start verifies the table against the catalog ([Claimer.Verify] of k),
// subscribes kick to the notifications of the scopes served (their cores,
// see subscribe) and returns the loops' context, which s.stop ends,
// and end, which Run defers: it stops the loops' context, then ends the
// subscriptions. A verification that fails permanently
// ([dialect.IsPermanent]), or once ctx has ended, is returned; another
// (the database may not answer yet) is logged, and each claim verifies
// again.
func (s *runState) start(ctx context.Context, k *core, scopes []*core, kick func()) (_ context.Context, end func(), _ error) {
	s.logger = k.logger
	if err := k.verify(ctx); err != nil {
		if dialect.IsPermanent(err) || ctx.Err() != nil {
			return nil, nil, err
		}
		s.logger.Error("claimlock: could not verify the table; "+s.claims+" will try again", "err", err)
	}
	unsubscribe := make([]func(), len(scopes))
	for i, sk := range scopes {
		unsubscribe[i] = sk.subscribe(kick)
	}
	ctx, s.stop = context.WithCancelCause(ctx)
	return ctx, func() {
		s.stop(nil)
		for i := len(unsubscribe) - 1; i >= 0; i-- {
			unsubscribe[i]()
		}
	}, nil
}

// check stops Run when err is permanent and reports whether it did.
func (s *runState) check(err error) bool {
	if err == nil || !dialect.IsPermanent(err) {
		return false
	}
	err = fmt.Errorf("%w (%s stopped: retrying cannot cure this)", err, s.name)
	if s.fatal.CompareAndSwap(nil, &err) {
		s.logger.Error("claimlock: "+s.name+" stops", "err", err)
		s.stop(err)
	}
	return true
}

// callHandler calls a handler of Run or Holder.Run through call, turning
// a panic into an error: the handler's failure, which Run records as it
// records an error the handler returned (the row's failure, or the held
// batch's), instead of a crash of the process.
func callHandler(call func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return call()
}

// err returns the permanent error that stopped Run, nil if none did.
func (s *runState) err() error {
	if err := s.fatal.Load(); err != nil {
		return *err
	}
	return nil
}
