package store

import (
	"context"

	"github.com/claimlock/claimlock/internal/store/render"
)

// IndexDDL implements [ClaimStore].
func (s *Claims) IndexDDL() []string { return s.IndexDDLWith(IndexOptions{}) }

// IndexDDLWith implements [IndexDDLer].
func (s *Claims) IndexDDLWith(opts IndexOptions) []string {
	var out []string
	for _, k := range indexKinds {
		if ix := s.st(claimKey{t: tIndex, index: k, v: ClaimVariant{Online: opts.Online}}); ix.SQL != "" {
			out = append(out, ix.SQL)
		}
	}
	return out
}

// MissingIndexes implements [ClaimStore].
func (s *Claims) MissingIndexes(ctx context.Context) ([]string, error) {
	return s.MissingIndexesWith(ctx, IndexOptions{})
}

// MissingIndexesWith implements [IndexDDLer]: it looks the
// recommended indexes up by name in the table's schema. An index that
// exists but that queries cannot use (PostgreSQL's INVALID index, left by
// a CREATE INDEX CONCURRENTLY that failed) is missing too: its DDL is the
// engine's DROP INDEX, then the CREATE INDEX.
func (s *Claims) MissingIndexesWith(ctx context.Context, opts IndexOptions) ([]string, error) {
	schema, table := SplitName(s.spec.Table)
	var out []string
	v := ClaimVariant{Online: opts.Online}
	for _, k := range indexKinds {
		create := s.st(claimKey{t: tIndex, index: k, v: v})
		if create.SQL == "" {
			continue // an index the engine does not use, or the table does not need
		}
		a := &render.Args{Table: table, Index: IndexName(s.spec.Table, k.suffix())}
		if schema != "" {
			a.Schema = schema
		}
		var usable, present int64
		err := s.b.Do(ctx, "missing indexes", true, func() error {
			_, err := s.b.queryRow(ctx, s.b.db, s.st(claimKey{t: tIndexExists}), a, &usable, &present)
			return err
		})
		if err != nil {
			return nil, err
		}
		if usable > 0 {
			continue
		}
		if drop := s.st(claimKey{t: tDropIndex, index: k, v: v}).SQL; present > 0 && drop != "" {
			out = append(out, drop)
		}
		out = append(out, create.SQL)
	}
	return out, nil
}
