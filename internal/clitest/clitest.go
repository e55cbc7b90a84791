// Package clitest holds every binary of the module to one command-line
// convention, for tests: a binary's test hands over its entry point and
// Check walks its whole help (internal/clidoc) and tries each command's
// usage errors. The convention: `help CMD`, `CMD -h` and `CMD --help`
// print the same usage on stdout and exit 0; flags are written --flag,
// each that takes a value with a named placeholder (FILE, ID, not
// "string"); a usage error exits 2 with a message prefixed with the
// program and the command ("tablectl audit verify: ..."), naming the flag
// as it is written (--flag).
package clitest

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/clidoc"
)

// Run is a binary's entry point: its arguments (without the program's
// name), its stdout and stderr, its exit code.
type Run func(args []string, stdout, stderr io.Writer) int

// Doc walks the help of the program name through run.
func Doc(t *testing.T, name string, run Run) *clidoc.Doc {
	t.Helper()
	d, err := clidoc.Walk(name, func(args []string) (string, int, error) {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return out.String(), code, nil
	})
	if err != nil {
		t.Fatalf("%s's help: %v", name, err)
	}
	return d
}

// generic are the flag package's placeholders for a flag whose usage
// names none.
var generic = map[string]bool{"string": true, "int": true, "uint": true, "int64": true, "uint64": true, "float": true, "duration": true, "value": true}

// Check holds the program to the convention: every command's and
// subcommand's help (the three ways, one text, on stdout, exit 0, its
// flags as --flag with named placeholders), and its usage errors: an
// unknown flag, and each flag that takes a value given none, exit 2 on
// stderr prefixed with the program and the command. It returns the
// program's doc for the binary's own checks.
func Check(t *testing.T, name string, run Run) *clidoc.Doc {
	t.Helper()
	d := Doc(t, name, run)
	call := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		return out.String(), errb.String(), code
	}
	for _, c := range d.Commands {
		t.Run(strings.ReplaceAll(c.Name(), " ", "_"), func(t *testing.T) { checkCommand(t, name, c, call) })
	}
	// The program's own usage errors.
	if _, errs, code := call("no-such-command"); code != 2 || !strings.HasPrefix(errs, name+": ") {
		t.Errorf("%s no-such-command: exit %d, stderr %q", name, code, errs)
	}
	if out, errs, code := call(); code != 2 || out != "" || !strings.Contains(errs, "usage: "+name) {
		t.Errorf("%s alone: exit %d, stdout %q, stderr %q", name, code, out, errs)
	}
	return d
}

// single is a flag written with one dash in a usage.
var single = regexp.MustCompile(`(?m)^\s+-[A-Za-z]`)

// checkCommand holds one command (or subcommand) to the convention.
func checkCommand(t *testing.T, name string, c clidoc.Command, call func(args ...string) (string, string, int)) {
	var usages []string
	for _, args := range [][]string{append([]string{"help"}, c.Path...), append(append([]string{}, c.Path...), "-h"), append(append([]string{}, c.Path...), "--help")} {
		out, errs, code := call(args...)
		if code != 0 || errs != "" {
			t.Errorf("%s %s: exit %d, stderr %q", name, strings.Join(args, " "), code, errs)
		}
		usages = append(usages, out)
	}
	if usages[0] != usages[1] || usages[1] != usages[2] {
		t.Errorf("help %s, %s -h and --help differ:\n%s\n---\n%s\n---\n%s", c.Name(), c.Name(), usages[0], usages[1], usages[2])
	}
	u := c.Usage
	if c.Short == "" {
		t.Errorf("%s: no one-line description in the command list", c.Name())
	}
	if c.About == "" && len(c.Flags) > 0 && len(c.Subs) == 0 {
		// A command with flags says what it does before them.
		if !strings.Contains(u, "\n\n"+c.Short) && !strings.Contains(u, c.Short) {
			t.Errorf("%s: the usage does not say what it does:\n%s", c.Name(), u)
		}
	}
	if len(c.Subs) == 0 && !strings.Contains(u, "\nflags:\n") {
		t.Errorf("%s: the usage lists no flags:\n%s", c.Name(), u)
	}
	if m := single.FindString(u); m != "" {
		t.Errorf("%s: a flag written %q, not --flag:\n%s", c.Name(), strings.TrimSpace(m), u)
	}
	if strings.Contains(u, "Usage of") || strings.Contains(u, "(default -") || regexp.MustCompile(`\(default [^)]*\) \(default`).MatchString(u) {
		t.Errorf("%s: the flag package's own format, or a meaningless default:\n%s", c.Name(), u)
	}
	for _, f := range c.Flags {
		if generic[strings.ToLower(f.Arg)] {
			t.Errorf("%s --%s: the placeholder %q names nothing (put the name in `backquotes` in its usage)", c.Name(), f.Name, f.Arg)
		}
		if f.Arg != "" && f.Arg != strings.ToUpper(f.Arg) {
			t.Errorf("%s --%s: the placeholder %q is not in capitals", c.Name(), f.Name, f.Arg)
		}
		if f.Text == "" {
			t.Errorf("%s --%s: no text", c.Name(), f.Name)
		}
	}
	checkUsageErrors(t, name, c, call)
}

// checkUsageErrors tries a command's usage errors: an unknown flag (an
// unknown subcommand), and each flag that takes a value given none.
func checkUsageErrors(t *testing.T, name string, c clidoc.Command, call func(args ...string) (string, string, int)) {
	prefix := name + " " + c.Name() + ": "
	usageErr := func(want string, args ...string) {
		t.Helper()
		out, errs, code := call(args...)
		first, _, _ := strings.Cut(errs, "\n")
		if code != 2 || !strings.HasPrefix(first, prefix) || !strings.Contains(first, want) || out != "" {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, and a first line %q... with %q",
				name, strings.Join(args, " "), code, out, first, prefix, want)
		}
	}
	if len(c.Subs) > 0 {
		usageErr(`unknown subcommand "no-such-subcommand"`, append(append([]string{}, c.Path...), "no-such-subcommand")...)
		return
	}
	usageErr("unknown flag --no-such-flag", append(append([]string{}, c.Path...), "--no-such-flag")...)
	for _, f := range c.Flags {
		if f.Arg != "" {
			usageErr("flag needs an argument: --"+f.Name, append(append([]string{}, c.Path...), "--"+f.Name)...)
		}
	}
}
