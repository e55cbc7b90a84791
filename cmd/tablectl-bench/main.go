// Command tablectl-bench runs every performance benchmark of
// docs/benchmarks.md against the real parts and prints the table. It is a
// binary of its own so that the harness (its MQTT subscriber, /proc
// readers, the Mosquitto it starts) is not linked into tablectl, the binary
// that runs at the table; the footprint rows run that tablectl binary.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/tablectl/tablectl/internal/bench"
	"github.com/tablectl/tablectl/internal/floorbench"
)

func main() {
	bench.ServeSubscriber()   // the bench's subscribers are this binary again
	floorbench.ServeWitness() // and so are the floor part's witnesses
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: its exit code is 2 for a usage error, 1 for a
// benchmark that failed or could not run.
func run(args []string, stdout, stderr io.Writer) int {
	if err := runBench(args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
			return 2
		}
		fmt.Fprintf(stderr, "tablectl-bench: %v\n", err)
		return 1
	}
	return 0
}

// errUsage marks a usage error: the flag package has already said why.
var errUsage = errors.New("usage")

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "shuffle" {
		return runShuffle(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("tablectl-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: tablectl-bench [flags]
       tablectl-bench shuffle [flags]   (the shuffle check's record; -h for its flags)

Runs every benchmark of docs/benchmarks.md against the real parts (a
pseudo-terminal, SQLite with fsync, the Mosquitto at --broker) and prints
the table: card to display and its floor, throughput, audit verify and
replay, exact odds, start-up on a long trail, and the footprint of a
12-hour session (which runs the tablectl binary: --tablectl, else the
one beside this binary, else the one on PATH, else one it builds from
this checkout). The full run takes several minutes; --quick runs tiny
sizes only to check that everything works.

The floor part runs only when named (--only floor): a 3-node nats-server
cluster, PostgreSQL (--floor-postgres), two witnesses and simulated
tables, at each of --floor-tables, the last for a 30-minute soak and a
10-minute witness outage; about 50 minutes at its full sizes.

flags:
`)
		fs.PrintDefaults()
	}
	var o bench.Options
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
	fs.Float64Var(&o.ThroughputRate, "throughput-rate", 0, "cards a second of the paced throughput run: the goal (default 4000)")
	fs.IntVar(&o.TrailRows, "trail-rows", 0, "rows of the trail verified and replayed (default 1000000; --quick 20000)")
	startupRows := fs.String("startup-rows", "", "the trails started on, comma-separated row counts (default 100000,10000000; --quick 5000,50000)")
	fs.IntVar(&o.SegmentRows, "segment-rows", 0, "rows of the segment the cut-over seals (default 1000000; --quick 20000)")
	fs.IntVar(&o.OddsShoes, "odds-shoes", 0, "shoes whose every coup is priced (default 8; --quick 1)")
	fs.DurationVar(&o.Session, "session", 0, "footprint: the session's length in play (default 12h; --quick 30m)")
	fs.DurationVar(&o.SessionWall, "session-wall", 0, "footprint: the wall time it is compressed into (default 2m30s; --quick 5s)")
	fs.StringVar(&o.Tablectl, "tablectl", "", "the tablectl `binary` the footprint runs (default: beside this one, on PATH, or built from this checkout)")
	floorOptions := floorFlags(fs)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to `file` (go tool pprof)")
	only := fs.String("only", "", "run only these parts, comma-separated: "+strings.Join(bench.Parts, ", ")+" (rows of the others say \"not run\")")
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
			if !slices.Contains(bench.Parts, part) {
				return fmt.Errorf("--only: no part %q (the parts: %s)", part, strings.Join(bench.Parts, ", "))
			}
			o.Only = append(o.Only, part)
		}
	}
	if *startupRows != "" {
		for _, f := range strings.Split(*startupRows, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 3 {
				return fmt.Errorf("--startup-rows: %q is not a row count of 3 or more", f)
			}
			o.StartupRows = append(o.StartupRows, n)
		}
	}
	if o.Session < 0 || o.SessionWall < 0 || o.Gap < 0 || o.Cards < 0 || o.Floor < 0 || o.ThroughputCards < 0 || o.ThroughputRate < 0 || o.TrailRows < 0 || o.SegmentRows < 0 || o.OddsShoes < 0 {
		return fmt.Errorf("sizes and durations must not be negative")
	}
	o.Sizes(*quick)
	o.Progress = stderr
	o.FloorPart = floorbench.Part(floorOptions(*quick, stderr))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.Tablectl == "" && (len(o.Only) == 0 || slices.Contains(o.Only, "footprint")) {
		exe, cleanup, err := findTablectl(ctx, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		o.Tablectl = exe
	}
	rep, err := bench.Run(ctx, o)
	if rep != nil {
		var perr error
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			perr = enc.Encode(rep)
		} else {
			perr = bench.WriteTable(stdout, rep)
		}
		if err == nil {
			err = perr
		}
	}
	return err
}

// findTablectl finds the tablectl binary the footprint runs: beside this
// binary (go build -o bin/ ./cmd/...), on PATH, or, run from a checkout, one
// built now into a temporary folder that cleanup removes.
func findTablectl(ctx context.Context, progress io.Writer) (path string, cleanup func(), err error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "tablectl")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, func() {}, nil
		}
	}
	if p, err := exec.LookPath("tablectl"); err == nil {
		return p, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "tablectl-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	out := filepath.Join(tmp, "tablectl")
	fmt.Fprintf(progress, "bench: building tablectl into %s for the footprint\n", tmp)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/tablectl/tablectl/cmd/tablectl")
	if b, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("no tablectl binary beside this one or on PATH, and building one failed (give --tablectl): %w\n%s", err, b)
	}
	return out, cleanup, nil
}
