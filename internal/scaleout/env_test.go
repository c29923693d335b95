package scaleout

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// Environment variables of this package. The DSN variables are the ones the
// harness scripts print.
const (
	envGaleraDSNs   = "CLAIMLOCK_GALERA_DSNS"
	envPGPrimaryDSN = "CLAIMLOCK_PG_PRIMARY_DSN"
	envPGStandbyDSN = "CLAIMLOCK_PG_STANDBY_DSN"
	envRequire      = "CLAIMLOCK_REQUIRE_SCALEOUT"
	envLong         = "CLAIMLOCK_SCALEOUT_LONG"
)

func init() {
	// The driver logs every broken connection; the faults break many.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
}

// long reports whether the long mode (100,000 rows per Galera drain) was
// asked for.
func long() bool { return os.Getenv(envLong) == "1" }

// size picks the short or the long figure.
func size(short, big int) int {
	if long() {
		return big
	}
	return short
}

// unavailable skips the test, loudly, or fails it under
// CLAIMLOCK_REQUIRE_SCALEOUT=1.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("SCALE-OUT TEST CANNOT RUN (%s=1): %s", envRequire, msg)
	}
	t.Skipf("SKIPPED, NOT TESTED: %s (the CI script starts the servers; see internal/scaleout/README.md)", msg)
}

// galeraDSNs returns the DSNs of the three Galera nodes.
func galeraDSNs(t *testing.T) []string {
	t.Helper()
	v := os.Getenv(envGaleraDSNs)
	if v == "" {
		unavailable(t, "%s is not set: no Galera cluster", envGaleraDSNs)
	}
	dsns := strings.Split(v, ",")
	if len(dsns) != 3 {
		t.Fatalf("%s must list 3 node DSNs separated by commas, got %d", envGaleraDSNs, len(dsns))
	}
	return dsns
}

// pgDSNs returns the DSNs of the PostgreSQL primary and standby.
func pgDSNs(t *testing.T) (primary, standby string) {
	t.Helper()
	primary, standby = os.Getenv(envPGPrimaryDSN), os.Getenv(envPGStandbyDSN)
	if primary == "" || standby == "" {
		unavailable(t, "%s and %s are not set: no PostgreSQL standby pair", envPGPrimaryDSN, envPGStandbyDSN)
	}
	return primary, standby
}

// script returns the path of one of the repository's harness scripts.
func script(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "scripts", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("scripts/%s not found above the test's directory", name)
		}
		dir = parent
	}
}

// run runs a harness script with a time limit and returns its stdout; its
// stderr (progress) goes to the test log.
func run(t *testing.T, limit time.Duration, path string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if line != "" {
			t.Log(line)
		}
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", filepath.Base(path), strings.Join(args, " "), err)
	}
	return out.String(), nil
}

var exportRE = regexp.MustCompile(`([A-Z_]+)='([^']*)'`)

// exports parses the "export NAME='value' ..." lines the scripts print.
func exports(out string) map[string]string {
	m := map[string]string{}
	for _, g := range exportRE.FindAllStringSubmatch(out, -1) {
		m[g[1]] = g[2]
	}
	return m
}
