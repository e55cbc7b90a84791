package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/audit/stats"
)

func init() {
	register(command{
		Name:  "stats",
		Short: "game statistics per dealer, shift or shoe from an audit trail",
		Run:   runStats,
	})
}

func runStats(args []string, stdout io.Writer) error {
	fs := newFlagSet("stats")
	fs.Usage = func() {
		usageHead(fs.Output(), "stats", "--db FILE [--by dealer|shift|shoe] [--json|--csv]", `Collates the trail into coups, time in play, coups per hour, seconds per
coup (no more bets to result), misdeals and voids per 100 coups, and alerts,
per dealer (the dealer signed in), per shift or per shoe, with a total.`)
		printFlags(fs.Output(), fs)
	}
	db := fs.String("db", "", "the trail (required; opened read-only): a `file`, a directory of segments, or segment files in order, comma-separated")
	by := fs.String("by", "dealer", "group by `WHAT`: dealer, shift or shoe")
	asJSON := fs.Bool("json", false, "print JSON")
	asCSV := fs.Bool("csv", false, "print CSV")
	shifts := fs.String("shifts", "06:00,14:00,22:00", "shift start `times`, HH:MM, comma-separated")
	tz := fs.String("tz", "UTC", "the time `zone` shifts are in (IANA name, or Local)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" {
		return usageError(fs, "--db is required")
	}
	if *asJSON && *asCSV {
		return usageError(fs, "--json and --csv: give one")
	}
	switch stats.By(*by) {
	case stats.ByDealer, stats.ByShift, stats.ByShoe:
	default:
		return usageError(fs, "--by %q: want dealer, shift or shoe", *by)
	}
	o := stats.Options{By: stats.By(*by)}
	var err error
	if o.Shifts, err = stats.ParseShifts(*shifts); err != nil {
		return usageError(fs, "--shifts: %v", err)
	}
	if o.Location, err = time.LoadLocation(*tz); err != nil {
		return usageError(fs, "--tz: %v", err)
	}
	ctx := context.Background()
	r, err := audit.OpenReader(ctx, *db)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := stats.Compute(r.Events(ctx, audit.Query{Kinds: stats.Kinds}), o)
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	case *asCSV:
		return stats.WriteCSV(stdout, rep)
	}
	return stats.WriteText(stdout, rep)
}
