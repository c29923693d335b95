package errclass

import (
	"context"
	"errors"
	"fmt"
)

// EndedWith returns err, an error of an operation run with ctx, so that it
// also matches ctx's error (and its cause) once ctx has ended: a driver
// may report a statement it refused because ctx had ended as a broken
// connection (pgx's stdlib driver and go-sql-driver/mysql return
// driver.ErrBadConn for one they never sent), and a caller that stopped
// its work must be able to tell that from a failure of the server. The
// driver's error stays reachable.
func EndedWith(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	if cause := context.Cause(ctx); !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("%w (the context ended: %w: %w)", err, ctx.Err(), cause)
	}
	return fmt.Errorf("%w (the context ended: %w)", err, ctx.Err())
}
