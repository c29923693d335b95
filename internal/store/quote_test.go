package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

func TestQuoteName(t *testing.T) {
	t.Parallel()
	b := fakeBackend(&fakeDB{}, true)
	require.Equal(t, `"s"."t"`, b.quoteName("s.t"))
	require.Equal(t, "`t`", QuoteWith('`')("t"))
	require.Equal(t, "`t``x`", QuoteWith('`')("t`x"), "an embedded quote is doubled")
}

// FuzzQuote checks that whatever passes validation quotes to parts that are
// wrapped in quotes, contain no lone quote character and unquote back to
// the input; everything else is refused.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"t", "a.b", `a"b`, "a`b", "t; DROP TABLE x", "", "..", "x.y.z", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if err := ValidateIdent("f", name); err != nil {
			require.ErrorIs(t, err, dialect.ErrInvalidConfig)
			return
		}
		for _, q := range []byte{'"', '`'} {
			out := fakeBackend(&fakeDB{}, true, func(d *fakeDriver) { d.quote = QuoteWith(q) }).quoteName(name)
			var parts []string
			for _, p := range strings.Split(out, ".") {
				require.True(t, len(p) >= 2 && p[0] == q && p[len(p)-1] == q, "%q is quoted", p)
				inner := p[1 : len(p)-1]
				require.NotContains(t, strings.ReplaceAll(inner, string([]byte{q, q}), ""), string(q))
				parts = append(parts, strings.ReplaceAll(inner, string([]byte{q, q}), string(q)))
			}
			require.Equal(t, name, strings.Join(parts, "."))
		}
	})
}
