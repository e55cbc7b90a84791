package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateOdds = flag.Bool("update-odds", false, "rewrite cmd/tablectl/testdata/odds golden files")

// runOddsCmd runs "tablectl odds args..." as main would.
func runOddsCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"odds"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestOddsGolden pins the output for a fresh 8-deck vip shoe and for shoes
// with cards dealt. The goldens were generated once and checked by eye
// against the published figures; the fresh shoe's counts are also checked
// against them below, independently of the golden.
func TestOddsGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"vip-8-fresh.json", []string{"--profile", "vip", "--json"}},
		{"vip-8-dealt.json", []string{"--profile", "vip", "--decks", "8", "--dealt", "KH,9S,TD,9s,2c,AH,5D,5D", "--json"}},
		{"no-commission-6-dealt.json", []string{"--profile", "no-commission", "--dealt", "8S, 8S ,6H", "--json"}},
		{"classic-6-fresh.txt", []string{}},
		{"no-commission-8-dealt.txt", []string{"--profile", "no-commission", "--decks", "8", "--dealt", "QH,3C"}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			code, got, stderr := runOddsCmd(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			path := filepath.Join("testdata", "odds", tc.golden)
			if *updateOdds {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-odds to create)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// TestOddsJSONPublished checks the JSON of a fresh 8-deck vip shoe against
// the published exact counts (Wizard of Odds, "Baccarat": 8 decks, ordered
// draws of six cards) and house edges, and its exact shape.
func TestOddsJSONPublished(t *testing.T) {
	code, out, stderr := runOddsCmd(t, "--profile", "vip", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got struct {
		Decks          int    `json:"decks"`
		CardsRemaining int    `json:"cards_remaining"`
		Total          uint64 `json:"total"`
		Outcomes       struct {
			Banker, Player, Tie uint64
		} `json:"outcomes"`
		Bets map[string]map[string]float64 `json:"bets"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if got.Decks != 8 || got.CardsRemaining != 416 || got.Total != 4_998_398_275_503_360 {
		t.Errorf("decks %d, cards %d, total %d; want 8, 416, 4998398275503360", got.Decks, got.CardsRemaining, got.Total)
	}
	if o := got.Outcomes; o.Banker != 2_292_252_566_437_888 || o.Player != 2_230_518_282_592_256 || o.Tie != 475_627_426_473_216 {
		t.Errorf("outcomes %+v, published banker 2292252566437888 player 2230518282592256 tie 475627426473216", o)
	}
	// Published house edges (Banker, Player, Tie; Dragon Bonus; pairs) to
	// their published places.
	edges := map[string]float64{
		"banker": 0.010579, "player": 0.012351, "tie": 0.143596,
		"player_bonus": 0.026517, "banker_bonus": 0.093731,
	}
	wantBets := []string{"any_pair", "banker", "banker_bonus", "banker_pair", "perfect_pair", "player", "player_bonus", "player_pair", "tie"}
	var bets []string
	for name, fields := range got.Bets {
		bets = append(bets, name)
		var keys []string
		for k := range fields {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"ev", "p_win"}) {
			t.Errorf("bet %s has fields %v, want ev and p_win", name, keys)
		}
		if e, ok := edges[name]; ok && (fields["ev"] > -e+0.5e-6 || fields["ev"] < -e-0.5e-6) {
			t.Errorf("%s: ev %v, published house edge %v", name, fields["ev"], e)
		}
	}
	slices.Sort(bets)
	if !slices.Equal(bets, wantBets) {
		t.Errorf("bets %v, want %v", bets, wantBets)
	}
}

// TestOddsDefaults: --decks defaults to the profile's, and a winning number
// with no pay table has p_win and no ev.
func TestOddsDefaults(t *testing.T) {
	code, out, stderr := runOddsCmd(t, "--profile", "no-commission", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got struct {
		Decks          int                            `json:"decks"`
		CardsRemaining int                            `json:"cards_remaining"`
		Bets           map[string]map[string]*float64 `json:"bets"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Decks != 6 || got.CardsRemaining != 312 {
		t.Errorf("decks %d, %d cards; want the profile's 6 decks, 312 cards", got.Decks, got.CardsRemaining)
	}
	wn := got.Bets["winning_number_9"]
	if wn == nil || wn["p_win"] == nil || *wn["p_win"] <= 0 {
		t.Errorf("winning_number_9 = %v, want a p_win", wn)
	}
	if _, ok := wn["ev"]; ok {
		t.Errorf("winning_number_9 has an ev with no pay table: %v", wn)
	}
	if b := got.Bets["banker"]; b == nil || b["ev"] == nil {
		t.Errorf("banker = %v, want an ev", b)
	}
}

func TestOddsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"bad notation", []string{"--dealt", "KH,ZZ"}, `--dealt: card 2: bad card notation: "ZZ"`},
		{"ten as 10", []string{"--dealt", "10H"}, "--dealt: card 1: bad card notation"},
		{"empty card", []string{"--dealt", "KH,,9S"}, "--dealt: card 2: bad card notation"},
		{"not in shoe", []string{"--decks", "6", "--dealt", "KH,KH,KH,KH,KH,KH,KH"}, "--dealt: card 7: card not in shoe: KH"},
		{"not in 8 decks", []string{"--profile", "vip", "--dealt", "2C,2C,2C,2C,2C,2C,2C,2C,2C"}, "--dealt: card 9: card not in shoe"},
		{"decks", []string{"--decks", "7"}, "--decks: unsupported number of decks: 7"},
		{"profile", []string{"--profile", "baccarat-royale"}, `--profile: unknown rule profile "baccarat-royale"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runOddsCmd(t, tc.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if out != "" {
				t.Errorf("stdout %q on error", out)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q, want it to say %q", stderr, tc.want)
			}
		})
	}
}

// TestOddsShortShoe: a dealt list that leaves fewer than six cards is an
// error, not a panic.
func TestOddsShortShoe(t *testing.T) {
	var all []string
	for _, r := range "A23456789TJQK" {
		for _, s := range "SHDC" {
			for range 6 {
				all = append(all, string(r)+string(s))
			}
		}
	}
	dealt := strings.Join(all[:len(all)-5], ",")
	code, _, stderr := runOddsCmd(t, "--decks", "6", "--dealt", dealt)
	if code != 1 || !strings.Contains(stderr, "too few cards left") {
		t.Errorf("exit %d, stderr %q; want 1 and too few cards", code, stderr)
	}
}

func TestOddsProfileFile(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"odds", "--profile-file", "../../coup/testdata/profiles/nc-winning-number.json", "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Bets map[string]struct {
			PWin float64  `json:"p_win"`
			EV   *float64 `json:"ev"`
		} `json:"bets"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// With the pay table configured, the winning number is priced.
	if b, ok := got.Bets["winning_number_8"]; !ok || b.EV == nil {
		t.Fatalf("winning_number_8 not priced: %+v", got.Bets)
	}
	for _, bad := range []string{"testdata/nonexistent.json", "../../coup/testdata/profiles/vip.golden.json"} {
		out.Reset()
		errb.Reset()
		if code := run([]string{"odds", "--profile-file", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--profile-file") {
			t.Errorf("%s: exit %d, %q", bad, code, errb.String())
		}
	}
}
