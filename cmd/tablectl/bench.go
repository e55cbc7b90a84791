package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
)

func init() {
	register(command{name: "bench", short: "run every performance benchmark and print the table (docs/benchmarks.md)", run: runBench})
}

func runBench(args []string, stdout io.Writer) error {
	fs := newFlagSet("bench")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: tablectl bench [flags]

Runs every benchmark of docs/benchmarks.md against the real parts (a
pseudo-terminal, SQLite with fsync, the Mosquitto at --broker) and prints
the table: card to display and its floor, throughput, audit verify and
replay, exact odds, start-up on a long trail, and the footprint of a
12-hour session. The full run takes several minutes; --quick runs tiny
sizes only to check that everything works.

flags:
`)
		fs.PrintDefaults()
	}
	var o benchOptions
	quick := fs.Bool("quick", false, "tiny sizes: checks the benchmarks run; the numbers mean little")
	asJSON := fs.Bool("json", false, "print JSON instead of the Markdown table")
	fs.StringVar(&o.Broker, "broker", "", "the MQTT broker `URL` (default: a Mosquitto the bench starts on a free loopback port, its queue unbounded)")
	fs.StringVar(&o.Dir, "dir", "", "the `folder` for the trails (default: the temporary folder, or . if that is tmpfs); must be on the disk to measure")
	fs.BoolVar(&o.Keep, "keep", false, "keep the trails and logs")
	fs.StringVar(&o.Profile, "profile", "vip", "the rule profile")
	fs.Uint64Var(&o.Seed, "seed", 7, "shuffle seed")
	fs.IntVar(&o.Cards, "cards", 0, "card to display: cards measured (default 10000; --quick 150)")
	fs.IntVar(&o.Floor, "floor", 0, "floor samples (default 10000; --quick 150)")
	fs.DurationVar(&o.Gap, "gap", 0, "card to display: rest after each row arrives, before the next sentence (default 2ms)")
	fs.IntVar(&o.ThroughputCards, "throughput-cards", 0, "cards dealt in each throughput run, paced and full speed (default 20000; --quick 400)")
	fs.Float64Var(&o.ThroughputRate, "throughput-rate", 0, "cards a second of the paced throughput run: the goal (default 2000)")
	fs.IntVar(&o.TrailRows, "trail-rows", 0, "rows of the trail verified, replayed and started on (default 1000000; --quick 20000)")
	fs.IntVar(&o.OddsShoes, "odds-shoes", 0, "shoes whose every coup is priced (default 8; --quick 1)")
	fs.DurationVar(&o.Session, "session", 0, "footprint: the session's length in play (default 12h; --quick 30m)")
	fs.DurationVar(&o.SessionWall, "session-wall", 0, "footprint: the wall time it is compressed into (default 2m30s; --quick 5s)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to `file` (go tool pprof)")
	only := fs.String("only", "", "run only these parts, comma-separated: "+strings.Join(benchParts, ", ")+" (rows of the others say \"not run\")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *only != "" {
		for _, part := range strings.Split(*only, ",") {
			if !slices.Contains(benchParts, part) {
				return fmt.Errorf("--only: no part %q (the parts: %s)", part, strings.Join(benchParts, ", "))
			}
			o.Only = append(o.Only, part)
		}
	}
	if o.Session < 0 || o.SessionWall < 0 || o.Gap < 0 || o.Cards < 0 || o.Floor < 0 || o.ThroughputCards < 0 || o.ThroughputRate < 0 || o.TrailRows < 0 || o.OddsShoes < 0 {
		return fmt.Errorf("sizes and durations must not be negative")
	}
	o.benchSizes(*quick)
	o.progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runBenchmarks(ctx, o)
	if rep != nil {
		var perr error
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			perr = enc.Encode(rep)
		} else {
			perr = writeBenchTable(stdout, rep)
		}
		if err == nil {
			err = perr
		}
	}
	return err
}

// writeBenchTable prints the report as Markdown: the machine, the table,
// then each row's details.
func writeBenchTable(w io.Writer, r *benchReport) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s memory, disk %s; %s; %s; %s; load average before %s.\n\n",
		m.CPUs, m.CPUModel, m.Memory, m.Disk, m.Go, m.Mosquitto, m.Date, m.Load)
	o := r.Options
	fmt.Fprintf(&b, "Sizes: %d cards (floor %d samples), %d cards paced at %.0f cards/s and %d at full speed, a trail of %d rows, %d shoes priced, "+
		"a %s session in %s; profile %s; broker %s. Run took %s.\n\n",
		o.Cards, o.Floor, o.ThroughputCards, o.ThroughputRate, o.ThroughputCards, o.TrailRows, o.OddsShoes, o.Session, o.SessionWall, o.Profile, o.Broker, r.Elapsed)
	b.WriteString("| what | result | goal | pass/fail |\n| --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(row.What), cell(row.Result), cell(row.Goal), cell(row.Verdict))
	}
	b.WriteString("\nDetails:\n\n")
	for _, row := range r.Rows {
		if row.Detail != "" {
			fmt.Fprintf(&b, "- %s: %s\n", row.ID, row.Detail)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell keeps a table cell on one line and its pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
