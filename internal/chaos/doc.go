// Package chaos holds claimlock's fault-injection and hostile-input tests.
//
// The tests start several worker processes (the test binary re-executed in a
// worker role), inject faults real fleets see — SIGKILL, dropped server
// sessions, frozen processes (SIGSTOP/SIGCONT), server restarts, hot
// contention — and check the library's two guarantees from the database
// afterwards: no row is held by two claims at once, and no row is lost.
// Hostile configuration and input (identifiers, scope values, status values,
// short token columns, missing indexes) must give clear errors, never a
// panic and never a silent change.
//
// The package has no API: see README.md for how to run the short default,
// the long mode (CLAIMLOCK_CHAOS_LONG=1) and the restart scenario
// (CLAIMLOCK_CHAOS_RESTART=1).
package chaos
