package coalesce

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden SQL files under testdata/golden")

// TestGolden renders every statement of the coalescer (a batch's with
// three groups of values), and its tables' DDL, for each engine into testdata/golden/<engine>.sql and compares them
// with the files, so that every change to the SQL shows in a diff as SQL.
// Run with -update after a deliberate change. (The claim statements on
// the keys table are package claim's, in the engine packages' golden
// files.)
func TestGolden(t *testing.T) {
	cfg, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]engine{"mysql": engMySQL, "postgres": engPostgres, "sqlite": engSQLite} {
		var b strings.Builder
		b.WriteString("-- coalesce statements for " + name + ", default table names\n\n-- tables\n")
		for _, q := range tableDDL(e, cfg) {
			b.WriteString(q + ";\n")
		}
		s := newStatements(e, cfg)
		v := reflect.ValueOf(s)
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			b.WriteString("\n-- " + name + "\n")
			if name == "markFolded" {
				b.WriteString("-- (with as many placeholders as changes)\n")
			}
			b.WriteString(v.Field(i).String())
			if name == "markFolded" {
				b.WriteString(e.in(3, 1))
			}
			b.WriteString(";\n")
		}
		bv := reflect.ValueOf(newBatchSQL(e, cfg))
		for i := range bv.NumField() {
			st := batchStmtOf(bv.Field(i))
			b.WriteString("\n-- batch " + bv.Type().Field(i).Name + "\n-- (with a group per change, source or key: 3 here)\n")
			b.WriteString(st.render(e, 3) + ";\n")
		}
		path := filepath.Join("testdata", "golden", name+".sql")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if string(want) != b.String() {
			t.Errorf("%s differs from the statements rendered now; run go test ./coalesce/ -run TestGolden -update and review the diff\n%s", path, b.String())
		}
	}
}

// batchStmtOf returns the batchStmt held in v, a field of [batchSQL]
// (unexported: read by its strings).
func batchStmtOf(v reflect.Value) batchStmt {
	return batchStmt{head: v.Field(0).String(), group: v.Field(1).String(), sep: v.Field(2).String(), tail: v.Field(3).String()}
}
