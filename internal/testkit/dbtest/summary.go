package dbtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// skips counts the tests of this test binary that skipped for want of a
// server, by engine ("PostgreSQL", "MySQL").
var skips = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

func countSkip(engine string) {
	skips.Lock()
	skips.n[engine]++
	skips.Unlock()
}

// Main runs the package's tests and exits with their status, after saying
// how many tests skipped for want of a database server. A package whose
// tests use this package's servers calls it from its TestMain:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// The go command shows nothing of a passing package's output but its "ok"
// line, so `go test ./...` without databases would print "ok" for packages
// whose PostgreSQL and MySQL tests all skipped. Main therefore writes one
// line per engine to the go command's own standard error (on Linux; to
// this process's elsewhere), with the skips of every package of the run so
// far: the last such lines of a run give its totals.
//
// Main also drops the databases [PostgresDatabase] leased to the tests.
func Main(m *testing.M) {
	mainRunning.Store(true)
	code := m.Run()
	if err := dropDatabases(); err != nil {
		fmt.Fprintf(os.Stderr, "claimlock: dbtest: the test databases were not all dropped: %v\n", err)
	}
	skips.Lock()
	own := skips.n
	skips.Unlock()
	if len(own) > 0 {
		report(own)
	}
	os.Exit(code)
}

// report writes the run's totals after adding this binary's skips to them.
func report(own map[string]int) {
	out, totals := io.Writer(os.Stderr), own
	if w, t, ok := runTotals(own); ok {
		out, totals = w, t
		defer w.Close()
	}
	engines := make([]string, 0, len(totals))
	for e := range totals {
		engines = append(engines, e)
	}
	sort.Strings(engines)
	for _, e := range engines {
		env := EnvPostgres
		if strings.HasPrefix(e, "MySQL") {
			env = EnvMySQL
		}
		here := ""
		if own[e] > 0 {
			here = fmt.Sprintf(" (%d in %s)", own[e], pkgName())
		}
		fmt.Fprintf(out, "claimlock: %d %s tests skipped in this run so far%s: no %s server; set %s or run a Docker engine (%s=1 fails them instead)\n",
			totals[e], e, here, e, env, EnvRequire)
	}
}

// runTotals adds own to the counts of the other test binaries of the same
// go command, kept in a file named after that command's process, and
// returns the command's standard error and the totals. ok is false when
// the parent is not the go command or /proc is not there.
func runTotals(own map[string]int) (w *os.File, totals map[string]int, ok bool) {
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil, nil, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", ppid))
	if err != nil {
		return nil, nil, false
	}
	// The process's start time (field 22) tells a reused PID apart.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 20 {
		return nil, nil, false
	}
	name := filepath.Join(os.TempDir(), fmt.Sprintf("claimlock-skips-%d-%s.json", ppid, fields[19]))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return nil, nil, false
	}
	totals = map[string]int{}
	if data, err := io.ReadAll(f); err == nil && len(data) > 0 {
		_ = json.Unmarshal(data, &totals)
	}
	for e, n := range own {
		totals[e] += n
	}
	data, err := json.Marshal(totals)
	if err != nil {
		return nil, nil, false
	}
	if err := f.Truncate(0); err != nil {
		return nil, nil, false
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return nil, nil, false
	}
	w, err = os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", ppid), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, nil, false
	}
	return w, totals, true
}

// pkgName is the tested package's import path, or the binary's name.
func pkgName() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
}
