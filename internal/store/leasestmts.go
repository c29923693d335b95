package store

import "github.com/claimlock/claimlock/dialect"

// LeaseNames are what an engine's lease templates see of the table: its
// quoted identifiers (optional columns "").
type LeaseNames struct {
	// Table, and the key, owner, locked-at, expires-at, fence and status
	// columns.
	Table, Key, Owner, LockedAt, ExpiresAt, Fence, TaskStatus string
	// TextKey is true for text keys.
	TextKey bool
	// TextTimes: the locked-at and expires-at columns hold text dates
	// (SQLite).
	TextTimes bool
	// LockedAtPer and ExpiresAtPer are as [ClaimNames.ClaimedAtPer].
	LockedAtPer, ExpiresAtPer string
}

// leaseStmt is one statement of a lease store, by the [LeaseSQL] template
// it renders (lease statements have no variants).
type leaseStmt uint8

const (
	lAcquire leaseStmt = iota
	lInsert
	lReadBack
	lRenew
	lRelease
	lForce
	lInspect
	lFinish
	lReleaseHold
	lFinishHold
	lReap
	lHeld
	lColumns
)

// leaseEntry is one line of the lease table: a statement, its name in the
// golden files and in Statements ("": not listed), and the condition under
// which a store has it (nil: always, when the engine has the template).
type leaseEntry struct {
	stmt         leaseStmt
	name, listed string
	when         func(dialect.LeaseTable) bool
}

// leaseTable is every statement a lease store renders, in the order of the
// golden files.
var leaseTable = []leaseEntry{
	{lAcquire, "lease acquire", "acquire", nil},
	{lInsert, "lease insert", "insert", func(t dialect.LeaseTable) bool { return t.Keyed }},
	{lReadBack, "lease read back", "read back", nil},
	{lRenew, "lease renew", "renew", nil},
	{lRelease, "lease release", "release", nil},
	{lForce, "lease force release", "force", nil},
	{lInspect, "lease inspect", "inspect", nil},
	{lFinish, "lease finish", "finish", hasStatus},
	// A minimum hold keeps the owner and moves the expiry.
	{lReleaseHold, "lease release with hold", "release hold", ownsAndExpires},
	{lFinishHold, "lease finish with hold", "finish hold", func(t dialect.LeaseTable) bool { return ownsAndExpires(t) && hasStatus(t) }},
	{lReap, "lease reap", "reap", expires},
	{lHeld, "lease held", "held", nil},
	{lColumns, "columns", "", nil},
}

func hasStatus(t dialect.LeaseTable) bool      { return t.Status != "" }
func expires(t dialect.LeaseTable) bool        { return t.ExpiresAt != "" }
func ownsAndExpires(t dialect.LeaseTable) bool { return t.Owner != "" && t.ExpiresAt != "" }

// source returns the template of s with the engine's defines, or "" where
// the engine has no such statement; the generic statements fill in those
// the engine leaves empty.
func (l *LeaseSQL) source(s leaseStmt) string {
	pick := func(own, generic string) string {
		if own != "" {
			return own
		}
		return generic
	}
	src := map[leaseStmt]string{
		lAcquire: l.Acquire, lInsert: l.Insert, lReadBack: l.ReadBack, lRenew: l.Renew,
		lRelease: pick(l.Release, genericLeaseSQL.Release), lForce: pick(l.Force, genericLeaseSQL.Force),
		lInspect: l.Inspect, lFinish: pick(l.Finish, genericLeaseSQL.Finish),
		lReleaseHold: pick(l.ReleaseHold, genericLeaseSQL.ReleaseHold), lFinishHold: pick(l.FinishHold, genericLeaseSQL.FinishHold),
		lReap: l.Reap, lHeld: l.Held, lColumns: l.Columns,
	}[s]
	if src == "" {
		return ""
	}
	return l.Common + src
}

// leaseNames quotes a validated lease table description.
func (b *Backend) leaseNames(t dialect.LeaseTable) LeaseNames {
	q := b.quoteOpt
	return LeaseNames{
		Table: b.quoteName(t.Table), Key: q(t.Key), Owner: q(t.Owner), LockedAt: q(t.LockedAt),
		ExpiresAt: q(t.ExpiresAt), Fence: q(t.Fence), TaskStatus: q(t.Status), TextKey: t.KeyKind == dialect.IDText,
		TextTimes: t.TextTimes, LockedAtPer: b.timePer(t.LockedAtFormat), ExpiresAtPer: b.timePer(t.ExpiresAtFormat),
	}
}

// renderLeases renders every statement of the lease table that spec has on
// b's engine.
func (b *Backend) renderLeases(spec dialect.LeaseTable) (statements[leaseStmt], error) {
	var out statements[leaseStmt]
	names := b.leaseNames(spec)
	for _, e := range leaseTable {
		if e.when != nil && !e.when(spec) {
			continue
		}
		src := b.leases.source(e.stmt)
		if src == "" {
			continue
		}
		if err := out.add(b, e.stmt, e.name, e.listed, src, names, names.TextKey); err != nil {
			return out, err
		}
	}
	return out, nil
}
