//go:build unix

// Command mutate checks that the test suite catches deliberate bugs in the
// code that carries claimlock's guarantees: the Go counterpart of the spin
// model's mutants (model/check.sh). Each mutation of mutations.go replaces
// one exact snippet of one file (a token condition dropped, a comparison
// off by one, a time taken at the wrong moment), runs the tests expected to
// catch it, and puts the file back. A mutation is KILLED when one of those
// tests fails, SURVIVED when they all pass (the suite misses that bug),
// HUNG when they ran into their time limit instead of failing (a broken
// guarantee must fail in seconds, with its reason), and BROKEN when its
// snippet is not found exactly once (or Count times), the mutated code does
// not build, or no test ran.
//
//	go run ./internal/mutate                 every mutation
//	go run ./internal/mutate -run 'sqlite/'  those whose name matches
//	go run ./internal/mutate -list           list them, check every snippet
//
// The tests need the DSN variables of internal/testkit/dbtest for the mutations of
// MySQL and PostgreSQL code; a mutation whose variables are unset is
// UNTESTED. CLAIMLOCK_REQUIRE_DB is cleared for the tests, so an unreachable
// server skips them (BROKEN: no test ran) rather than failing them (which
// would read as a kill). With -baseline (the default) the tests of every
// mutation first run on the unmutated code and must pass; .ci/run turns it
// off, as the whole suite has just passed there.
//
// The working tree is never written: each mutated file is written to a
// temporary directory and handed to go test through its -overlay flag, so
// mutations run side by side (-parallel, default 2: most of their tests
// wait on timeouts and databases rather than the CPU) and an interrupted
// run leaves nothing behind. It prints one line per mutation as each ends
// (with the part of its time spent building the mutated test binary), the
// total time and the build and test time summed over the mutations, and
// exits 1 unless every mutation was killed (2 for a usage or anchor error).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// mutation is one deliberate bug and the tests that must catch it.
type mutation struct {
	// Name identifies the mutation: area/what.
	Name string
	// File is the mutated file, relative to the module root.
	File string
	// From is an exact snippet of File, found exactly once (Count times,
	// when Count is set: a condition written twice in one statement); To
	// replaces it (every occurrence).
	From, To string
	Count    int
	// Pkg is the package whose tests must catch the bug, and Run their
	// go test -run pattern.
	Pkg, Run string
	// Env are the environment variables those tests need (DSNs).
	Env []string
}

// verdicts.
const (
	killed   = "KILLED"
	survived = "SURVIVED"
	hung     = "HUNG"
	broken   = "BROKEN"
	untested = "UNTESTED"
)

// result is what one mutation's run found.
type result struct {
	verdict string
	detail  string // the killing tests, or why broken or untested
	output  string // test output to show when not killed
	took    time.Duration
	// build is the time go test took before the test binary started
	// (compiling and linking the mutated package and what depends on it),
	// tests the test binary's own run; both zero when it never started.
	build, tests time.Duration
}

func main() {
	os.Exit(run())
}

func run() int {
	var (
		pattern  = flag.String("run", "", "run only the mutations whose name matches this regexp")
		list     = flag.Bool("list", false, "list the mutations and check their snippets, without running tests")
		limit    = flag.Duration("timeout", 2*time.Minute, "time limit of one mutation's tests")
		baseline = flag.Bool("baseline", true, "first run every mutation's tests on the unmutated code; they must pass")
		parallel = flag.Int("parallel", 2, "mutations whose tests run at once")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mutate: unexpected arguments %q\n", flag.Args())
		return 2
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	selected, err := selectMutations(*pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	if bad := checkAnchors(root, selected); len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(os.Stderr, b)
		}
		fmt.Fprintf(os.Stderr, "mutate: %d of %d snippets are not found as often as expected: update mutations.go to the code\n", len(bad), len(selected))
		return 2
	}
	if *list {
		for _, m := range selected {
			fmt.Printf("%-34s %-36s %s -run '%s'\n", m.Name, m.File, m.Pkg, m.Run)
		}
		fmt.Printf("%d mutations, every snippet found as often as expected\n", len(selected))
		return 0
	}
	if *parallel < 1 {
		fmt.Fprintln(os.Stderr, "mutate: -parallel must be at least 1")
		return 2
	}
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}
	defer os.RemoveAll(tmp)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	start := time.Now()
	if *baseline {
		if !runBaseline(ctx, root, selected, *limit) {
			return 1
		}
	}
	counts := map[string]int{}
	var builds, tests time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, *parallel)
	for i, m := range selected {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			r := m.try(ctx, root, filepath.Join(tmp, fmt.Sprint(i)), *limit)
			mu.Lock()
			defer mu.Unlock()
			counts[r.verdict]++
			builds += r.build
			tests += r.tests
			fmt.Printf("%-9s %-34s %6.1fs (build %4.1fs)  %s\n", r.verdict, m.Name, r.took.Seconds(), r.build.Seconds(), r.detail)
			if r.verdict != killed && r.output != "" {
				fmt.Println(indent(r.output))
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "mutate: interrupted (the working tree was never changed)")
		return 1
	}
	fmt.Printf("mutate: %d mutations: %d killed, %d survived, %d hung, %d broken, %d untested in %s\n",
		len(selected), counts[killed], counts[survived], counts[hung], counts[broken], counts[untested], time.Since(start).Round(time.Second))
	fmt.Printf("mutate: summed over the mutations: %s building, %s in the tests\n", builds.Round(time.Second), tests.Round(time.Second))
	if counts[killed] != len(selected) {
		return 1
	}
	return 0
}

// moduleRoot returns the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module: run from the claimlock checkout")
	}
	return filepath.Dir(mod), nil
}

func selectMutations(pattern string) ([]mutation, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	seen := map[string]bool{}
	var out []mutation
	for _, m := range mutations {
		if seen[m.Name] {
			return nil, fmt.Errorf("two mutations named %s", m.Name)
		}
		seen[m.Name] = true
		if m.From == m.To {
			return nil, fmt.Errorf("%s: the replacement equals the snippet", m.Name)
		}
		if re.MatchString(m.Name) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mutation matches %q", pattern)
	}
	return out, nil
}

// checkAnchors returns a line for each mutation whose snippet is not found
// exactly once (or Count times) in its file.
func checkAnchors(root string, ms []mutation) []string {
	var bad []string
	for _, m := range ms {
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%-9s %-34s %v", broken, m.Name, err))
			continue
		}
		if n := bytes.Count(src, []byte(m.From)); n != m.occurrences() {
			bad = append(bad, fmt.Sprintf("%-9s %-34s %s: snippet found %d times, not %d: %q", broken, m.Name, m.File, n, m.occurrences(), m.From))
		}
	}
	return bad
}

// checkClean refuses files with uncommitted changes (when git can tell).
// runBaseline runs the tests of every (package, pattern) pair once on the
// unmutated code and reports whether they all passed.
func runBaseline(ctx context.Context, root string, ms []mutation, limit time.Duration) bool {
	type key struct{ pkg, run string }
	done := map[key]bool{}
	ok, ran := true, 0
	start := time.Now()
	for _, m := range ms {
		k := key{m.Pkg, m.Run}
		if done[k] || ctx.Err() != nil {
			continue
		}
		done[k] = true
		if missing := m.missingEnv(); len(missing) > 0 {
			continue // reported as untested later
		}
		ran++
		one := time.Now()
		r := runTests(ctx, root, m.Pkg, m.Run, limit)
		if r.verdict != survived {
			ok = false
			fmt.Printf("%-9s %-34s %6.1fs  the unmutated code: %s\n", "BASELINE", m.Pkg+" "+m.Run, time.Since(one).Seconds(), r.detail)
			fmt.Println(indent(r.output))
		}
	}
	if !ok {
		fmt.Println("mutate: the tests fail on the unmutated code: a kill would prove nothing")
	} else if ctx.Err() == nil {
		fmt.Printf("mutate: baseline: the tests of %d package and pattern pairs pass on the unmutated code (%s)\n",
			ran, time.Since(start).Round(time.Second))
	}
	return ok && ctx.Err() == nil
}

// occurrences is how many times m.From must occur in its file.
func (m mutation) occurrences() int { return max(m.Count, 1) }

func (m mutation) missingEnv() []string {
	var out []string
	for _, v := range m.Env {
		if os.Getenv(v) == "" {
			out = append(out, v)
		}
	}
	return out
}

// try runs m's tests with m applied through an overlay written under dir.
func (m mutation) try(ctx context.Context, root, dir string, limit time.Duration) (r result) {
	start := time.Now()
	defer func() { r.took = time.Since(start) }()
	if missing := m.missingEnv(); len(missing) > 0 {
		return result{verdict: untested, detail: "set " + strings.Join(missing, ", ")}
	}
	overlay, err := m.overlay(root, dir)
	if err != nil {
		return result{verdict: broken, detail: err.Error()}
	}
	return runTests(ctx, root, m.Pkg, m.Run, limit, "-overlay", overlay)
}

// overlay writes m's mutated file and a go build overlay that puts it in
// place of the original into dir, and returns the overlay's path.
func (m mutation) overlay(root, dir string) (string, error) {
	path := filepath.Join(root, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if n := bytes.Count(orig, []byte(m.From)); n != m.occurrences() {
		return "", fmt.Errorf("%s: snippet found %d times, not %d", m.File, n, m.occurrences())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(mutated, bytes.ReplaceAll(orig, []byte(m.From), []byte(m.To)), 0o644); err != nil {
		return "", err
	}
	spec, err := json.Marshal(map[string]map[string]string{"Replace": {path: mutated}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, spec, 0o644)
}

// testEvent is one line of go test -json.
type testEvent struct {
	Action      string
	Test        string
	Output      string
	FailedBuild string
	Time        time.Time
	Elapsed     float64 // seconds, on a test's or the package's end
}

// runTests runs pkg's tests matching pattern and classifies the outcome:
// killed when a test failed, survived when they passed, hung when they ran
// into the time limit (a test failing after it is still a hang), broken
// when the package did not build or no test ran.
func runTests(ctx context.Context, root, pkg, pattern string, limit time.Duration, flags ...string) (r result) {
	ctx, cancel := context.WithTimeout(ctx, limit+time.Minute)
	defer cancel()
	// No vet: the mutations are deliberate, and vet would only slow each
	// build. -ldflags=-w: no DWARF tables in the test binaries, which only
	// a debugger reads (a panic's trace comes from the pc-line tables,
	// which stay); each mutation links a binary of its own, and leaving
	// the tables out saves about a sixth of a build.
	args := append([]string{"test", "-count=1", "-vet=off", "-ldflags=-w", "-json", "-timeout", limit.String()}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "-run", pattern, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CLAIMLOCK_REQUIRE_DB=")
	// The test binary is a child of go test: the whole process group ends
	// with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var build, tests time.Duration
	defer func() { r.build, r.tests = build, tests }()
	begun := time.Now()
	stdout, err := cmd.Output()

	var failed, passed, skipped []string
	var text strings.Builder
	buildFailed := false
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			text.WriteString(sc.Text() + "\n")
			continue
		}
		text.WriteString(ev.Output)
		if ev.Test == "" {
			switch ev.Action {
			case "start":
				build = ev.Time.Sub(begun)
			case "pass", "fail":
				tests = time.Duration(ev.Elapsed * float64(time.Second))
			}
		}
		switch {
		case ev.Action == "build-fail" || ev.FailedBuild != "":
			buildFailed = true
		case ev.Test == "":
		case ev.Action == "fail":
			failed = append(failed, ev.Test)
		case ev.Action == "pass":
			passed = append(passed, ev.Test)
		case ev.Action == "skip":
			skipped = append(skipped, ev.Test)
		}
	}
	text.WriteString(stderr.String())
	out := tail(text.String(), 40)
	timedOut := strings.Contains(text.String(), "panic: test timed out after")
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled):
		return result{verdict: broken, detail: "interrupted"}
	case buildFailed:
		return result{verdict: broken, detail: "the mutated code does not build", output: out}
	case timedOut || ctx.Err() != nil:
		detail := pkg + ": the tests ran into their " + limit.String() + " limit instead of failing with a reason"
		if len(failed) > 0 {
			detail += " (failed meanwhile: " + describe(leaves(failed)) + ")"
		}
		return result{verdict: hung, detail: detail, output: out}
	case len(failed) > 0:
		return result{verdict: killed, detail: pkg + ": " + describe(leaves(failed))}
	case err != nil:
		return result{verdict: killed, detail: pkg + ": go test failed without a failing test (" + err.Error() + ")", output: out}
	case len(passed) == 0 && len(skipped) > 0:
		return result{verdict: broken, detail: "every test was skipped: " + describe(leaves(skipped)), output: out}
	case len(passed) == 0:
		return result{verdict: broken, detail: fmt.Sprintf("no test of %s matches -run '%s'", pkg, pattern)}
	}
	return result{verdict: survived, detail: fmt.Sprintf("%s: %d tests passed", pkg, len(leaves(passed)))}
}

// leaves drops the tests that are parents of other tests in names.
func leaves(names []string) []string {
	var out []string
	for _, n := range names {
		parent := slices.ContainsFunc(names, func(o string) bool { return strings.HasPrefix(o, n+"/") })
		if !parent && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func describe(names []string) string {
	if len(names) <= 2 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, %s (+%d more)", names[0], names[1], len(names)-2)
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
