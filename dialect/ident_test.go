package dialect_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

func TestValidateIdent(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"t", "T_1", "_", "schema.table", strings.Repeat("a", 63)} {
		require.NoError(t, dialect.ValidateIdent("Table", ok), ok)
	}
	for _, bad := range []string{"", "t; DROP TABLE x", `a"b`, "a`b", "a b", "1a", "a.", ".a", "a.b.c",
		strings.Repeat("a", 64), "tаble", "a/*x*/", "a\x00b", "é"} {
		err := dialect.ValidateIdent("Table", bad)
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, "%q", bad)
		require.Contains(t, err.Error(), "Table", "the error names the field")
	}
	require.Error(t, dialect.ValidateColumn("ID", "s.id"), "columns are not qualified")
}
