package coalesce_test

import (
	"log/slog"
	"testing"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestMain runs a child's role when the binary was re-executed as one (see
// kill_test.go), and keeps the claimers the tests build quiet.
func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	slog.SetDefault(slog.New(slog.DiscardHandler))
	dbtest.Main(m)
}
