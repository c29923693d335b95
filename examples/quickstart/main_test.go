package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect/sqlite"
)

// The README's program, run twice in a fresh directory: the first run sends
// both messages once, the second inserts two more and sends only those.
func TestQuickstart(t *testing.T) {
	t.Chdir(t.TempDir())
	require.Equal(t, "send to ann@example.com\nsend to bob@example.com\n", capture(t, main))
	require.Equal(t, "send to ann@example.com\nsend to bob@example.com\n", capture(t, main), "the second run's new rows only")
	db, err := sqlite.Open("outbox.db")
	require.NoError(t, err)
	defer db.Close()
	var done, all int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FILTER (WHERE status = 'DONE'), COUNT(*) FROM outbox").Scan(&done, &all))
	require.Equal(t, [2]int{4, 4}, [2]int{done, all})
}

// capture runs fn with os.Stdout going to a pipe and returns what it wrote.
func capture(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	fn()
	os.Stdout = old
	require.NoError(t, w.Close())
	var b bytes.Buffer
	_, err = io.Copy(&b, r)
	require.NoError(t, err)
	return strings.ReplaceAll(b.String(), "\r\n", "\n")
}
