package ident_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/ident"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"t", "T_1", "_", "schema.table", strings.Repeat("a", 63)} {
		require.NoError(t, ident.Check(ok), ok)
	}
	for _, bad := range []string{"", "t; DROP TABLE x", `a"b`, "a`b", "a b", "1a", "a.", ".a", "a.b.c",
		strings.Repeat("a", 64), "tаble", "a/*x*/", "a\x00b", "é"} {
		require.Error(t, ident.Check(bad), "%q", bad)
	}
	require.Error(t, ident.CheckColumn("s.id"), "columns are not qualified")
	require.NoError(t, ident.CheckColumn("id"))
}
