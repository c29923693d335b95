package store

import (
	"context"

	"github.com/claimlock/claimlock/dialect"
)

// Base implements [dialect.Dialect] for an engine; engine packages embed it
// in their exported Dialect type.
type Base struct {
	E      *Engine
	Claims ClaimSQL
	Leases LeaseSQL
	// Override, if not nil, runs claims instead of ClaimSQL.Claim.
	Override Claimer
}

// Capabilities implements [dialect.Dialect].
func (b *Base) Capabilities() dialect.Capabilities { return b.E.Caps }

// QuoteIdent implements [dialect.Dialect].
func (b *Base) QuoteIdent(field, name string) (string, error) {
	if err := dialect.ValidateIdent(field, name); err != nil {
		return "", err
	}
	return b.E.QuoteName(name), nil
}

// ClaimStore implements [dialect.Dialect].
func (b *Base) ClaimStore(spec dialect.ClaimTable) (dialect.ClaimStore, error) {
	return NewClaims(b.E, b.Claims, spec, b.Override)
}

// LeaseStore implements [dialect.Dialect].
func (b *Base) LeaseStore(spec dialect.LeaseTable) (dialect.LeaseStore, error) {
	return NewLeases(b.E, b.Leases, spec)
}

// CreateTableDDL implements [dialect.Dialect].
func (b *Base) CreateTableDDL(def dialect.TableDef) ([]string, error) {
	return b.E.CreateTableDDL(def)
}

// ExecDDL implements [dialect.Dialect].
func (b *Base) ExecDDL(ctx context.Context, stmts []string) error {
	return b.E.ExecDDL(ctx, stmts)
}

// Retries implements [dialect.Dialect].
func (b *Base) Retries() int64 { return b.E.Retry.Retries() }
