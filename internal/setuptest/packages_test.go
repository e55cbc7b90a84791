package setuptest

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the module's root, two folders up.
func root(t testing.TB) string {
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

// packageList is .ci/packages: each Debian package and what of it the
// suite looks for (commands, or absolute paths), in file order.
type packageList struct {
	names  []string
	things map[string][]string
}

func parsePackages(text string) (packageList, error) {
	l := packageList{things: map[string][]string{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 2 {
			return l, fmt.Errorf("line %d: %q names no command or file of the package", n, sc.Text())
		}
		if _, dup := l.things[f[0]]; dup {
			return l, fmt.Errorf("line %d: %s listed twice", n, f[0])
		}
		l.names = append(l.names, f[0])
		l.things[f[0]] = f[1:]
	}
	return l, sc.Err()
}

func readPackages(t testing.TB) packageList {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), ".ci/packages"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := parsePackages(string(b))
	if err != nil {
		t.Fatalf(".ci/packages: %v", err)
	}
	return l
}

// demand is one Debian package a test asks for, where it asks, and the
// command it wants from it ("" where the ask only names the package).
type demand struct {
	pkg, command, where string
}

// debianPackage is how a message names a package: "(Debian package X)".
var debianPackage = regexp.MustCompile(`Debian package ([a-z0-9][a-z0-9+.%-]*)`)

// demandsIn finds what one Go file asks for: every testenv.Command(t,
// "command", "package") with literal arguments, and every string literal
// naming "Debian package X" (a skip or error message a test shows).
// Format strings ("gcc-%s") are not names and are left out.
func demandsIn(fset *token.FileSet, f *ast.File) []demand {
	var out []demand
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Command" || len(n.Args) != 3 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "testenv" {
				return true
			}
			cmd, ok1 := literal(n.Args[1])
			pkg, ok2 := literal(n.Args[2])
			if ok1 && ok2 {
				out = append(out, demand{pkg: pkg, command: cmd, where: fset.Position(n.Pos()).String()})
			}
		case *ast.BasicLit:
			s, ok := literal(n)
			if !ok {
				return true
			}
			for _, m := range debianPackage.FindAllStringSubmatch(s, -1) {
				name := strings.TrimRight(m[1], ".-")
				if strings.Contains(name, "%") {
					continue
				}
				out = append(out, demand{pkg: name, where: fset.Position(n.Pos()).String()})
			}
		}
		return true
	})
	return out
}

func literal(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// moduleDemands is every demand in the module's Go files (testdata and
// hidden folders left out, and this file, whose test holds made-up
// demands).
func moduleDemands(t testing.TB, dir string) []demand {
	t.Helper()
	var out []demand
	fset := token.NewFileSet()
	self, err := filepath.Abs("packages_test.go")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || path == self {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, demandsIn(fset, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unmet lists the demands the install list would not meet: a package it
// lacks, or a command the package's line does not name (so .ci/install
// would not notice it missing).
func unmet(l packageList, ds []demand) []string {
	var out []string
	for _, d := range ds {
		things, ok := l.things[d.pkg]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: names Debian package %s, which .ci/packages does not list", d.where, d.pkg))
		case d.command != "" && !slices.Contains(things, d.command):
			out = append(out, fmt.Sprintf("%s: wants %s from %s, which .ci/packages does not name on that package's line", d.where, d.command, d.pkg))
		}
	}
	return out
}

// TestEveryNamedPackageIsInstalled: every Debian package a test (or a
// message a test shows) names is one the test command installs, with the
// command the test runs named on its line.
func TestEveryNamedPackageIsInstalled(t *testing.T) {
	dir := root(t)
	l := readPackages(t)
	ds := moduleDemands(t, dir)
	if len(ds) < 10 {
		t.Fatalf("found only %d demands in the module: the scan is broken", len(ds))
	}
	for _, p := range unmet(l, ds) {
		t.Error(p)
	}
}

// TestUnmetCatches holds the check to what it must catch.
func TestUnmetCatches(t *testing.T) {
	src := `package x
func f(t T) {
	testenv.Command(t, "mosquitto", "mosquitto")
	testenv.Command(t, "mosquitto_sub", "mosquitto-clients")
	testenv.Command(t, "pkcs11-tool", "softhsm2")
	testenv.Missing(t, "chromium (Debian package chromium)")
	testenv.Missing(t, "lintian (Debian package lintian)")
	_ = fmt.Errorf("needs %s (Debian package gcc-%s)", a, b)
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	ds := demandsIn(fset, f)
	if len(ds) != 5 {
		t.Fatalf("found %d demands, want 5 (the format string is not a name): %+v", len(ds), ds)
	}
	l, err := parsePackages("# c\nmosquitto mosquitto mosquitto_passwd\nsofthsm2 softhsm2-util\nchromium chromium\n")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(unmet(l, ds), "\n")
	for _, want := range []string{"Debian package mosquitto-clients, which .ci/packages does not list",
		"wants pkcs11-tool from softhsm2", "Debian package lintian, which"} {
		if !strings.Contains(got, want) {
			t.Errorf("the check missed %q:\n%s", want, got)
		}
	}
	if n := len(unmet(l, ds)); n != 3 {
		t.Errorf("%d findings, want 3:\n%s", n, got)
	}
	for _, bad := range []string{"pkg\n", "a x\na y\n"} {
		if _, err := parsePackages(bad); err == nil {
			t.Errorf("parsePackages(%q) took it", bad)
		}
	}
}
