package mysql

import (
	"log/slog"
	"testing"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/testkit/golden"
)

// TestGoldenSQL compares every statement the dialect renders, for each
// table variant, with testdata/golden (MySQL 8.0 with READ COMMITTED
// sessions; run with -update after a deliberate change and review the
// diff).
func TestGoldenSQL(t *testing.T) {
	golden.Check(t, build(nil, ParseVersion("8.0.36", "MySQL Community Server - GPL"), "8.0.36", dialect.Options{}, slog.Default(), true), false)
}
