package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestRunSQLiteTiny(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{
		"-driver", "sqlite", "-workers", "1,3", "-batch", "7", "-rows", "150", "-perrow-rows", "40",
		"-json", "-large", "-small-rows", "200", "-large-rows", "1000", "-task-rows", "50",
	}, &out, &errOut)
	require.NoError(t, err, errOut.String())

	seen := map[string]int{}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, line := range lines {
		var r result
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		require.Equal(t, "sqlite", r.Engine)
		seen[r.Measure]++
		if r.Measure == measureLarge {
			require.Positive(t, r.SmallP50ms)
			require.Positive(t, r.LargeP50ms)
			require.InDelta(t, r.LargeP50ms/r.SmallP50ms, r.SizeRatio, 1e-9)
			continue
		}
		require.Contains(t, []int{1, 3}, r.Workers)
		require.Zero(t, r.Overlaps, line)
		require.Zero(t, r.Missing, "every row processed: %s", line)
		require.Zero(t, r.Duplicates, "no row processed twice: %s", line)
		require.Positive(t, r.RowsPerS, line)
		if r.Measure == measureCeiling {
			require.Equal(t, 150, r.Rows)
			continue
		}
		require.Positive(t, r.Ratio, line)
		require.Positive(t, r.P50ms, line)
		require.GreaterOrEqual(t, r.P99ms, r.P50ms, line)
		require.Equal(t, "token-update", r.Strategy, "SQLite has one strategy")
	}
	require.Equal(t, map[string]int{
		measureCeiling: 2, measureBatched: 2, measurePiped: 2, measureDelete: 2, measurePipedDel: 2, measureLater: 2, measurePerRow: 2, measureLarge: 1,
	}, seen)
}

func TestRunTextOutputAndBadFlags(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-workers", "2", "-batch", "10", "-rows", "60", "-perrow-rows", "0", "-strategy", "auto"}, &out, &errOut))
	text := out.String()
	require.Contains(t, text, "ceiling")
	require.Contains(t, text, "claim+ack/token-update")
	require.Contains(t, text, "overlaps 0  missing 0  duplicates 0")
	require.NotContains(t, text, measurePerRow)

	// -measures runs only the measures named, and the ceiling.
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"-workers", "2", "-batch", "10", "-rows", "60", "-strategy", "auto", "-measures", "claim+delete"}, &out, &errOut))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	require.Contains(t, lines[0], "ceiling")
	require.Contains(t, lines[1], "claim+delete/token-update")
	require.Contains(t, lines[1], "overlaps 0  missing 0  duplicates 0")

	for _, bad := range [][]string{{"-workers", "0"}, {"-strategy", "nope"}, {"-batch", "-1"}, {"-driver", "oracle"}, {"-large-layout", "diagonal"}, {"-measures", "claim+nothing"}} {
		require.Error(t, run(context.Background(), bad, &out, &errOut), "%v", bad)
	}
}

func TestLargeSpreadLayout(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{
		"-driver", "sqlite", "-workers", "1", "-batch", "7", "-rows", "20", "-perrow-rows", "0", "-strategy", "auto",
		"-json", "-large", "-large-layout", "spread", "-small-rows", "100", "-large-rows", "1000", "-task-rows", "30",
	}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r result
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &r))
	require.Equal(t, measureLarge, r.Measure)
	require.Equal(t, "token-update/spread", r.Strategy)
	require.Positive(t, r.SmallP50ms)
	require.Positive(t, r.LargeP50ms)
}

func TestChart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-workers", "1,2", "-batch", "10", "-rows", "60", "-perrow-rows", "0",
		"-strategy", "auto", "-json", "-chart", dir + "/run.svg"}, &out, &errOut), errOut.String())
	svg, err := os.ReadFile(dir + "/run.svg")
	require.NoError(t, err)
	require.NoError(t, xml.Unmarshal(svg, new(struct{})), "the chart is well-formed XML")
	for _, series := range []string{measureCeiling, measureBatched + "/token-update", measurePiped + "/token-update", measureLater + "/token-update",
		measureDelete + "/token-update", measurePipedDel + "/token-update"} {
		require.Contains(t, string(svg), ">"+series+"</text>", "legend entry %s", series)
	}
	// Two panels, six series, each a line over the two worker counts.
	require.Equal(t, 12, strings.Count(string(svg), "<polyline"))

	// The same chart from the -json output, twice over (two engines' files).
	require.NoError(t, os.WriteFile(dir+"/a.jsonl", out.Bytes(), 0o644))
	other := strings.ReplaceAll(out.String(), `"engine":"sqlite"`, `"engine":"other"`)
	require.NoError(t, os.WriteFile(dir+"/b.jsonl", []byte(other), 0o644))
	require.NoError(t, run(context.Background(), []string{"-chart", dir + "/both.svg", "-chart-from", dir + "/a.jsonl," + dir + "/b.jsonl"}, &out, &errOut))
	both, err := os.ReadFile(dir + "/both.svg")
	require.NoError(t, err)
	require.Equal(t, 24, strings.Count(string(both), "<polyline"))
	require.Contains(t, string(both), "other ")

	require.Error(t, run(context.Background(), []string{"-chart-from", dir + "/a.jsonl"}, &out, &errOut), "-chart-from without -chart")
	require.Error(t, run(context.Background(), []string{"-chart", dir + "/x.svg", "-chart-from", dir + "/missing.jsonl"}, &out, &errOut))
	require.NoError(t, os.WriteFile(dir+"/bad.jsonl", []byte("{nope\n"), 0o644))
	require.Error(t, run(context.Background(), []string{"-chart", dir + "/x.svg", "-chart-from", dir + "/bad.jsonl"}, &out, &errOut))
}

// TestAdvisoryPostgres runs the advisory-lock measures (and held claims
// beside them) on PostgreSQL: every row processed once, no batch
// overlapping another, every row done or deleted, and the measures refused
// nowhere else (the SQLite runs above never emit them).
func TestAdvisoryPostgres(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresDSN(t)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{
		"-driver", "postgres", "-dsn", dsn, "-workers", "1,4", "-batch", "25", "-rows", "600", "-strategy", "auto",
		"-measures", "held,advisory,advisory+delete", "-json",
	}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r result
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		seen[r.Measure]++
		require.Zero(t, r.Overlaps, line)
		require.Zero(t, r.Missing, "every row processed: %s", line)
		require.Zero(t, r.Duplicates, "no row processed twice: %s", line)
		require.Equal(t, 600, r.Rows, line)
		if r.Measure == measureAdvisory || r.Measure == measureAdvisoryDel {
			require.Equal(t, "session", r.Strategy, line)
			require.Positive(t, r.Ratio, line)
		}
	}
	require.Equal(t, map[string]int{measureCeiling: 2, measureHeld: 2, measureAdvisory: 2, measureAdvisoryDel: 2}, seen)
}

// TestTwoWrites: -measures two-writes runs, beside the ceiling, the two
// primary-key writes per row of a claim and an ack without the library:
// every row ends done, and only when named.
func TestTwoWrites(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-workers", "1,3", "-batch", "10", "-rows", "95", "-strategy", "auto", "-measures", "two-writes", "-json"}, &out, &errOut), errOut.String())
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r result
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		seen[r.Measure]++
		require.Zero(t, r.Missing, "every row written twice, done last: %s", line)
		require.Positive(t, r.RowsPerS, line)
		if r.Measure == measureTwoWrites {
			require.Positive(t, r.Ratio, line)
		}
	}
	require.Equal(t, map[string]int{measureCeiling: 2, measureTwoWrites: 2}, seen)
}
