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
	"sort"
	"strings"

	"github.com/tablectl/tablectl/internal/cliflags"
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

// printFlags lists a flag set's flags in the convention's form.
func printFlags(w io.Writer, fs *flag.FlagSet) { cliflags.Print(w, fs) }

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
	return cliflags.Parse(fs, args, helpOut, func(msg string) error { return usageError(fs, "%s", msg) })
}
