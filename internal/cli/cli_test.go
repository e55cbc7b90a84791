package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/clitest"
)

// toy is a binary of three commands, one with subcommands: what each
// outcome of a command looks like to its user.
func toy() *Registry {
	r := New("toy")
	r.Register(Command{Name: "deal", Short: "deal N cards", Run: func(args []string, stdout io.Writer) error {
		fs := r.FlagSet("deal")
		n := fs.Int("cards", 4, "`N` cards")
		if err := r.Parse(fs, args); err != nil {
			return err
		}
		if *n > 6 {
			return UsageError(fs, "--cards %d: a coup has at most 6", *n)
		}
		fmt.Fprintf(stdout, "dealt %d\n", *n)
		return nil
	}})
	r.Register(Command{Name: "burn", Short: "fails", Run: func(args []string, stdout io.Writer) error {
		if err := r.Parse(r.FlagSet("burn"), args); err != nil {
			return err
		}
		return errors.New("the shoe is empty")
	}})
	r.Register(Command{Name: "shoe", Short: "the shoe's steps", Subs: []Command{
		{Name: "start", Short: "start a shoe", Run: func(args []string, stdout io.Writer) error {
			fs := r.FlagSet("shoe start")
			if err := r.Parse(fs, args); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "started")
			return nil
		}},
		{Name: "end", Short: "end the shoe", Run: func(args []string, stdout io.Writer) error {
			if err := r.Parse(r.FlagSet("shoe end"), args); err != nil {
				return err
			}
			return errors.New("no shoe")
		}},
	}})
	return r
}

func TestRun(t *testing.T) {
	for _, tt := range []struct {
		args           []string
		code           int
		stdout, stderr string // each a part of the output; "" wants none
	}{
		{nil, 2, "", "usage: toy [--log-level LEVEL] [--log-format text|json] <command> [flags]\n\ncommands:\n  burn         fails\n  deal         deal N cards\n  shoe         the shoe's steps\n  version      print the build"},
		{[]string{"help"}, 0, "commands:\n  burn ", ""},
		{[]string{"-h"}, 0, "'toy help <command>' or 'toy <command> -h' prints a command's usage; 'toy --version' the build\n", ""},
		{[]string{"--nosuch"}, 2, "", "toy: flag provided but not defined: -nosuch\n\nusage: toy "},
		{[]string{"nosuch"}, 2, "", "toy: unknown command \"nosuch\"\n\nusage: toy "},
		{[]string{"deal"}, 0, "dealt 4\n", ""},
		{[]string{"deal", "--cards", "5"}, 0, "dealt 5\n", ""},
		{[]string{"deal", "-h"}, 0, "usage: toy deal [flags]\n\ndeal N cards\n\nflags:\n  --cards N\n    \tN cards (default 4)\n", ""},
		{[]string{"help", "deal"}, 0, "usage: toy deal [flags]\n", ""},
		{[]string{"deal", "--cards"}, 2, "", "toy deal: flag needs an argument: --cards\n\nusage: toy deal [flags]"},
		{[]string{"deal", "--cards", "7"}, 2, "", "toy deal: --cards 7: a coup has at most 6\n\nusage: toy deal [flags]"},
		{[]string{"deal", "stray"}, 2, "", "toy deal: unexpected arguments: stray (every value goes with its --flag)"},
		{[]string{"burn"}, 1, "", "toy burn: the shoe is empty\n"},
		{[]string{"shoe"}, 2, "", "usage: toy shoe <subcommand> [flags]\n\nthe shoe's steps\n\nsubcommands:\n  start       start a shoe\n  end         end the shoe\n\n'toy shoe <subcommand> -h' prints a subcommand's flags\n"},
		{[]string{"shoe", "-h"}, 0, "usage: toy shoe <subcommand> [flags]", ""},
		{[]string{"help", "shoe"}, 0, "usage: toy shoe <subcommand> [flags]", ""},
		{[]string{"shoe", "shuffle"}, 2, "", "toy shoe: unknown subcommand \"shuffle\"\n\nusage: toy shoe <subcommand>"},
		{[]string{"shoe", "start"}, 0, "started\n", ""},
		{[]string{"help", "shoe", "start"}, 0, "usage: toy shoe start [flags]\n\nstart a shoe\n\nflags:\n  (none)\n", ""},
		{[]string{"shoe", "start", "--x"}, 2, "", "toy shoe start: unknown flag --x\n\nusage: toy shoe start [flags]"},
		{[]string{"shoe", "end"}, 1, "", "toy shoe end: no shoe\n"},
		{[]string{"--log-level", "loud", "deal"}, 2, "", `log level "loud"`},
		{[]string{"--log-format", "xml", "deal"}, 2, "", `log format "xml"`},
		{[]string{"--log-level", "debug", "deal"}, 0, "dealt 4\n", ""},
		{[]string{"version", "--json"}, 0, `"platform":`, ""},
		{[]string{"version", "extra"}, 2, "", "toy version: unexpected arguments: extra"},
	} {
		var out, errb bytes.Buffer
		code := toy().Run(tt.args, &out, &errb)
		if code != tt.code || !has(out.String(), tt.stdout) || !has(errb.String(), tt.stderr) {
			t.Errorf("toy %q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out.String(), errb.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
}

// has: want is in s, or s is empty when nothing is wanted.
func has(s, want string) bool {
	if want == "" {
		return s == ""
	}
	return strings.Contains(s, want)
}

// TestVersion: --version and version print the same build line.
func TestVersion(t *testing.T) {
	var a, b, errb bytes.Buffer
	if toy().Run([]string{"version"}, &a, &errb) != 0 || toy().Run([]string{"--version"}, &b, &errb) != 0 {
		t.Fatal(errb.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "tablectl ") || !strings.Contains(a.String(), " go1.") {
		t.Errorf("version %q, --version %q", a.String(), b.String())
	}
}

// TestLogFlagsSet: the demo keeps to warnings unless a log flag was given.
func TestLogFlagsSet(t *testing.T) {
	for _, tt := range []struct {
		args []string
		set  bool
	}{
		{[]string{"deal"}, false},
		{[]string{"--log-level", "info", "deal"}, true},
		{[]string{"--log-format", "json", "deal"}, true},
	} {
		r := toy()
		r.Run(tt.args, io.Discard, io.Discard)
		if r.LogFlagsSet() != tt.set {
			t.Errorf("%q: LogFlagsSet %v", tt.args, r.LogFlagsSet())
		}
	}
}

// TestConvention: the registry keeps the convention internal/clitest
// checks on each binary, for any command set.
func TestConvention(t *testing.T) {
	r := toy()
	d := clitest.Check(t, "toy", r.Run)
	var names []string
	for _, c := range d.Commands {
		names = append(names, c.Name())
	}
	if got := strings.Join(names, ","); got != "burn,deal,shoe,shoe start,shoe end,version" {
		t.Errorf("the help lists %s", got)
	}
}

// TestRegisterRefuses: two commands of one name, or a command with both a
// Run and subcommands (or neither), are the program's mistake, at start.
func TestRegisterRefuses(t *testing.T) {
	run := func([]string, io.Writer) error { return nil }
	for _, c := range []Command{
		{Name: "deal", Run: run},
		{Name: "version", Run: run},
		{Name: "both", Run: run, Subs: []Command{{Name: "a", Run: run}}},
		{Name: "neither"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s registered", c.Name)
				}
			}()
			toy().Register(c)
		}()
	}
}
