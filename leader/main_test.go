package leader_test

import (
	"log/slog"
	"testing"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestMain runs a child process's role, or the tests with the electors'
// default logger quiet.
func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	slog.SetDefault(slog.New(slog.DiscardHandler))
	dbtest.Main(m)
}
