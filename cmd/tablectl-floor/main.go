// Command tablectl-floor is the floor's binary, off the table boxes: the
// witness, the floor view, the comparison of a trail with the witnessed
// copy, the floor's logins (init) and the floor demo (demo --tables N).
// It carries what a table box never runs (nats-server, pgx); the table's
// binary, cmd/tablectl, carries none of it (internal/archtest checks).
//
// This package parses flags, prints and calls: the floor itself is the
// floor package, the demo's floor internal/floorsim.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
)

// command is one subcommand. run gets the arguments after its name and
// writes its normal output to stdout.
type command struct {
	name  string
	short string
	run   func(args []string, stdout io.Writer) error
}

var commands = map[string]command{}

// register adds a subcommand; each lives in its own file and registers from init.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("tablectl-floor: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks a usage error: the flag package has already said why.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// helpOut is where a usage asked for (-h, help CMD) goes: the caller's
// stdout, so it can be paged or grepped; usage after a mistake goes to
// stderr. run sets it; commands run one at a time.
var helpOut io.Writer = os.Stdout

// errOut is where usage after a mistake goes (run's stderr).
var errOut io.Writer = os.Stderr

func run(args []string, stdout, stderr io.Writer) int {
	helpOut, errOut = stdout, stderr
	// Global flags go before the command: --log-level, --log-format, --version.
	args, lo, code, done := globalFlags(args, stdout, stderr)
	if done {
		return code
	}
	logger, err := lo.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tablectl-floor: %v\n", err)
		return 2
	}
	slog.SetDefault(logger)
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "help" {
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		// help CMD [SUB]: the command's own usage, as CMD [SUB] -h prints it.
		args = append(append([]string{}, args[1:]...), "-h")
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tablectl-floor: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := c.run(args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errUsage) {
			return 2
		}
		fmt.Fprintf(stderr, "tablectl-floor %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

// usageError says what is wrong with the command line, prefixed with the
// command ("tablectl-floor verify: --db is required"), then its usage, on
// stderr; the command exits 2. For a mistake found before anything is
// done or sent: a missing or contradictory flag, a value that cannot be
// right.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(fs.Output(), "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return errUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tablectl-floor [--log-level LEVEL] [--log-format text|json] <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].short)
	}
	fmt.Fprintln(w, "\nglobal flags:")
	printFlags(w, globalFlagSet(&logOptions{}, new(bool)))
	fmt.Fprintln(w, "\n'tablectl-floor help <command>' or 'tablectl-floor <command> -h' prints a command's usage; 'tablectl-floor --version' the build")
}

// newFlagSet returns a flag set that reports errors instead of exiting,
// with the one usage format every command shares: what the command does,
// then its flags. A command with more to say sets its own Usage in the
// same format (usageHead, then printFlags).
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("tablectl-floor "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		usageHead(fs.Output(), name, "[flags]", shortOf(name))
		printFlags(fs.Output(), fs)
	}
	return fs
}

// shortOf is a command's one-line description.
func shortOf(name string) string { return commands[name].short }

// usageHead writes the first lines of a command's usage.
func usageHead(w io.Writer, name, synopsis, about string) {
	fmt.Fprintf(w, "usage: tablectl-floor %s %s\n\n", name, synopsis)
	if about != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(about))
	}
	fmt.Fprintln(w, "flags:")
}

// printFlags lists a flag set's flags as flag.PrintDefaults does, except
// that a flag whose usage text already says its default gets no second
// "(default ...)" and no flag shows a meaningless one ("-1ns").
func printFlags(w io.Writer, fs *flag.FlagSet) {
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		name, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			// Placeholders in capitals, as the synopses write them.
			line += " " + strings.ToUpper(name)
		}
		line += "\n    \t" + strings.ReplaceAll(text, "\n", "\n    \t")
		if !strings.Contains(text, "(default") && !zeroDefault(f) {
			if fmt.Sprintf("%T", f.Value) == "*flag.stringValue" {
				line += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				line += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintln(w, line)
	})
	if n == 0 {
		fmt.Fprintln(w, "  (none)")
	}
}

// zeroDefault reports whether a flag's default says nothing: empty, false,
// zero, or negative (a "not set" marker the usage text explains).
func zeroDefault(f *flag.Flag) bool {
	switch d := f.DefValue; {
	case d == "", d == "false", d == "0", d == "0s", d == "[]":
		return true
	case strings.HasPrefix(d, "-"):
		return true
	}
	return false
}

// parseFlags parses args, mapping flag errors to errUsage and refusing
// stray positional arguments. -h prints the usage to helpOut (stdout) and
// returns flag.ErrHelp, which exits 0; a mistake prints it to stderr.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments: %s (every value goes with its --flag)", strings.Join(fs.Args(), " "))
	}
	return nil
}

// parseFlagsArgs is parseFlags for a command that takes arguments after
// its flags.
func parseFlagsArgs(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(helpOut)
			fs.Usage()
			fs.SetOutput(out)
			return flag.ErrHelp
		}
		return usageError(fs, "%s", flagMessage(err))
	}
	return nil
}

// flagMessage is the flag package's error in the convention's terms: the
// flag as it is written (--name), "unknown flag" for one not defined.
func flagMessage(err error) string {
	s := err.Error()
	if name, ok := strings.CutPrefix(s, "flag provided but not defined: "); ok {
		return "unknown flag --" + strings.TrimLeft(name, "-")
	}
	return flagName.ReplaceAllString(s, "$1 --$2")
}

// flagName is a flag named in the flag package's errors ("for flag -x",
// "for -x", "argument: -x").
var flagName = regexp.MustCompile(`(flag|for|argument:) -{1,2}([A-Za-z0-9][A-Za-z0-9-]*)`)
