// Package cli is the one command line of every tablectl binary (tablectl,
// tablectl-floor): a Registry of commands, each a name and a one-line
// description, some with subcommands ("audit verify"); the global flags
// before the command (--log-level, --log-format, --version); the usage
// listed from the registry; `help CMD`; the `version` command
// (internal/buildinfo); and the convention's exit codes: 0 done (and -h),
// 1 failed, 2 a usage error, said on stderr with the command's name and
// its usage. A binary's main registers its commands and calls Run, so both
// binaries answer alike (internal/clitest checks each).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/tablectl/tablectl/internal/buildinfo"
	"github.com/tablectl/tablectl/internal/cliflags"
	"github.com/tablectl/tablectl/internal/oplog"
)

// ErrUsage marks a usage error: what is wrong has been said, with the
// usage, and the command exits 2.
var ErrUsage = errors.New("usage")

// Command is one command. Run gets the arguments after its name and
// writes its normal output to stdout. A command with Subs has no Run of
// its own: its first argument names the subcommand.
type Command struct {
	Name, Short string
	Run         func(args []string, stdout io.Writer) error
	Subs        []Command
}

// Registry is one binary's commands and the state of the run in progress
// (commands run one at a time, as a process runs one).
type Registry struct {
	name      string
	commands  map[string]Command
	subShorts map[string]string
	// helpOut is where a usage asked for (-h, help CMD) goes: the caller's
	// stdout, so it can be paged or grepped; errOut, where usage after a
	// mistake goes. Run sets both.
	helpOut, errOut io.Writer
	logFlagsSet     bool
}

// New is the registry of the program name, with its version command.
func New(name string) *Registry {
	r := &Registry{name: name, commands: map[string]Command{}, subShorts: map[string]string{}, helpOut: os.Stdout, errOut: os.Stderr}
	r.Register(Command{Name: "version", Short: "print the build: version, VCS revision, Go, platform", Run: r.runVersion})
	return r
}

// Register adds a command; each lives in a file of its own and registers
// from init. Two of one name is the program's mistake, found at start.
func (r *Registry) Register(c Command) {
	if _, dup := r.commands[c.Name]; dup {
		panic(r.name + ": duplicate command " + c.Name)
	}
	if (c.Run == nil) == (len(c.Subs) == 0) {
		panic(r.name + ": command " + c.Name + " needs a Run or subcommands, not both")
	}
	r.commands[c.Name] = c
	for _, s := range c.Subs {
		r.subShorts[c.Name+" "+s.Name] = s.Short
	}
}

// Names are the registered commands' names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.commands))
	for n := range r.commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Command is the registered command name.
func (r *Registry) Command(name string) (Command, bool) {
	c, ok := r.commands[name]
	return c, ok
}

// LogFlagsSet says whether the command line gave --log-level or
// --log-format (the demo keeps to warnings otherwise).
func (r *Registry) LogFlagsSet() bool { return r.logFlagsSet }

// Run runs the command line args (without the program's name) and returns
// the exit code.
func (r *Registry) Run(args []string, stdout, stderr io.Writer) int {
	r.helpOut, r.errOut = stdout, stderr
	// Global flags go before the command: --log-level, --log-format, --version.
	args, lo, code, done := r.globalFlags(args, stdout, stderr)
	if done {
		return code
	}
	logger, err := lo.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", r.name, err)
		return 2
	}
	slog.SetDefault(logger)
	r.logFlagsSet = lo.set
	if len(args) == 0 {
		r.usage(stderr)
		return 2
	}
	if args[0] == "help" {
		if len(args) == 1 {
			r.usage(stdout)
			return 0
		}
		// help CMD [SUB]: the command's own usage, as CMD [SUB] -h prints it.
		args = append(append([]string{}, args[1:]...), "-h")
	}
	c, ok := r.commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", r.name, args[0])
		r.usage(stderr)
		return 2
	}
	return r.exit(c.Name, r.runCommand(c, args[1:], stdout), stderr)
}

// exit is the code of a command's result, its failure said on stderr
// prefixed with the command (and the subcommand: "audit verify").
func (r *Registry) exit(name string, err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	var se *subError
	if errors.As(err, &se) {
		name = se.name
	}
	fmt.Fprintf(stderr, "%s %s: %v\n", r.name, name, err)
	return 1
}

func (r *Registry) runCommand(c Command, args []string, stdout io.Writer) error {
	if len(c.Subs) == 0 {
		return c.Run(args, stdout)
	}
	return r.runSub(c, args, stdout)
}

// subError is a subcommand's failure, named by the command and the
// subcommand ("audit verify"), so its message is prefixed with both.
type subError struct {
	name string
	err  error
}

func (e *subError) Error() string { return e.err.Error() }
func (e *subError) Unwrap() error { return e.err }

// runSub runs the subcommand args[0] of c, or prints c's usage: on stdout
// for -h or help (flag.ErrHelp), on stderr after a mistake (ErrUsage).
func (r *Registry) runSub(c Command, args []string, stdout io.Writer) error {
	w := r.errOut
	if len(args) > 0 {
		for _, s := range c.Subs {
			if s.Name == args[0] {
				if err := s.Run(args[1:], stdout); err != nil {
					return &subError{name: c.Name + " " + s.Name, err: err}
				}
				return nil
			}
		}
		switch args[0] {
		case "-h", "-help", "--help", "help":
			w = r.helpOut
		default:
			fmt.Fprintf(w, "%s %s: unknown subcommand %q\n\n", r.name, c.Name, args[0])
		}
	}
	fmt.Fprintf(w, "usage: %s %s <subcommand> [flags]\n\n%s\n\nsubcommands:\n", r.name, c.Name, c.Short)
	for _, s := range c.Subs {
		fmt.Fprintf(w, "  %-11s %s\n", s.Name, s.Short)
	}
	fmt.Fprintf(w, "\n'%s %s <subcommand> -h' prints a subcommand's flags\n", r.name, c.Name)
	if w == r.helpOut {
		return flag.ErrHelp
	}
	return ErrUsage
}

// usage is the program's: its synopsis, commands and global flags.
func (r *Registry) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s [--log-level LEVEL] [--log-format text|json] <command> [flags]\n\ncommands:\n", r.name)
	for _, n := range r.Names() {
		fmt.Fprintf(w, "  %-12s %s\n", n, r.commands[n].Short)
	}
	fmt.Fprintln(w, "\nglobal flags:")
	cliflags.Print(w, r.globalFlagSet(&logOptions{}, new(bool)))
	fmt.Fprintf(w, "\n'%[1]s help <command>' or '%[1]s <command> -h' prints a command's usage; '%[1]s --version' the build\n", r.name)
}

// Short is a command's (or a subcommand's: "audit verify") one-line
// description.
func (r *Registry) Short(name string) string {
	if c, ok := r.commands[name]; ok {
		return c.Short
	}
	return r.subShorts[name]
}

// FlagSet returns a flag set for the command name ("audit verify") that
// reports errors instead of exiting, with the one usage format every
// command shares: what the command does, then its flags. A command with
// more to say sets its own Usage in the same format (UsageHead, then
// cliflags.Print).
func (r *Registry) FlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(r.name+" "+name, flag.ContinueOnError)
	fs.SetOutput(r.errOut)
	fs.Usage = func() {
		r.UsageHead(fs.Output(), name, "[flags]", r.Short(name))
		cliflags.Print(fs.Output(), fs)
	}
	return fs
}

// UsageHead writes the first lines of a command's usage.
func (r *Registry) UsageHead(w io.Writer, name, synopsis, about string) {
	fmt.Fprintf(w, "usage: %s %s %s\n\n", r.name, name, synopsis)
	if about != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(about))
	}
	fmt.Fprintln(w, "flags:")
}

// Parse parses args, mapping flag errors to ErrUsage and refusing stray
// positional arguments. -h prints the usage to the run's stdout and
// returns flag.ErrHelp, which exits 0; a mistake prints it to stderr.
func (r *Registry) Parse(fs *flag.FlagSet, args []string) error {
	if err := r.ParseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return UsageError(fs, "unexpected arguments: %s (every value goes with its --flag)", strings.Join(fs.Args(), " "))
	}
	return nil
}

// ParseArgs is Parse for a command that takes arguments after its flags.
func (r *Registry) ParseArgs(fs *flag.FlagSet, args []string) error {
	return cliflags.Parse(fs, args, r.helpOut, func(msg string) error { return UsageError(fs, "%s", msg) })
}

// UsageError says what is wrong with the command line, prefixed with the
// command ("tablectl audit verify: --db is required"), then its usage, on
// stderr; the command exits 2. For a mistake found before anything is
// done or sent: a missing or contradictory flag, a value that cannot be
// right.
func UsageError(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(fs.Output(), "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return ErrUsage
}

// Warn writes a warning, prefixed with the command, to stderr: something
// done that may not be what was meant.
func (r *Registry) Warn(fs *flag.FlagSet, format string, args ...any) {
	fmt.Fprintf(r.errOut, "%s: warning: %s\n", fs.Name(), fmt.Sprintf(format, args...))
}

// logOptions are the global --log-level and --log-format; set says
// whether either was given.
type logOptions struct {
	level, format string
	set           bool
}

func (o logOptions) logger(w io.Writer) (*slog.Logger, error) {
	return oplog.New(w, o.level, o.format)
}

func (r *Registry) globalFlagSet(o *logOptions, version *bool) *flag.FlagSet {
	fs := flag.NewFlagSet(r.name, flag.ContinueOnError)
	fs.StringVar(&o.level, "log-level", "info", "log `LEVEL`: debug (every recorded row), info, warn (what an operator acts on) or error")
	fs.StringVar(&o.format, "log-format", oplog.FormatText, "log `FORMAT`: text (key=value) or json (one object a line)")
	fs.BoolVar(version, "version", false, "print the build and exit")
	return fs
}

// globalFlags reads the flags before the command. done is set when there
// is nothing more to run (--version, -h, a bad flag), with the exit code.
func (r *Registry) globalFlags(args []string, stdout, stderr io.Writer) (rest []string, o logOptions, code int, done bool) {
	var version bool
	fs := r.globalFlagSet(&o, &version)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			r.usage(stdout)
			return nil, o, 0, true
		}
		fmt.Fprintf(stderr, "%s: %v\n\n", r.name, err)
		r.usage(stderr)
		return nil, o, 2, true
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Get())
		return nil, o, 0, true
	}
	if _, err := o.logger(io.Discard); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", r.name, err)
		return nil, o, 2, true
	}
	fs.Visit(func(f *flag.Flag) { o.set = o.set || f.Name == "log-level" || f.Name == "log-format" })
	return fs.Args(), o, 0, false
}

func (r *Registry) runVersion(args []string, stdout io.Writer) error {
	fs := r.FlagSet("version")
	asJSON := fs.Bool("json", false, "print the build as JSON")
	if err := r.Parse(fs, args); err != nil {
		return err
	}
	return buildinfo.Write(stdout, *asJSON)
}
