// Package holdctx carries, in a context, the checks of the claims and
// leases the context's work depends on, for the public package hold: claim
// and tasklock install a check in every context they hand to work, and
// hold.Check runs them.
package holdctx

import "context"

// key is the context key of the innermost check.
type key struct{}

// node is one check and the checks of the contexts it was derived from.
type node struct {
	check func() error
	outer *node
}

// With returns ctx carrying check besides the checks ctx carries already.
// check returns nil while its claim or lease is held, comparing its local
// deadline with the clock itself (never waiting for a timer).
func With(ctx context.Context, check func() error) context.Context {
	outer, _ := ctx.Value(key{}).(*node)
	return context.WithValue(ctx, key{}, &node{check: check, outer: outer})
}

// Check runs the checks ctx carries, innermost first, and returns the first
// error; carried is false when ctx carries none.
func Check(ctx context.Context) (carried bool, err error) {
	n, _ := ctx.Value(key{}).(*node)
	if n == nil {
		return false, nil
	}
	for ; n != nil; n = n.outer {
		if err := n.check(); err != nil {
			return true, err
		}
	}
	return true, nil
}
