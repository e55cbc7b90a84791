package compliance

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rules are the rules docs/compliance.md must map, each by a heading.
var rules = []string{"13:69O-1.5", "GLI-24", "Remote Technical Standard 17", "AGCO", "325:85-15-18", "9 NYCRR 5319.54", "13:69E-1.28P"}

// named is a test named in the map: `pkg/path.TestName`, or
// `pkg/path.TestName/case` for one case of it (go test -run's name: spaces
// as underscores).
var named = regexp.MustCompile("`([a-z0-9_]+(?:/[a-z0-9_]+)*)\\.((?:Test|Fuzz)[A-Za-z0-9_]+)(?:/([^`]+))?`")

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no module root at %s: %v", dir, err)
	}
	return dir
}

// testSources is the text of dir's test files.
func testSources(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// hasCase reports whether src names a case of that name: as a string (a
// t.Run's or a table's name), which go test -run writes with spaces as
// underscores.
func hasCase(src, name string) bool {
	return strings.Contains(src, `"`+strings.ReplaceAll(name, "_", " ")+`"`) || strings.Contains(src, `"`+name+`"`)
}

// testsIn lists the test and fuzz functions declared in dir's test files.
func testsIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]*)\(`)
	out := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			out[string(m[1])] = true
		}
	}
	return out
}

// TestComplianceMapNamesRealTests fails when a test docs/compliance.md
// names no longer exists, when a row of its tables names no test, or when
// a rule it must map has no section.
func TestComplianceMapNamesRealTests(t *testing.T) {
	dir := root(t)
	f, err := os.Open(filepath.Join(dir, "docs", "compliance.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]map[string]bool{}
	sources := map[string]string{}
	var headings []string
	rows, refs := 0, 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "## ") {
			headings = append(headings, text)
			continue
		}
		if !strings.HasPrefix(text, "| ") || strings.HasPrefix(text, "| requirement") || strings.HasPrefix(text, "| ---") {
			continue
		}
		rows++
		cells := strings.Split(text, " | ")
		ms := named.FindAllStringSubmatch(cells[len(cells)-1], -1)
		if len(ms) == 0 {
			t.Errorf("docs/compliance.md:%d: a requirement with no test named: %s", line, text)
		}
		for _, m := range ms {
			refs++
			pkg, name := m[1], m[2]
			if known[pkg] == nil {
				known[pkg] = testsIn(t, filepath.Join(dir, filepath.FromSlash(pkg)))
			}
			if !known[pkg][name] {
				t.Errorf("docs/compliance.md:%d: %s.%s: no such test in %s", line, pkg, name, pkg)
			}
			if c := m[3]; c != "" {
				if _, ok := sources[pkg]; !ok {
					sources[pkg] = testSources(t, filepath.Join(dir, filepath.FromSlash(pkg)))
				}
				if !hasCase(sources[pkg], c) {
					t.Errorf("docs/compliance.md:%d: %s.%s/%s: %s's tests name no such case", line, pkg, name, c, pkg)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		found := false
		for _, h := range headings {
			found = found || strings.Contains(h, r)
		}
		if !found {
			t.Errorf("docs/compliance.md has no section for %s", r)
		}
	}
	if rows < len(rules) || refs < rows {
		t.Fatalf("docs/compliance.md: %d rows naming %d tests: the tables were not read", rows, refs)
	}
}

// TestNamedPattern: the pattern finds what the map writes, and a test the
// map names that is not there is caught (the check above can fail).
func TestNamedPattern(t *testing.T) {
	ms := named.FindAllStringSubmatch("`internal/controller.TestSelfCheckPeriodic`, `coup.TestRecallDepth`, `internal/selfcheck.FuzzParse`, `coup.Table`, `coup.TestMisdeals/short_coup`", -1)
	if len(ms) != 4 || ms[0][1] != "internal/controller" || ms[0][2] != "TestSelfCheckPeriodic" || ms[2][2] != "FuzzParse" ||
		ms[3][2] != "TestMisdeals" || ms[3][3] != "short_coup" {
		t.Fatalf("%q", ms)
	}
	src := testSources(t, filepath.Join(root(t), "coup"))
	if !hasCase(src, "short_coup") || hasCase(src, "no_such_case_at_all") {
		t.Fatal("hasCase does not tell a case that is there from one that is not")
	}
	tests := testsIn(t, filepath.Join(root(t), "coup"))
	if !tests["TestRecallDepth"] || tests["TestNoSuchThing"] {
		t.Fatalf("coup's tests: %v", tests)
	}
}
