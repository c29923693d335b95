package dialecttest

// Outages: an operation that never reached the server is a plain retryable
// error, one whose connection broke after the statement was written has an
// unknown outcome, on every engine reached over the network.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/netfault"
)

// outageFixture opens the harness through a proxy and claims four rows.
func outageFixture(t *testing.T, h Harness) (*fixture, *netfault.Proxy, string, []claimed) {
	t.Helper()
	if h.OpenVia == nil {
		t.Skipf("%s: no network between the library and the database: nothing can be refused or dropped on the way", h.Name)
	}
	var p *netfault.Proxy
	d, db := h.OpenVia(t, func(server string) string {
		p = netfault.New(t, server)
		return p.Addr()
	})
	require.NotNil(t, p, "OpenVia must call via")
	f := newFixtureOn(t, d, db, func(c *dialect.ClaimTable) { c.Table = "cl_outage" })
	f.insert(1, 4)
	tok, got := f.claim(d.Capabilities().PreferredStrategy, 1, 4)
	require.Len(t, got, 4)
	return f, p, tok, got
}

func testOutageNothingSent(t *testing.T, h Harness) {
	f, p, tok, got := outageFixture(t, h)
	p.Down()
	// Pools ping a connection idle for a second before handing it out;
	// until then a pooled connection the server closed can still take a
	// statement whose fate the driver cannot know.
	time.Sleep(1100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, op := range map[string]func() error{
		"ack": func() error {
			_, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{got[0].ID}, Outcome: store.OutcomeDone})
			return err
		},
		"heartbeat": func() error { _, err := f.cs.Heartbeat(ctx, tok); return err },
		"release":   func() error { _, err := f.cs.Release(ctx, tok, []any{got[1].ID}); return err },
		"claim": func() error {
			_, err := f.cs.Claim(ctx, &store.ClaimParams{Token: store.NewToken(), Limit: 1, ScopeValues: []any{1},
				Strategy: f.d.Capabilities().PreferredStrategy}, func(store.Scanner) error { return nil })
			return err
		},
	} {
		err := op()
		require.Error(t, err, name)
		require.Equal(t, errclass.Unreachable, errclass.Of(err), "%s: %v", name, err)
		require.True(t, dialect.IsRetryable(err), "%s: %v", name, err)
		require.False(t, errors.Is(err, dialect.ErrOutcomeUnknown), "%s: nothing was sent, yet: %v", name, err)
	}
	p.Up()
	for _, c := range got {
		r := f.row(c.ID)
		require.Equal(t, "PROCESSING", r.Status, "nothing reached the server")
		require.Equal(t, tok, r.Token)
	}
	// The server answers again: the same ack goes through.
	res := f.ack(tok, []any{got[0].ID}, store.OutcomeDone, 0)
	require.Empty(t, res.Lost)
}

func testOutageAfterWrite(t *testing.T, h Harness) {
	f, p, tok, got := outageFixture(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The ack's statement names the table; the connection breaks once the
	// statement is on its way, before any reply.
	p.DropAfterWrite("cl_outage")
	_, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{got[0].ID}, Outcome: store.OutcomeDone})
	require.Error(t, err)
	require.ErrorIs(t, err, dialect.ErrOutcomeUnknown)
	require.Equal(t, errclass.Connection, errclass.Of(err), "%v", err)
	// The row is done or still ours, never anyone else's.
	r := f.row(got[0].ID)
	require.Contains(t, []string{"SENT", "PROCESSING"}, r.Status)
	if r.Status == "PROCESSING" {
		require.Equal(t, tok, r.Token)
	}
}

// testOutageAtCommit: a transaction whose COMMIT was written before its
// connection broke may have committed. The error says the outcome is
// unknown, and the transaction is not run again as if nothing had been
// sent. (pgx reports the broken COMMIT as "conn closed", safe to retry.)
func testOutageAtCommit(t *testing.T, h Harness) {
	f, p, tok, got := outageFixture(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// An ack with versions is decided row by row in a transaction.
	p.DropAfterWriteFold("commit")
	_, err := f.cs.Ack(ctx, &store.AckParams{Token: tok, IDs: []any{got[0].ID}, Versions: []int64{got[0].Version}, Outcome: store.OutcomeDone})
	require.Error(t, err)
	require.ErrorIs(t, err, dialect.ErrOutcomeUnknown)
	r := f.row(got[0].ID)
	require.Contains(t, []string{"SENT", "PROCESSING"}, r.Status)
	if r.Status == "PROCESSING" {
		require.Equal(t, tok, r.Token)
	}
}
