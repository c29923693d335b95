package schedule_test

import (
	"log/slog"
	"testing"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestMain keeps the schedulers the tests build without a Logger quiet.
func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	slog.SetDefault(slog.New(slog.DiscardHandler))
	dbtest.Main(m)
}
