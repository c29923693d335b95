package postgres

import (
	"log/slog"
	"testing"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/golden"
)

// TestGoldenSQL compares every statement the dialect renders, for each
// table variant, with testdata/golden (PostgreSQL 16; run with -update
// after a deliberate change and review the diff).
func TestGoldenSQL(t *testing.T) {
	golden.Check(t, build(nil, 160004, "16.4", dialect.Options{}, slog.Default()), false)
}
