package render

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatementArguments(t *testing.T) {
	t.Parallel()
	d := Style{Dollar: true, ArrayKeys: true, KeysIntArray: "= ANY(%s::bigint[])", KeysTextArray: "= ANY(%s::text[])"}
	st, err := d.Render("x", `SELECT {{arg "token"}} WHERE a{{scope .}} AND id {{keys}} LIMIT {{arg "limit"}}`, []string{`"s1"`, `"s2"`}, false)
	require.NoError(t, err)
	require.Equal(t, `SELECT $1 WHERE a AND "s1" = $2 AND "s2" = $3 AND id = ANY($4::bigint[]) LIMIT $5`, st.SQL)
	q, args := st.Bind(d, &Args{Token: "tok", Limit: 7, Scope: []any{"x", 9}, Keys: []any{int64(1), int64(2)}})
	require.Equal(t, st.SQL, q)
	require.Equal(t, []any{"tok", "x", 9, []int64{1, 2}, int64(7)}, args)

	q2 := Style{}
	st, err = q2.Render("x", `UPDATE t SET a = {{arg "token"}} WHERE id {{keys}} AND b = {{arg "limit"}}`, nil, false)
	require.NoError(t, err)
	q, args = st.Bind(q2, &Args{Token: "tok", Limit: 2, Keys: []any{"a", "b", "c"}})
	require.Equal(t, `UPDATE t SET a = ? WHERE id IN (?, ?, ?) AND b = ?`, q)
	require.Equal(t, []any{"tok", "a", "b", "c", int64(2)}, args)

	_, err = d.Render("bad", `{{.Nope}}`, struct{ Table string }{}, false)
	require.Error(t, err, "a template naming a missing field is refused when the store is built")
}

// A placeholder name that is not one of Args' fails when the statement is
// rendered, not when it first runs.
func TestPlaceholderTypo(t *testing.T) {
	t.Parallel()
	_, err := Style{}.Render("heartbeat", `UPDATE t SET a = 1 WHERE token = {{arg "tokn"}}`, nil, false)
	require.ErrorContains(t, err, `unknown placeholder name "tokn"`)
	_, err = Style{}.Render("x", `SELECT {{arg "scope"}}, {{arg "scope01"}}`, nil, false)
	require.ErrorContains(t, err, `unknown placeholder name "scope"`)
}

// A source is parsed once and shared (templates): renders of one source by
// different styles, with text or integer keys, at once, each get their own
// placeholders and argument names.
func TestSharedSourceRendersApart(t *testing.T) {
	t.Parallel()
	const src = `UPDATE t SET a = {{arg "token"}} WHERE id {{keys}}{{scope .}}`
	arrays := Style{Dollar: true, ArrayKeys: true, KeysIntArray: "= ANY(%s::bigint[])", KeysTextArray: "= ANY(%s::text[])"}
	cases := []struct {
		style    Style
		textKeys bool
		scope    []string
		want     string
		names    []string
	}{
		{arrays, false, nil, `UPDATE t SET a = $1 WHERE id = ANY($2::bigint[])`, []string{"token", "keys"}},
		{arrays, true, []string{`"s"`}, `UPDATE t SET a = $1 WHERE id = ANY($2::text[]) AND "s" = $3`, []string{"token", "keys", "scope0"}},
		{Style{}, false, []string{"s", "u"}, "UPDATE t SET a = ? WHERE id IN (\x00keys\x00) AND s = ? AND u = ?", []string{"token", "keys", "scope0", "scope1"}},
	}
	var wg sync.WaitGroup
	for range 8 {
		for _, c := range cases {
			wg.Go(func() {
				st, err := c.style.Render("x", src, c.scope, c.textKeys)
				assert.NoError(t, err)
				assert.Equal(t, c.want, st.SQL)
				assert.Equal(t, c.names, st.Names())
			})
		}
	}
	wg.Wait()
	_, err := Style{}.Render("first", `{{.Nope}`, nil, false)
	require.ErrorContains(t, err, "statement first:")
	_, err = Style{}.Render("second", `{{.Nope}`, nil, false)
	require.ErrorContains(t, err, "statement second:", "a parse error, kept with its source, names the statement that rendered it")
}
