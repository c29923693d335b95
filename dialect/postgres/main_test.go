package postgres

import (
	"log/slog"
	"testing"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestMain keeps the dialects the tests build without a Logger (which log
// to slog.Default) quiet.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	dbtest.Main(m)
}
