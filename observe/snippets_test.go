package observe_test

import (
	"bytes"
	"context"
	"log"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/observe"
)

// The package doc's snippet, verbatim between the "snippet" markers, on
// SQLite: a claim from a table that does not exist fails, and the observer
// logs the failure.
func TestSnippetPackageDoc(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(t.TempDir() + "/app.db")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := sqlite.New(ctx, db, dialect.Options{})
	require.NoError(t, err)
	var buf bytes.Buffer
	log.SetOutput(&buf)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })

	// snippet: godoc-observe
	obs := observe.Func(func(ctx context.Context, e observe.Event) {
		if e.Err != nil {
			log.Printf("%s on %s failed: %v", e.Op, e.Table, e.Err)
		}
	})
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "outbox"}, Observer: obs}
	// end snippet

	c, err := claim.New[struct{}](d, cfg, nil)
	require.NoError(t, err)
	_, err = c.Claim(ctx)
	require.ErrorIs(t, err, dialect.ErrInvalidConfig, "no table outbox")
	require.Contains(t, buf.String(), "claim.claim on outbox failed: ")
}
