package main

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/clitest"
)

// TestConvention: every command and subcommand keeps the one command-line
// convention (internal/clitest): its help, the same three ways, on stdout;
// --flag with named placeholders; usage errors exit 2, prefixed with the
// command.
func TestConvention(t *testing.T) {
	d := clitest.Check(t, "tablectl", run)
	var names []string
	for _, c := range d.Commands {
		names = append(names, c.Name())
	}
	var want []string
	for _, n := range app.Names() {
		want = append(want, n)
		c, _ := app.Command(n)
		for _, s := range c.Subs {
			want = append(want, n+" "+s.Name)
		}
	}
	sort.Strings(names)
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("the help lists %v; the command table has %v", names, want)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "usage: tablectl "},
		{[]string{"nosuch"}, 2, `unknown command "nosuch"`},
		{[]string{"odds", "--nosuch"}, 2, "tablectl odds: unknown flag --nosuch\n\nusage: tablectl odds [flags]"},
		{[]string{"audit"}, 2, "usage: tablectl audit <subcommand>"},
		{[]string{"audit", "nosuch"}, 2, `unknown subcommand "nosuch"`},
		{[]string{"--log-level", "loud", "version"}, 2, `log level "loud"`},
		{[]string{"--log-format", "xml", "version"}, 2, `log format "xml"`},
		// A required flag missing is a usage error (2) everywhere, said
		// with the command's name (issue 35).
		{[]string{"run"}, 2, "tablectl run: --config is required\n\nusage: tablectl run "},
		{[]string{"keygen"}, 2, "tablectl keygen: --name is required"},
		{[]string{"audit", "verify"}, 2, "tablectl audit verify: --db is required"},
		{[]string{"init"}, 2, "tablectl init: --supervisor is required"},
		{[]string{"manifest", "sign"}, 2, "tablectl manifest sign: --key is required"},
		{[]string{"replay"}, 2, "tablectl replay: --db is required"},
		{[]string{"recall"}, 2, "tablectl recall: --db is required"},
		{[]string{"stats", "--db", "x.db", "--by", "week"}, 2, `tablectl stats: --by "week": want dealer, shift or shoe`},
		{[]string{"odds", "--decks", "six"}, 2, `tablectl odds: invalid value "six" for flag --decks`},
		{[]string{"odds", "stray"}, 2, "tablectl odds: unexpected arguments: stray"},
		{[]string{"config", "check"}, 2, "tablectl config check: one config FILE is needed"},
		// A failure is 1, prefixed with the command and its subcommand.
		{[]string{"audit", "verify", "--db", "/nonexistent/trail.db", "--no-signatures"}, 1, "tablectl audit verify: "},
	} {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code != tt.code || !strings.Contains(errb.String(), tt.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "commands:") {
		t.Errorf("help: exit %d, %q", code, out.String())
	}
}

func TestVersion(t *testing.T) {
	var a, b, c, errb bytes.Buffer
	if run([]string{"version"}, &a, &errb) != 0 || run([]string{"--version"}, &b, &errb) != 0 {
		t.Fatalf("version failed: %s", errb.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "tablectl ") || !strings.Contains(a.String(), "go1.") {
		t.Errorf("version %q, --version %q", a.String(), b.String())
	}
	if run([]string{"version", "--json"}, &c, &errb) != 0 {
		t.Fatal(errb.String())
	}
	var v struct{ Version, Go, Platform string }
	if err := json.Unmarshal(c.Bytes(), &v); err != nil || v.Version == "" || v.Go == "" || v.Platform == "" {
		t.Errorf("version --json %q: %v", c.String(), err)
	}
}
