package store

// LeaseSQL are an engine's lease-table statements as text/template sources
// over [LeaseNames] (Table, Key, Owner, LockedAt, ExpiresAt, Fence;
// optional columns ""), with the values {{arg "key"}}, {{arg "owner"}},
// {{arg "ttl"}} and {{arg "limit"}}. Expiries are read as integer
// microseconds since the Unix epoch on the database clock; without an
// ExpiresAt column a lease expires at LockedAt + ttl. Fences read 0
// without a Fence column. Every test of whether a lease has expired adds
// {{arg "slack"}}, the resolution of the user's time columns (defaultSlack).
//
// Without an Owner column (LeaseNames.Owner "") a lease is identified by
// its stamp: the LockedAt value as an integer on the database clock.
// Statements that return a lease return fence, expiry and stamp; the
// holder presents its stamp as {{arg "stamp"}} where others present
// {{arg "owner"}}. Which statements a store renders is the table in
// leasestmts.go.
type LeaseSQL struct {
	// Acquire takes "key" for "owner" when it is free or expired,
	// incrementing the fence. On a Returning engine it returns the fence and
	// expiry.
	Acquire string
	// Insert creates the row of a missing key, held by "owner" (keyed
	// tables); a duplicate key means someone else created it first. On a
	// Returning engine it returns the fence and expiry.
	Insert string
	// ReadBack returns the fence and expiry of "key" while "owner" holds it
	// (engines without RETURNING).
	ReadBack string
	// Renew extends the lease of "key" while "owner" holds it, strictly
	// forward. On a Returning engine it returns the fence and expiry.
	Renew string
	// Release frees "key" if "owner" holds it; Force frees it whoever does.
	Release, Force string
	// Inspect returns owner (the stamp as text without an Owner column),
	// fence, expiry and a boolean "expired" on the database clock for "key";
	// without an ExpiresAt column the expiry is LockedAt + "ttl" and
	// "expired" is Acquire's test of it; then the TaskStatus column as
	// text (NULL without one).
	Inspect string
	// Finish sets Status to {{arg "status"}} and frees "key" if its holder
	// still holds it.
	Finish string
	// ReleaseHold and FinishHold are Release and Finish under a minimum
	// hold (tables with Owner and ExpiresAt only): while {{arg "hold"}}, a
	// time on the database clock, is ahead of the database's now, the lease
	// stays held by "owner" with its expiry moved to the hold, so the key
	// cannot be acquired before it; otherwise they free the lease as Release
	// and Finish do. They use the engine's {{template "hold" .}}, that SET
	// list.
	ReleaseHold, FinishHold string
	// Reap frees at most "limit" expired leases (needs ExpiresAt).
	Reap string
	// Held returns key, owner (the stamp as text without an Owner
	// column), fence, expiry, microseconds until the expiry (0 once past)
	// and a boolean "expired" of at most "limit" leases whose ExpiresAt is
	// set, soonest first; without an ExpiresAt column, of the leases with
	// an owner (a LockedAt without an Owner column), expiring at LockedAt
	// + "ttl", oldest LockedAt first.
	Held string
	// Columns is the catalog query of [ClaimSQL.Columns].
	Columns string
	// Common is prepended to every template.
	Common string
}

// genericLeaseSQL are the lease statements that every engine writes the
// same way; an engine's LeaseSQL leaves them empty to use these. They use
// the engine's {{template "held" .}} (the holder's condition: owner or
// stamp) and {{template "free" .}} (the SET list that frees a lease).
var genericLeaseSQL = LeaseSQL{
	Release: `
UPDATE {{.Table}} SET {{template "free" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,

	Finish: `
UPDATE {{.Table}} SET {{.TaskStatus}} = {{arg "status"}}, {{template "free" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,

	Force: `
UPDATE {{.Table}} SET {{template "free" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{or .Owner .LockedAt}} IS NOT NULL`,

	ReleaseHold: `
UPDATE {{.Table}} SET {{template "hold" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,

	FinishHold: `
UPDATE {{.Table}} SET {{.TaskStatus}} = {{arg "status"}}, {{template "hold" .}}
WHERE {{.Key}} = {{arg "key"}} AND {{template "held" .}}`,
}
