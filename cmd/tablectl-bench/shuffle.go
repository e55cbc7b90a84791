package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tablectl/tablectl/internal/bench"
)

// runShuffle is `tablectl-bench shuffle`: the shuffle check's record
// (docs/game-protection.md), no broker or disk needed.
func runShuffle(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tablectl-bench shuffle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: tablectl-bench shuffle [flags]

Measures the table's shuffle check (coup.ShuffleCheck) on shoes made
independently of it: false alarms over fair 8-deck shoes dealt one after
another, and for every way a shoe reaches a table unshuffled, how often it
is caught and how many cards after the unshuffled stretch begins. Every
shoe comes from --seed: the same flags print the same table. Exits 1 when a
goal is missed.

flags:
`)
		fs.PrintDefaults()
	}
	var o bench.ShuffleOptions
	fs.IntVar(&o.Shoes, "shoes", 1_000_000, "fair shoes the false alarms are counted over")
	fs.IntVar(&o.Trials, "trials", 2000, "shoes dealt of each case")
	fs.Uint64Var(&o.Seed, "seed", 33, "the seed of every shoe")
	fs.IntVar(&o.Workers, "workers", 0, "goroutines dealing (default: the processors)")
	asJSON := fs.Bool("json", false, "print JSON instead of the Markdown table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	if o.Shoes < 1 || o.Trials < 1 || o.Workers < 0 {
		fmt.Fprintln(fs.Output(), "--shoes and --trials must be at least 1, --workers not negative")
		return errUsage
	}
	o.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunShuffle(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = bench.WriteShuffleTable(stdout, rep)
	}
	if err == nil && !rep.ShufflePass() {
		err = errors.New("shuffle check: a goal was missed (see the table)")
	}
	return err
}
