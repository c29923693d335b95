package store

// This file tells errors that never reached the server apart from errors of
// a statement the server may have run: only the second kind can leave a
// write of unknown outcome.

import (
	"errors"
	"net"

	"github.com/claimlock/claimlock/internal/errclass"
)

// NotSent marks err, the failure to get a connection before anything was
// written to it (a pool that could not hand one out, a failed connect), as
// [errclass.Unreachable], whatever the error itself is: even a context that
// ended while the caller waited for a connection left nothing on the
// server.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return &classErr{class: errclass.Unreachable, err: err}
}

// MaybeSent marks err, the failure of a statement written to a connection
// that then broke, as [errclass.Connection] whatever the driver says of it:
// the server may have run the statement. For a driver that reports such a
// failure as one that sent nothing.
func MaybeSent(err error) error {
	if err == nil {
		return nil
	}
	return &classErr{class: errclass.Connection, err: err}
}

// IsDialError reports a failure to open a network connection: a refused or
// timed-out dial, or a host name that does not resolve. Nothing was sent.
func IsDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
