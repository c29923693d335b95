package dialect_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

func TestStatusOf(t *testing.T) {
	t.Parallel()
	s, err := store.StatusOf("Pending", "PENDING")
	require.NoError(t, err)
	require.Equal(t, "'PENDING'", s.Literal())
	n, err := store.StatusOf("Pending", int8(3))
	require.NoError(t, err)
	require.Equal(t, "3", n.Literal())
	require.True(t, n.IsNumeric())
	for _, bad := range []any{nil, "", "a'b", "a b", 1.5, true, []byte("x"), string(make([]byte, 65))} {
		_, err := store.StatusOf("Pending", bad)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%v", bad)
	}
}

func TestClaimTableValidate(t *testing.T) {
	t.Parallel()
	p, _ := store.StatusOf("p", "P")
	r, _ := store.StatusOf("p", "R")
	d, _ := store.StatusOf("p", "D")
	f, _ := store.StatusOf("p", "F")
	i, _ := store.StatusOf("p", 4)
	ok := dialect.ClaimTable{Table: "t", ID: "id", Status: "s", Token: "tok", ClaimedAt: "c", Pending: p, Processing: r, Done: d, Failed: f}
	require.NoError(t, ok.Validate())
	noFailed := ok
	noFailed.Failed = dialect.Status{}
	require.ErrorContains(t, noFailed.Validate(), "Failed: status value is not set", "rows that keep failing are parked with it")
	mixed := ok
	mixed.Failed = i
	require.ErrorIs(t, mixed.Validate(), dialect.ErrInvalidConfig)
	dup := ok
	dup.Done = p
	require.ErrorIs(t, dup.Validate(), dialect.ErrInvalidConfig)
}

func TestNewToken(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		tok := store.NewToken()
		require.Len(t, tok, store.TokenLen)
		require.LessOrEqual(t, len(tok), store.MaxTokenLen)
		require.False(t, seen[tok])
		seen[tok] = true
	}
}

func TestStatusConstructors(t *testing.T) {
	t.Parallel()
	s := dialect.StatusString("SENT")
	require.True(t, s.IsSet())
	require.Equal(t, "'SENT'", s.Literal())
	n := dialect.StatusInt(3)
	require.True(t, n.IsNumeric())
	require.Equal(t, "3", n.Literal())
	via, err := store.StatusOf("Done", s)
	require.NoError(t, err)
	require.Equal(t, s, via)

	// A refused string holds no value: it never renders as SQL, StatusOf and
	// Validate report it, and no default replaces it.
	ok := dialect.ClaimTable{Table: "t"}
	for _, bad := range []string{"", "a'b", "a b", "x;--", string(make([]byte, 65))} {
		var st dialect.Status
		require.NotPanics(t, func() { st = dialect.StatusString(bad) })
		require.False(t, st.IsSet(), "%q", bad)
		require.Equal(t, "''", st.Literal(), "%q", bad)
		_, err := store.StatusOf("Done", st)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%q", bad)
		tbl := ok
		tbl.Failed = st
		err = tbl.WithDefaults().Validate()
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%q", bad)
		require.ErrorContains(t, err, "Failed")
	}
}
