package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/tablectl/tablectl/internal/buildinfo"
	"github.com/tablectl/tablectl/internal/oplog"
)

func init() {
	register(command{name: "version", short: "print the build: version, VCS revision, Go, platform", run: runVersion})
}

// logOptions are the global --log-level and --log-format; set says
// whether either was given (the demo keeps to warnings otherwise).
type logOptions struct {
	level, format string
	set           bool
}

func (o logOptions) logger(w io.Writer) (*slog.Logger, error) {
	return oplog.New(w, o.level, o.format)
}

func globalFlagSet(o *logOptions, version *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("tablectl-floor", flag.ContinueOnError)
	fs.StringVar(&o.level, "log-level", "info", "log `LEVEL`: debug (every recorded row), info, warn (what an operator acts on) or error")
	fs.StringVar(&o.format, "log-format", oplog.FormatText, "log `FORMAT`: text (key=value) or json (one object a line)")
	fs.BoolVar(version, "version", false, "print the build and exit")
	return fs
}

// globalFlags reads the flags before the command. done is set when there
// is nothing more to run (--version, -h, a bad flag), with the exit code.
func globalFlags(args []string, stdout, stderr io.Writer) (rest []string, o logOptions, code int, done bool) {
	var version bool
	fs := globalFlagSet(&o, &version)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			usage(stdout)
			return nil, o, 0, true
		}
		fmt.Fprintf(stderr, "tablectl-floor: %v\n\n", err)
		usage(stderr)
		return nil, o, 2, true
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Get())
		return nil, o, 0, true
	}
	if _, err := o.logger(io.Discard); err != nil {
		fmt.Fprintf(stderr, "tablectl-floor: %v\n", err)
		return nil, o, 2, true
	}
	fs.Visit(func(f *flag.Flag) { o.set = o.set || f.Name == "log-level" || f.Name == "log-format" })
	return fs.Args(), o, 0, false
}

func runVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version")
	asJSON := fs.Bool("json", false, "print the build as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return buildinfo.Write(stdout, *asJSON)
}
