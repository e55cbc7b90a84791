package archtest

import (
	"bufio"
	"fmt"
	"go/build"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/tablectl/tablectl"

// ranks orders the stages of the flow. A package of a stage may import the
// base (coup, its roads, the clock) and packages of earlier stages, never
// of a later one. The other stages stand outside the flow: "beside" is the
// wiring and infrastructure around it (the controller, metrics, brokers),
// "tests" are helpers only tests import, "tool" is a command.
var ranks = map[string]int{"base": 0, "device": 1, "shoeread": 2, "audit": 3, "command": 4, "display": 5, "floor": 6}

var outside = []string{"beside", "tests", "tool"}

// row is one line of the package table.
type row struct {
	pkg   string // relative to the module: "coup", "display/mqttpub"
	stage string
	may   []string // the packages of ours it may import, sorted
	line  int
}

// pkgInfo is what go/build says of one package of the module.
type pkgInfo struct {
	imports, testImports []string // ours, relative, sorted
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// readTable parses the table between the markers in docs/architecture.md.
func readTable(t *testing.T, path string) map[string]row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]row{}
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "<!-- packages: checked by internal/archtest -->":
			in = true
			continue
		case l == "<!-- /packages -->":
			in = false
			continue
		}
		if !in || !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("%s:%d: %d cells, want 4 (package, stage, what lives there, may import)", path, n, len(cells))
		}
		r := row{pkg: strings.TrimSuffix(strings.Trim(strings.TrimSpace(cells[0]), "`"), "/"), stage: strings.TrimSpace(cells[1]), line: n}
		if _, ok := ranks[r.stage]; !ok && !slices.Contains(outside, r.stage) {
			t.Fatalf("%s:%d: stage %q is none of the flow's nor %v", path, n, r.stage, outside)
		}
		if may := strings.TrimSpace(cells[3]); may != "none" {
			for _, p := range strings.Split(may, ",") {
				p = strings.TrimSuffix(strings.Trim(strings.TrimSpace(p), "`"), "/")
				if p == "" || strings.ContainsAny(p, " `") {
					t.Fatalf("%s:%d: may import %q: want backquoted packages, comma-separated, or none", path, n, may)
				}
				r.may = append(r.may, p)
			}
		}
		sort.Strings(r.may)
		if _, dup := rows[r.pkg]; dup {
			t.Fatalf("%s:%d: %s twice", path, n, r.pkg)
		}
		rows[r.pkg] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no package table between the markers", path)
	}
	return rows
}

// readModule lists every package of the module with its imports of ours.
func readModule(t *testing.T, dir string) map[string]pkgInfo {
	t.Helper()
	pkgs := map[string]pkgInfo{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, _ := filepath.Rel(dir, path)
		pkgs[filepath.ToSlash(rel)] = pkgInfo{imports: ours(bp.Imports), testImports: ours(append(bp.TestImports, bp.XTestImports...))}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func ours(imports []string) []string {
	var out []string
	for _, p := range imports {
		if rel, ok := strings.CutPrefix(p, module+"/"); ok && !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// TestImportRule checks the module against docs/architecture.md's table:
// every package is listed, each imports exactly what its row says, the
// rows themselves keep the flow one way, and tests keep it too.
func TestImportRule(t *testing.T) {
	dir := root(t)
	doc := filepath.Join(dir, "docs", "architecture.md")
	table := readTable(t, doc)
	for _, err := range check(table, readModule(t, dir)) {
		t.Error(err)
	}
}

// ownInternal says q is under an internal/ folder that pkg is in (Go's
// own rule for who may import it): audit may use audit/internal/edfast.
func ownInternal(pkg, q string) bool {
	i := strings.Index(q, "/internal/")
	if i < 0 {
		return false
	}
	home := q[:i]
	return pkg == home || strings.HasPrefix(pkg, home+"/")
}

// check returns every way the module and the table disagree, or the table
// breaks the rule.
func check(table map[string]row, pkgs map[string]pkgInfo) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := table[p]; !ok {
			bad("package %s is not in docs/architecture.md's table", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(table)) {
		r := table[p]
		info, ok := pkgs[p]
		if !ok {
			bad("docs/architecture.md:%d: %s is not a package of the module", r.line, p)
			continue
		}
		// The row keeps the rule.
		for _, q := range r.may {
			if why := forbidden(table, r, q, false); why != "" {
				bad("docs/architecture.md:%d: %s may not import %s: %s", r.line, p, q, why)
			}
		}
		// The code keeps the row.
		for _, q := range info.imports {
			if !slices.Contains(r.may, q) {
				why := forbidden(table, r, q, false)
				if why == "" {
					why = "add it to the row if it belongs there"
				}
				bad("%s imports %s, which docs/architecture.md:%d does not allow (%s)", p, q, r.line, why)
			}
		}
		for _, q := range r.may {
			if !slices.Contains(info.imports, q) {
				bad("docs/architecture.md:%d: %s is said to import %s, and does not: take it off the row", r.line, p, q)
			}
		}
		// Tests may use more (helpers, the real parts before them), never
		// a later stage of the flow or a command.
		for _, q := range info.testImports {
			if why := forbidden(table, r, q, true); why != "" {
				bad("the tests of %s import %s: %s", p, q, why)
			}
		}
	}
	return errs
}

// forbidden says why r's package may not import q, or "" if it may.
func forbidden(table map[string]row, r row, q string, test bool) string {
	to, ok := table[q]
	if !ok {
		return "it is not in the table"
	}
	if r.pkg == "coup" {
		return "coup imports no package of ours"
	}
	if q == r.pkg {
		return ""
	}
	switch to.stage {
	case "tool":
		return "nothing imports a command"
	case "tests":
		if !test && r.stage != "tests" {
			return "it is for tests only"
		}
		return ""
	}
	from, inFlow := ranks[r.stage]
	if !inFlow {
		return "" // beside, tests and tools may use the flow and what is beside it
	}
	rank, qInFlow := ranks[to.stage]
	if !qInFlow {
		if test {
			return "" // tests may start brokers and the like
		}
		return fmt.Sprintf("%s stands %s the flow; a package of the flow imports only the flow", q, to.stage)
	}
	switch {
	case rank < from:
		return ""
	case rank == from && (rank == 0 || strings.HasPrefix(r.pkg, q+"/") || ownInternal(r.pkg, q) || test):
		// The base is one layer; a subpackage may use its parent; a stage's
		// folder may use what it keeps under its internal/; a test may use
		// its stage's other packages.
		return ""
	case rank == from:
		return fmt.Sprintf("both are stage %s; only a subpackage may import its parent", r.stage)
	}
	return fmt.Sprintf("%s (stage %s) comes after %s (stage %s) in the flow", q, to.stage, r.pkg, r.stage)
}
