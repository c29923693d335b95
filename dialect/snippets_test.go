package dialect_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

// The tests in this file run the code snippets of the dialect package's
// doc comments verbatim, between the "snippet" markers; the repository's
// snippet test checks that the documentation still holds exactly this code.

func TestSnippetRetry(t *testing.T) {
	ctx := context.Background()
	var db *sql.DB
	userID := 7
	calls := 0
	writeSnapshot := func(ctx context.Context, db *sql.DB, userID int) error {
		calls++
		if calls < 3 {
			return fmt.Errorf("write snapshot of %d: %w", userID, dialect.ErrRetryable) // a deadlock, say
		}
		return nil
	}
	// snippet: godoc-retry
	err := dialect.Retry(ctx, dialect.RetryPolicy{}, "write snapshot", func() error {
		return writeSnapshot(ctx, db, userID)
	})
	// end snippet
	require.NoError(t, err)
	require.Equal(t, 3, calls, "the conflicts were retried")
}

func TestSnippetStatusString(t *testing.T) {
	table :=
		// snippet: godoc-status-string
		dialect.ClaimTable{Table: "jobs", Done: dialect.StatusString("SENT")}
	// end snippet
	require.NoError(t, table.WithDefaults().Validate())
	require.Equal(t, "SENT", table.WithDefaults().Done.String())
}
