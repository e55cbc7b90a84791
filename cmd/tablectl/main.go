// Command tablectl is the table controller for live-dealer Punto Banco: one
// binary whose subcommands run the controller, the shoe simulator, the exact
// odds, the audit tools and the supervisor's signed commands.
//
// This package parses flags, prints and calls: the table itself (start-up,
// the running parts, shutdown, the config file, the demo) is
// internal/controller, and the logic below it lives in coup, device,
// shoeread, audit, command and display. The performance harness is a
// binary of its own, cmd/tablectl-bench.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
		panic("tablectl: duplicate command " + c.name)
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
		fmt.Fprintf(stderr, "tablectl: %v\n", err)
		return 2
	}
	slog.SetDefault(logger)
	logFlagsSet = lo.set
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
		fmt.Fprintf(stderr, "tablectl: unknown command %q\n\n", args[0])
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
		name := c.name
		var se *subError
		if errors.As(err, &se) {
			name = se.name
		}
		fmt.Fprintf(stderr, "tablectl %s: %v\n", name, err)
		return 1
	}
	return 0
}

// subError is a subcommand's failure, named by the command and the
// subcommand ("audit verify"), so its message is prefixed with both.
type subError struct {
	name string
	err  error
}

func (e *subError) Error() string { return e.err.Error() }
func (e *subError) Unwrap() error { return e.err }

// usageError says what is wrong with the command line, prefixed with the
// command ("tablectl audit verify: --db is required"), then its usage, on
// stderr; the command exits 2. For a mistake found before anything is
// done or sent: a missing or contradictory flag, a value that cannot be
// right.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(fs.Output(), "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return errUsage
}

// warn writes a warning, prefixed with the command, to stderr: something
// done that may not be what was meant.
func warn(fs *flag.FlagSet, format string, args ...any) {
	fmt.Fprintf(errOut, "%s: warning: %s\n", fs.Name(), fmt.Sprintf(format, args...))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tablectl [--log-level LEVEL] [--log-format text|json] <command> [flags]\n\ncommands:")
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
	fmt.Fprintln(w, "\n'tablectl help <command>' or 'tablectl <command> -h' prints a command's usage; 'tablectl --version' the build")
}

// newFlagSet returns a flag set that reports errors instead of exiting,
// with the one usage format every command shares: what the command does,
// then its flags. A command with more to say sets its own Usage in the
// same format (usageHead, then printFlags).
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("tablectl "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		usageHead(fs.Output(), name, "[flags]", shortOf(name))
		printFlags(fs.Output(), fs)
	}
	return fs
}

// shortOf is a command's (or an audit subcommand's) one-line description.
func shortOf(name string) string {
	if c, ok := commands[name]; ok {
		return c.short
	}
	return subShorts[name]
}

// subcommand is one of a command's subcommands (audit verify, manifest sign).
type subcommand struct {
	name, short string
	run         func(args []string, stdout io.Writer) error
}

// runSubcommand runs the subcommand args[0] of the command name, or prints
// the command's usage: on stdout for -h or help (flag.ErrHelp), on stderr
// after a mistake (errUsage).
func runSubcommand(name string, subs []subcommand, args []string, stdout io.Writer) error {
	w := errOut
	if len(args) > 0 {
		for _, c := range subs {
			if c.name == args[0] {
				if err := c.run(args[1:], stdout); err != nil {
					return &subError{name: name + " " + c.name, err: err}
				}
				return nil
			}
		}
		switch args[0] {
		case "-h", "-help", "--help", "help":
			w = helpOut
		default:
			fmt.Fprintf(w, "tablectl %s: unknown subcommand %q\n\n", name, args[0])
		}
	}
	fmt.Fprintf(w, "usage: tablectl %s <subcommand> [flags]\n\n%s\n\nsubcommands:\n", name, commands[name].short)
	for _, c := range subs {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.short)
	}
	fmt.Fprintf(w, "\n'tablectl %s <subcommand> -h' prints a subcommand's flags\n", name)
	if w == helpOut {
		return flag.ErrHelp
	}
	return errUsage
}

// subShorts are the descriptions of subcommands ("audit verify"), filled
// by their commands' init.
var subShorts = map[string]string{}

// usageHead writes the first lines of a command's usage.
func usageHead(w io.Writer, name, synopsis, about string) {
	fmt.Fprintf(w, "usage: tablectl %s %s\n\n", name, synopsis)
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

// createOut creates (or truncates) the file an --out flag names, making
// its folder first when missing: a newcomer's `--out ~/new/file` works.
func createOut(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.Create(path)
}
