package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/smallfile"
)

func init() {
	register(command{
		Name:  "odds",
		Short: "exact odds of the next coup from a shoe, fresh or partly dealt",
		Run:   runOdds,
	})
}

// oddsJSON is the --json output. Its shape is a published interface: keep
// it stable.
type oddsJSON struct {
	Decks          int                      `json:"decks"`
	CardsRemaining int                      `json:"cards_remaining"`
	Total          uint64                   `json:"total"`
	Outcomes       oddsOutcomesJSON         `json:"outcomes"`
	Bets           map[coup.Bet]oddsBetJSON `json:"bets"`
}

type oddsOutcomesJSON struct {
	Banker uint64 `json:"banker"`
	Player uint64 `json:"player"`
	Tie    uint64 `json:"tie"`
}

type oddsBetJSON struct {
	PWin float64 `json:"p_win"`
	// EV is absent for a spot whose pay table is not configured.
	EV *float64 `json:"ev,omitempty"`
}

func runOdds(args []string, stdout io.Writer) error {
	fs := newFlagSet("odds")
	decks := fs.Int("decks", 0, "`N` decks in the shoe, 6 or 8 (default the profile's)")
	profile := fs.String("profile", coup.ProfileClassic, "rule `PROFILE`: "+strings.Join(coup.ProfileNames(), ", "))
	dealt := fs.String("dealt", "", "`CARDS` already out of the shoe, comma-separated (e.g. KH,9S,TD)")
	profileFile := fs.String("profile-file", "", "a profile config `FILE` (JSON: a built-in profile and overrides, e.g. the winning-number pay table); replaces --profile")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}

	p, err := loadProfile(*profile, *profileFile)
	if err != nil {
		return err
	}
	n := *decks
	if n == 0 {
		n = p.Decks
	}
	shoe, err := coup.NewShoe(n)
	if err != nil {
		return fmt.Errorf("--decks: %w", err)
	}
	cards, err := coup.ParseCards(*dealt)
	if err != nil {
		return fmt.Errorf("--dealt: %w", err)
	}
	if err := shoe.RemoveAll(cards); err != nil {
		return fmt.Errorf("--dealt: %w", err)
	}
	a, err := coup.Analyze(&shoe, &p)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeOddsJSON(stdout, a)
	}
	return writeOddsText(stdout, a, p.Name, len(cards))
}

func writeOddsJSON(w io.Writer, a coup.Analysis) error {
	out := oddsJSON{
		Decks:          a.Decks,
		CardsRemaining: a.CardsRemaining,
		Total:          a.Total,
		Outcomes:       oddsOutcomesJSON{Banker: a.Banker, Player: a.Player, Tie: a.Tie},
		Bets:           make(map[coup.Bet]oddsBetJSON, len(a.Bets)),
	}
	for _, o := range a.Bets {
		b := oddsBetJSON{PWin: o.PWin}
		if o.Priced {
			ev := o.EV
			b.EV = &ev
		}
		out.Bets[o.Bet] = b
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeOddsText(w io.Writer, a coup.Analysis, profile string, dealt int) error {
	total := float64(a.Total)
	width := len("result") // names read left-aligned, numbers right-aligned
	for _, o := range a.Bets {
		width = max(width, len(o.Bet))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Next coup: profile %s, %d decks, %d cards left (%d dealt).\n", profile, a.Decks, a.CardsRemaining, dealt)
	fmt.Fprintf(&b, "Counts are ordered draws of six cards: %d in all.\n\n", a.Total)

	fmt.Fprintf(&b, "%-*s  %20s  %11s\n", width, "result", "ways", "probability")
	for _, r := range []struct {
		name string
		n    uint64
	}{{"banker", a.Banker}, {"player", a.Player}, {"tie", a.Tie}} {
		fmt.Fprintf(&b, "%-*s  %20d  %11.6f\n", width, r.name, r.n, float64(r.n)/total)
	}

	fmt.Fprintf(&b, "\n%-*s  %8s  %8s  %11s  %10s\n", width, "bet", "p_win", "p_push", "ev per unit", "house edge")
	var unpriced bool
	for _, o := range a.Bets {
		if !o.Priced {
			unpriced = true
			fmt.Fprintf(&b, "%-*s  %8.6f  %8.6f  %11s  %10s\n", width, o.Bet, o.PWin, o.PPush, "-", "-")
			continue
		}
		fmt.Fprintf(&b, "%-*s  %8.6f  %8.6f  %+11.6f  %9.4f%%\n", width, o.Bet, o.PWin, o.PPush, o.EV, 100*o.HouseEdge())
	}
	if unpriced {
		b.WriteString("\n-: no pay table configured for this spot, so no expected value.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// loadProfile is the built-in profile name, or the profile config file when
// one is given.
func loadProfile(name, file string) (coup.Profile, error) {
	if file == "" {
		p, err := coup.BuiltinProfile(name)
		if err != nil {
			return coup.Profile{}, fmt.Errorf("--profile: %w", err)
		}
		return p, nil
	}
	data, err := smallfile.Read(file, coup.MaxProfileConfig)
	if err != nil {
		return coup.Profile{}, fmt.Errorf("--profile-file: %w", err)
	}
	p, err := coup.ParseProfile(data)
	if err != nil {
		return coup.Profile{}, fmt.Errorf("--profile-file %s: %w", file, err)
	}
	return p, nil
}
