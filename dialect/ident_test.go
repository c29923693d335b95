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

func TestQuote(t *testing.T) {
	t.Parallel()
	q, err := dialect.Quote("Table", "s.t", '"')
	require.NoError(t, err)
	require.Equal(t, `"s"."t"`, q)
	q, err = dialect.Quote("Table", "t", '`')
	require.NoError(t, err)
	require.Equal(t, "`t`", q)
	_, err = dialect.Quote("Table", "t`x", '`')
	require.ErrorIs(t, err, dialect.ErrInvalidConfig)
}

// FuzzQuote checks that whatever the input, Quote either rejects it or
// returns parts that are wrapped in quotes, contain no quote character
// inside, and unquote back to the input.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"t", "a.b", `a"b`, "a`b", "t; DROP TABLE x", "", "..", "x.y.z", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		for _, q := range []byte{'"', '`'} {
			out, err := dialect.Quote("f", name, q)
			if err != nil {
				require.ErrorIs(t, err, dialect.ErrInvalidConfig)
				continue
			}
			parts := strings.Split(name, ".")
			var rebuilt []string
			rest := out
			for i := range parts {
				require.True(t, len(rest) >= 2 && rest[0] == q, "part %d of %q starts with a quote", i, out)
				end := strings.IndexByte(rest[1:], q)
				require.GreaterOrEqual(t, end, 0, "closing quote in %q", out)
				inner := rest[1 : 1+end]
				require.NotContains(t, inner, string(q))
				rebuilt = append(rebuilt, inner)
				rest = rest[2+end:]
				if i < len(parts)-1 {
					require.True(t, strings.HasPrefix(rest, "."), "dot between parts in %q", out)
					rest = rest[1:]
				}
			}
			require.Empty(t, rest, "nothing after the last quote in %q", out)
			require.Equal(t, name, strings.Join(rebuilt, "."))
		}
	})
}
