// Command tablectl-floor is the floor's binary, off the table boxes: the
// witness, the floor view, the comparison of a trail with the witnessed
// copy, the floor's logins (init) and the floor demo (demo --tables N).
// It carries what a table box never runs (nats-server, pgx); the table's
// binary, cmd/tablectl, carries none of it (internal/archtest checks).
//
// This package parses flags, prints and calls: the floor itself is the
// floor package, the demo's floor internal/floorsim, and the command line
// (the registry, global flags, usage, version) internal/cli, the same as
// tablectl's.
package main

import (
	"os"

	"github.com/tablectl/tablectl/internal/cli"
	"github.com/tablectl/tablectl/internal/cliflags"
)

// app is tablectl-floor's command line; each command registers in its
// file's init.
var app = cli.New("tablectl-floor")

// The convention's calls, by the names every command's file uses.
var (
	register   = app.Register
	newFlagSet = app.FlagSet
	usageHead  = app.UsageHead
	parseFlags = app.Parse
	usageError = cli.UsageError
	printFlags = cliflags.Print
	errUsage   = cli.ErrUsage
)

type command = cli.Command

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the binary's entry point: the tests call it as main does.
var run = app.Run
