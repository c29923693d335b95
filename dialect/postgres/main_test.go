package postgres

import (
	"log/slog"
	"os"
	"testing"
)

// TestMain keeps the dialects the tests build without a Logger (which log
// to slog.Default) quiet.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}
