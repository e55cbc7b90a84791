// Command tablectl is the table controller for live-dealer Punto Banco: one
// binary whose subcommands run the controller, the shoe simulator, the exact
// odds, the audit tools and the supervisor's signed commands.
//
// This package parses flags, prints and calls: the table itself (start-up,
// the running parts, shutdown, the config file, the demo) is
// internal/controller, and the logic below it lives in coup, device,
// shoeread, audit, command and display. The command line (the registry,
// global flags, usage, version) is internal/cli, shared with the floor's
// binary. The performance harness is a binary of its own, cmd/tablectl-bench.
package main

import (
	"os"
	"path/filepath"

	"github.com/tablectl/tablectl/internal/cli"
	"github.com/tablectl/tablectl/internal/cliflags"
)

// app is tablectl's command line; each command registers in its file's init.
var app = cli.New("tablectl")

// The convention's calls, by the names every command's file uses.
var (
	register       = app.Register
	newFlagSet     = app.FlagSet
	usageHead      = app.UsageHead
	parseFlags     = app.Parse
	parseFlagsArgs = app.ParseArgs
	usageError     = cli.UsageError
	printFlags     = cliflags.Print
	warn           = app.Warn
	errUsage       = cli.ErrUsage
)

type command = cli.Command

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the binary's entry point: the tests call it as main does.
var run = app.Run

// createOut creates (or truncates) the file an --out flag names, making
// its folder first when missing: a newcomer's `--out ~/new/file` works.
func createOut(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.Create(path)
}
