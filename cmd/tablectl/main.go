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
	"sort"
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
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tablectl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := c.run(args[1:], stdout); err != nil {
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "tablectl %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tablectl <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].short)
	}
	fmt.Fprintln(w, "\nrun 'tablectl <command> -h' for a command's flags")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("tablectl "+name, flag.ContinueOnError)
	return fs
}

// parseFlags parses args, mapping flag errors to errUsage and refusing
// stray positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	return nil
}
