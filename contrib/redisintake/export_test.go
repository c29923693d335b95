package redisintake

import "context"

// SetAfterRecord installs a hook that runs in Drain after a key's version
// is recorded in SQL and before its dirty mark is compared and deleted.
func SetAfterRecord(in *Intake, f func(ctx context.Context, key string, version int64)) {
	in.afterRecord = f
}

// EventID exposes eventID to the tests.
var EventID = eventID
