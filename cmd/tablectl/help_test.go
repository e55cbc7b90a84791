package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestHelp: every command and audit subcommand prints its own usage, in
// the one format, on stdout, exit 0, the same through `help CMD` and
// `CMD -h`; a mistake prints it on stderr and exits 2.
func TestHelp(t *testing.T) {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	for _, c := range auditCommands {
		names = append(names, "audit "+c.name)
	}
	for _, c := range manifestCommands {
		names = append(names, "manifest "+c.name)
	}
	for _, c := range keyringCommands {
		names = append(names, "keyring "+c.name)
	}
	names = append(names, "config check")
	sort.Strings(names)
	// "(default -1ns)", or a default said twice.
	bad := regexp.MustCompile(`\(default -|\(default [^)]*\) \(default`)
	for _, name := range names {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			words := strings.Fields(name)
			var outs []string
			for _, args := range [][]string{
				append([]string{"help"}, words...),
				append(append([]string{}, words...), "-h"),
				append(append([]string{}, words...), "--help"),
			} {
				var out, errb bytes.Buffer
				if code := run(args, &out, &errb); code != 0 {
					t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
				}
				if errb.Len() > 0 {
					t.Errorf("%v: stderr %q", args, errb.String())
				}
				outs = append(outs, out.String())
			}
			if outs[0] != outs[1] || outs[1] != outs[2] {
				t.Errorf("help and -h differ:\n%s\n---\n%s", outs[0], outs[1])
			}
			u := outs[0]
			if !strings.HasPrefix(u, "usage: tablectl "+name+" ") {
				t.Errorf("usage does not start with the command's name:\n%s", u)
			}
			if name != "audit" && name != "config" && name != "manifest" && name != "keyring" && !strings.Contains(u, "\nflags:\n") {
				t.Errorf("usage lists no flags:\n%s", u)
			}
			if m := bad.FindString(u); m != "" {
				t.Errorf("usage has %q:\n%s", m, u)
			}
			if strings.Contains(u, "Usage of") {
				t.Errorf("the flag package's own format:\n%s", u)
			}
		})
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
		{[]string{"odds", "--nosuch"}, 2, "flag provided but not defined: -nosuch\nusage: tablectl odds [flags]"},
		{[]string{"audit"}, 2, "usage: tablectl audit <subcommand>"},
		{[]string{"audit", "nosuch"}, 2, `unknown subcommand "nosuch"`},
		{[]string{"--log-level", "loud", "version"}, 2, `log level "loud"`},
		{[]string{"--log-format", "xml", "version"}, 2, `log format "xml"`},
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
