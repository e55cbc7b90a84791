package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

func init() {
	register(command{Name: "shoe-sim", Short: "simulate a dealing shoe on a pseudo-terminal or a serial port", Run: runShoeSim})
}

// faultFlags collects repeated --fault flags.
type faultFlags []shoesim.Fault

func (f *faultFlags) String() string {
	specs := make([]string, len(*f))
	for i, x := range *f {
		specs[i] = x.String()
	}
	return strings.Join(specs, " ")
}

func (f *faultFlags) Set(s string) error {
	x, err := shoesim.ParseFault(s)
	if err != nil {
		return err
	}
	*f = append(*f, x)
	return nil
}

func runShoeSim(args []string, stdout io.Writer) error {
	fs := newFlagSet("shoe-sim")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: tablectl shoe-sim [flags]

Behaves like a dealing shoe: shuffles a shoe from a seed and deals it as a
dealer following the tableau would, pressing the dealer's buttons, over a
new pseudo-terminal (or --port). The first line on stdout is the device to
point the controller at (the pseudo-terminal, or --port); logs go to stderr.
It idles with heartbeats once the shoe is dealt, until interrupted. v1
heartbeats carry the number of the last sentence sent, not a new one.

flags:
`)
		printFlags(fs.Output(), fs)
	}
	protocol := fs.String("protocol", shoesim.ProtocolV1, "shoe `PROTOCOL`: v1 or beetek")
	decks := fs.Int("decks", shoesim.DefaultDecks, "`N` decks in the shoe: 6 or 8")
	seed := fs.Uint64("seed", 1, "shuffle `SEED`: the same seed deals the same shoe; shoe n of a run uses seed+n-1")
	pace := fs.Duration("pace", shoesim.DefaultCardPace, "`WAIT` before each card and button (0: full speed)")
	coupPace := fs.Duration("coup-pace", 0, "betting `TIME` before each coup (default 5 x --pace)")
	coups := fs.Int("coups", 0, "stop after `N` coups in all (0: deal every shoe to its cut card)")
	shoes := fs.Int("shoes", 1, "`N` shoes to deal, one after another: each starts with NEWSHOE and its burn, after the betting time")
	cut := fs.Int("cut", shoesim.DefaultCut, "`N` cards behind the cut card")
	afterCut := fs.String("after-cut", shoesim.CutOneMore.String(), "`RULE` after the cut card: one-more (finish the coup and deal one more) or finish (the coup only)")
	heartbeat := fs.Duration("heartbeat", shoesim.DefaultHeartbeat, "v1: the longest `WAIT` on an idle line before a heartbeat")
	id := fs.String("id", "", "shoe `ID` announced in HELO (default SIM-<seed>)")
	link := fs.String("link", "", "keep a symlink at `PATH` to the pseudo-terminal, repointed on replug, as /dev/serial/by-id is")
	port := fs.String("port", "", "write to the serial port at `PATH` instead of a pseudo-terminal")
	baud := fs.Int("baud", 0, "`BAUD` rate with --port (default 115200 for v1, 9600 for beetek)")
	exit := fs.Bool("exit", false, "exit once the plan is dealt instead of idling (unread bytes go with the pseudo-terminal)")
	var faults faultFlags
	fs.Var(&faults, "fault", strings.Replace(shoesim.FaultSpecHelp, "SPEC", "`SPEC`", 1))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rule, err := shoesim.ParseCutRule(*afterCut)
	if err != nil {
		return err
	}
	coupPaceSet := false
	fs.Visit(func(f *flag.Flag) { coupPaceSet = coupPaceSet || f.Name == "coup-pace" })
	if !coupPaceSet {
		*coupPace = 5 * *pace
	}
	if *port != "" && *link != "" {
		return errors.New("--link is for the pseudo-terminal; with --port, the port's own path is stable")
	}
	opts := shoesim.Options{
		Protocol: *protocol, Decks: *decks, Seed: *seed, Shoes: *shoes, Coups: *coups,
		Cut: *cut, AfterCut: rule, CardPace: *pace, CoupPace: *coupPace, Heartbeat: *heartbeat,
		ShoeID: *id, Faults: faults,
	}
	// Check the options before making a device for them.
	if _, err := shoesim.NewPlan(opts); err != nil {
		return err
	}

	var line shoesim.Line
	var path string
	if *port != "" {
		b := *baud
		if b == 0 {
			b = shoesim.DefaultBaud[*protocol]
		}
		p, err := shoesim.OpenPort(*port, b)
		if err != nil {
			return err
		}
		defer p.Close()
		line, path = p, p.Path()
	} else {
		p, err := shoesim.OpenPTY(*link)
		if err != nil {
			return err
		}
		defer p.Close()
		line, path = p, p.Path()
	}
	sim, err := shoesim.New(opts, line, clock.Real, slog.Default())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, path)
	slog.Info("shoe simulator ready", "device", path, "link", *link, "protocol", *protocol,
		"decks", *decks, "seed", *seed, "faults", faults.String())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := sim.Run(ctx, !*exit); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
