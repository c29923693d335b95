package claimlock_test

import (
	"bufio"
	"fmt"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every code snippet a user reads is code the tests run. This test holds
// the documentation to that:
//
//   - Markdown (README.md and docs/): every ```go block is preceded by
//     <!-- snippet: NAME --> and appears verbatim (up to indentation) in a
//     test file, between the lines "// snippet: NAME" and "// end snippet",
//     inside a test that runs it, or in a program under examples/ that its
//     test runs; or it is preceded by <!-- not run: REASON -->, which says
//     why it cannot run.
//   - Godoc: every code block of a doc comment that is Go (it parses as a
//     file, declarations, statements or an expression) appears verbatim in
//     such a test-file snippet. Blocks that are not Go (shell commands,
//     SQL, output listings, fragments elided with "...") are not checked.
//
// A snippet changed in one place and not the other fails here.

var (
	snippetStart = regexp.MustCompile(`^\s*// snippet: ([A-Za-z0-9_.-]+)\s*$`)
	snippetEnd   = regexp.MustCompile(`^\s*// end snippet\s*$`)
	mdSnippet    = regexp.MustCompile(`^<!-- snippet: ([A-Za-z0-9_.-]+) -->\s*$`)
	mdNotRun     = regexp.MustCompile(`^<!-- not run: .+ -->\s*$`)
)

// testSnippets returns every snippet region of the module's test files
// (contrib modules included) and of the example programs, by name,
// dedented.
func testSnippets(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") ||
			!strings.HasSuffix(path, "_test.go") && !strings.HasPrefix(filepath.ToSlash(path), "examples/") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		var name string
		var body []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			switch {
			case name == "" && snippetStart.MatchString(text):
				name = snippetStart.FindStringSubmatch(text)[1]
				body = nil
			case name != "" && snippetEnd.MatchString(text):
				if _, dup := out[name]; dup {
					return fmt.Errorf("%s:%d: snippet %q is defined twice", path, line, name)
				}
				out[name] = dedent(body)
				name = ""
			case name != "":
				body = append(body, text)
			}
		}
		if name != "" {
			return fmt.Errorf("%s: snippet %q has no end", path, name)
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dedent removes the leading tabs all non-blank lines share and trailing
// blanks.
func dedent(lines []string) []string {
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			out = append(out, "")
			continue
		}
		out = append(out, strings.TrimRight(l[common:], " \t"))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	return out
}

func TestMarkdownSnippetsAreTested(t *testing.T) {
	snippets := testSnippets(t)
	files := []string{"README.md"}
	_ = filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```go" {
				continue
			}
			start := i + 1
			end := start
			for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
				end++
			}
			block := dedent(lines[start:end])
			i = end
			prev := ""
			for j := start - 2; j >= 0; j-- {
				if strings.TrimSpace(lines[j]) != "" {
					prev = strings.TrimSpace(lines[j])
					break
				}
			}
			where := fmt.Sprintf("%s:%d", file, start)
			switch {
			case mdNotRun.MatchString(prev):
			case mdSnippet.MatchString(prev):
				name := mdSnippet.FindStringSubmatch(prev)[1]
				got, ok := snippets[name]
				if !ok {
					t.Errorf("%s: snippet %q is in no test file (mark a test's copy with // snippet: %s ... // end snippet)", where, name, name)
					continue
				}
				if diff := firstDifference(block, got); diff != "" {
					t.Errorf("%s: snippet %q differs from its test's copy: %s", where, name, diff)
				}
				checked++
			default:
				t.Errorf("%s: a ```go block needs <!-- snippet: NAME --> (a test runs it) or <!-- not run: REASON --> on the line before it", where)
			}
		}
	}
	t.Logf("%d markdown snippets checked against their tests", checked)
}

func TestGodocSnippetsAreTested(t *testing.T) {
	var all [][]string
	for _, s := range testSnippets(t) {
		all = append(all, s)
	}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		var p comment.Parser
		for _, cg := range f.Comments {
			for _, b := range p.Parse(cg.Text()).Content {
				code, ok := b.(*comment.Code)
				if !ok || !isGo(code.Text) {
					continue
				}
				block := dedent(strings.Split(code.Text, "\n"))
				if !containedIn(block, all) {
					t.Errorf("%s:%d: a Go code block of this doc comment is in no test's snippet (copy it into a test that runs it, between // snippet: NAME and // end snippet):\n%s",
						path, fset.Position(cg.Pos()).Line, strings.Join(block, "\n"))
				}
				checked++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d godoc code blocks checked against the tests' snippets", checked)
}

// isGo reports whether src parses as Go: a file, declarations, statements
// or an expression.
func isGo(src string) bool {
	fset := token.NewFileSet()
	if strings.Contains(src, "...") && !strings.Contains(src, "args...") {
		return false // an elided fragment
	}
	for _, wrap := range []string{"%s", "package p\n%s", "package p\nfunc _() {\n%s\n}"} {
		if _, err := parser.ParseFile(fset, "", fmt.Sprintf(wrap, src), 0); err == nil {
			return true
		}
	}
	_, err := parser.ParseExpr(src)
	return err == nil
}

// containedIn reports whether block appears as consecutive lines of one of
// the snippets, up to indentation.
func containedIn(block []string, snippets [][]string) bool {
	for _, s := range snippets {
		for i := 0; i+len(block) <= len(s); i++ {
			if equalDedented(block, s[i:i+len(block)]) {
				return true
			}
		}
	}
	return false
}

// equalDedented compares a doc block with test lines, up to indentation
// and a comma ending the last line (an expression snippet may sit in a
// composite literal of its test).
func equalDedented(a, b []string) bool {
	b = dedent(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if i == len(a)-1 {
			x, y = strings.TrimSuffix(x, ","), strings.TrimSuffix(y, ",")
		}
		if x != y {
			return false
		}
	}
	return true
}

// firstDifference describes the first line where doc and test differ.
func firstDifference(doc, test []string) string {
	for i := 0; i < max(len(doc), len(test)); i++ {
		var d, s string
		if i < len(doc) {
			d = doc[i]
		}
		if i < len(test) {
			s = test[i]
		}
		if d != s {
			return fmt.Sprintf("line %d: doc %q, test %q", i+1, d, s)
		}
	}
	return ""
}
