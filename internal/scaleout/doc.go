// Package scaleout holds claimlock's tests on distributed databases: a
// three-node MariaDB Galera cluster and a PostgreSQL primary with a
// streaming standby that is promoted mid-run.
//
// The tests race real worker pools against real servers and inject the
// faults these deployments see (a node SIGKILLed mid-run and rejoining, a
// standby promoted while its primary dies), then check the library's two
// guarantees from the database and from every claim's in-process record:
// no row held by two claims at once (overlaps), no row lost. Each test
// prints one summary line with its figures.
//
// The servers come from scripts/galera-cluster.sh and scripts/pg-standby.sh,
// which the CI script starts; see README.md in this directory. Without their
// environment variables the tests skip, loudly; with
// CLAIMLOCK_REQUIRE_SCALEOUT=1 they fail instead.
//
// The package has no API.
package scaleout
