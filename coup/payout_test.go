package coup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// deal scores a coup written in shoe order ("9S,KH,8D,7C": Player, Banker,
// Player, Banker, then any third cards).
func deal(t testing.TB, cards string) Result {
	t.Helper()
	cs, err := ParseCards(cards)
	if err != nil {
		t.Fatalf("cards %s: %v", cards, err)
	}
	r, err := Score(cs)
	if err != nil {
		t.Fatalf("cards %s: %v", cards, err)
	}
	return r
}

// testProfile returns a built-in profile by name, or the profile a config
// under testdata/profiles makes ("file:nc-winning-number.json").
func testProfile(t testing.TB, name string) Profile {
	t.Helper()
	if file, ok := strings.CutPrefix(name, "file:"); ok {
		data, err := os.ReadFile(filepath.Join("testdata", "profiles", file))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseProfile(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return p
	}
	p, err := BuiltinProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spot is what one bet spot should do, and what a stake of 1000 on it pays
// back (stake plus winnings; the stake on a push; 0 on a loss).
type spot struct {
	kind   OutcomeKind
	pays   Ratio
	payout int64
}

func won(num, den, payout int64) spot { return spot{kind: Win, pays: R(num, den), payout: payout} }

var (
	lost   = spot{kind: Lose}
	pushed = spot{kind: Push, payout: 1000}
)

// ncHouse is the no-commission profile with the winning-number table of
// testdata/profiles/nc-winning-number.json: point n pays (12-n):1.
const ncHouse = "file:nc-winning-number.json"

// lostNumbers is every winning-number spot losing, with the exceptions given.
func lostNumbers(m map[Bet]spot, except map[Bet]spot) map[Bet]spot {
	for n := 1; n <= 9; n++ {
		m[WinningNumberBet(n)] = lost
	}
	for b, s := range except {
		m[b] = s
	}
	return m
}

// TestPayouts checks every spot of every profile over hand-built coups: the
// outcome and ratio, and the payout of 1000 staked on each spot at once, all
// written by hand from the seeds' pay tables.
func TestPayouts(t *testing.T) {
	wn := WinningNumberBet
	tests := []struct {
		name    string
		profile string
		cards   string
		want    map[Bet]spot
	}{
		// classic: seeds 000, 002, 004.
		{"classic/player natural 9-0", "classic", "4S,KH,5D,QC",
			map[Bet]spot{BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost}},
		{"classic/banker natural 9-7 pays less 5%", "classic", "3S,4H,4D,5C",
			map[Bet]spot{BetPlayer: lost, BetBanker: won(19, 20, 1950), BetTie: lost}},
		{"classic/banker wins on six, still less 5%", "classic", "2S,4H,3D,2C,9H",
			map[Bet]spot{BetPlayer: lost, BetBanker: won(19, 20, 1950), BetTie: lost}},
		{"classic/tie 7-7 pushes main bets", "classic", "9S,KH,8D,7C",
			map[Bet]spot{BetPlayer: pushed, BetBanker: pushed, BetTie: won(8, 1, 9000)}},
		{"classic/natural tie 9-9", "classic", "4S,5H,5D,4C",
			map[Bet]spot{BetPlayer: pushed, BetBanker: pushed, BetTie: won(8, 1, 9000)}},

		// no-commission: seed 001, winning numbers configured.
		{"no-commission/banker wins on a two-card six: 1:2", ncHouse, "2S,4H,3D,2C,9H",
			lostNumbers(map[Bet]spot{BetPlayer: lost, BetBanker: won(1, 2, 1500), BetTie: lost},
				map[Bet]spot{wn(6): won(6, 1, 7000)})},
		{"no-commission/banker wins on a three-card six: 1:2", ncHouse, "AS,KH,2D,3C,2S,3D",
			lostNumbers(map[Bet]spot{BetPlayer: lost, BetBanker: won(1, 2, 1500), BetTie: lost},
				map[Bet]spot{wn(6): won(6, 1, 7000)})},
		{"no-commission/banker natural 9 pays 1:1", ncHouse, "3S,4H,4D,5C",
			lostNumbers(map[Bet]spot{BetPlayer: lost, BetBanker: won(1, 1, 2000), BetTie: lost},
				map[Bet]spot{wn(9): won(3, 1, 4000)})},
		{"no-commission/banker natural 8", ncHouse, "3S,4H,3D,4C",
			lostNumbers(map[Bet]spot{BetPlayer: lost, BetBanker: won(1, 1, 2000), BetTie: lost},
				map[Bet]spot{wn(8): won(4, 1, 5000)})},
		{"no-commission/banker 5-4: loser's point loses", ncHouse, "5S,2H,5S,3C,4D,KD",
			lostNumbers(map[Bet]spot{BetPlayer: lost, BetBanker: won(1, 1, 2000), BetTie: lost},
				map[Bet]spot{wn(5): won(7, 1, 8000)})},
		{"no-commission/player natural 9", ncHouse, "4S,KH,5D,QC",
			lostNumbers(map[Bet]spot{BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost},
				map[Bet]spot{wn(9): won(3, 1, 4000)})},
		{"no-commission/player 1-0", ncHouse, "AS,KH,TD,QC,TH,TC",
			lostNumbers(map[Bet]spot{BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost},
				map[Bet]spot{wn(1): won(11, 1, 12000)})},
		{"no-commission/player 7-2", ncHouse, "3S,KH,4D,QC,2H",
			lostNumbers(map[Bet]spot{BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost},
				map[Bet]spot{wn(7): won(5, 1, 6000)})},
		{"no-commission/tie 7-7 loses every number", ncHouse, "9S,KH,8D,7C",
			lostNumbers(map[Bet]spot{BetPlayer: pushed, BetBanker: pushed, BetTie: won(8, 1, 9000)}, nil)},
		{"no-commission/tie with tie push configured", "nc-tie-push", "9S,KH,8D,7C",
			map[Bet]spot{BetPlayer: pushed, BetBanker: pushed, BetTie: won(8, 1, 9000),
				wn(1): pushed, wn(2): pushed, wn(3): pushed, wn(4): pushed, wn(5): pushed,
				wn(6): pushed, wn(7): pushed, wn(8): pushed, wn(9): pushed}},
		{"no-commission/tie push config, player 7-2", "nc-tie-push", "3S,KH,4D,QC,2H",
			lostNumbers(map[Bet]spot{BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost},
				map[Bet]spot{wn(7): won(5, 1, 6000)})},

		// vip: seed 003.
		{"vip/both perfect pairs, player 9-0 by 9", "vip", "AS,TS,AS,TS,7H,TD", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: won(11, 1, 12000), BetBankerPair: won(11, 1, 12000), BetAnyPair: won(5, 1, 6000),
			BetPerfectPair: won(200, 1, 201000), BetPlayerBonus: won(30, 1, 31000), BetBankerBonus: lost}},
		{"vip/player perfect pair, banker 5-4", "vip", "5S,2H,5S,3C,4D,KD", map[Bet]spot{
			BetPlayer: lost, BetBanker: won(19, 20, 1950), BetTie: lost,
			BetPlayerPair: won(11, 1, 12000), BetBankerPair: lost, BetAnyPair: won(5, 1, 6000),
			BetPerfectPair: won(25, 1, 26000), BetPlayerBonus: lost, BetBankerBonus: lost}},
		{"vip/banker pair of queens, not perfect; player 8-1 by 7", "vip", "2S,QH,3D,QD,3H,AS", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: won(11, 1, 12000), BetAnyPair: won(5, 1, 6000),
			BetPerfectPair: lost, BetPlayerBonus: won(6, 1, 7000), BetBankerBonus: lost}},
		{"vip/player pair of eights, banker natural 9-6", "vip", "8S,KH,8H,9C", map[Bet]spot{
			BetPlayer: lost, BetBanker: won(19, 20, 1950), BetTie: lost,
			BetPlayerPair: won(11, 1, 12000), BetBankerPair: lost, BetAnyPair: won(5, 1, 6000),
			BetPerfectPair: lost, BetPlayerBonus: lost, BetBankerBonus: won(1, 1, 2000)}},
		{"vip/player 7-3 by 4", "vip", "3S,2H,4D,KC,AH", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(1, 1, 2000), BetBankerBonus: lost}},
		{"vip/player 7-2 by 5", "vip", "3S,KH,4D,QC,2H", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(2, 1, 3000), BetBankerBonus: lost}},
		{"vip/player 7-1 by 6", "vip", "3S,KH,4D,QC,AH", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(4, 1, 5000), BetBankerBonus: lost}},
		{"vip/player 7-0 by 7", "vip", "3S,KH,4D,QC,TH", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(6, 1, 7000), BetBankerBonus: lost}},
		{"vip/player three-card 8-0 by 8", "vip", "AS,KH,2D,QC,5H,TC", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(10, 1, 11000), BetBankerBonus: lost}},
		{"vip/player three-card 9-0 by 9", "vip", "AS,KH,2D,QC,6H,TC", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(30, 1, 31000), BetBankerBonus: lost}},
		{"vip/player 7-4 by 3: bonus loses", "vip", "3S,KH,4D,QC,4H", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: lost, BetBankerBonus: lost}},
		{"vip/banker three-card 9-3 by 6", "vip", "AS,2H,2D,AC,KH,6C", map[Bet]spot{
			BetPlayer: lost, BetBanker: won(19, 20, 1950), BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: lost, BetBankerBonus: won(4, 1, 5000)}},
		{"vip/banker wins on six: no six rule", "vip", "2S,4H,3D,2C,9H", map[Bet]spot{
			BetPlayer: lost, BetBanker: won(19, 20, 1950), BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: lost, BetBankerBonus: lost}},
		{"vip/player natural 9-0: natural pays 1:1, not 30:1", "vip", "4S,KH,5D,QC", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(1, 1, 2000), BetBankerBonus: lost}},
		{"vip/player natural 9-7 by 2", "vip", "4S,3H,5D,4C", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: won(1, 1, 2000), BetBankerBonus: lost}},
		{"vip/banker natural 9-7 by 2", "vip", "3S,4H,4D,5C", map[Bet]spot{
			BetPlayer: lost, BetBanker: won(19, 20, 1950), BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: lost, BetBankerBonus: won(1, 1, 2000)}},
		{"vip/natural tie 9-9 returns the bonuses", "vip", "4S,5H,5D,4C", map[Bet]spot{
			BetPlayer: pushed, BetBanker: pushed, BetTie: won(8, 1, 9000),
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: pushed, BetBankerBonus: pushed}},
		{"vip/tie 7-7 without naturals loses the bonuses", "vip", "9S,KH,8D,7C", map[Bet]spot{
			BetPlayer: pushed, BetBanker: pushed, BetTie: won(8, 1, 9000),
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPerfectPair: lost, BetPlayerBonus: lost, BetBankerBonus: lost}},

		// Overridden profiles from testdata/profiles.
		{"vip-6d/by 4 no longer pays", "file:vip-six-decks.json", "3S,2H,4D,KC,AH", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPlayerBonus: lost, BetBankerBonus: lost}},
		{"vip-6d/by 9 pays 25:1", "file:vip-six-decks.json", "AS,KH,2D,QC,6H,TC", map[Bet]spot{
			BetPlayer: won(1, 1, 2000), BetBanker: lost, BetTie: lost,
			BetPlayerPair: lost, BetBankerPair: lost, BetAnyPair: lost,
			BetPlayerBonus: won(25, 1, 26000), BetBankerBonus: lost}},
		{"classic-8d/banker on six pays 1:2", "file:classic-eight-decks.json", "2S,4H,3D,2C,9H",
			map[Bet]spot{BetPlayer: lost, BetBanker: won(1, 2, 1500), BetTie: lost}},
		{"classic-8d/tie pays 9:1", "file:classic-eight-decks.json", "9S,KH,8D,7C",
			map[Bet]spot{BetPlayer: pushed, BetBanker: pushed, BetTie: won(9, 1, 10000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Profile
			if tt.profile == "nc-tie-push" {
				p = testProfile(t, ncHouse)
				p.Pays.WinningNumberTiePush = true
			} else {
				p = testProfile(t, tt.profile)
			}
			r := deal(t, tt.cards)
			stakes := Stakes{}
			var wantPayout int64
			for _, b := range p.Bets {
				w, ok := tt.want[b]
				if !ok {
					t.Fatalf("test gives no expectation for %s, which %s offers", b, p.Name)
				}
				got, err := p.Outcome(b, r)
				if err != nil {
					t.Fatal(err)
				}
				if got.Kind != w.kind || got.Pays != w.pays {
					t.Errorf("%s: outcome %v %v, want %v %v", b, got.Kind, got.Pays, w.kind, w.pays)
				}
				stakes[b] = 1000
				wantPayout += w.payout
			}
			if len(tt.want) != len(p.Bets) {
				t.Errorf("test expects %d spots, %s offers %d", len(tt.want), p.Name, len(p.Bets))
			}
			s, err := p.Settle(stakes, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Lines) != len(p.Bets) {
				t.Fatalf("%d lines, want %d", len(s.Lines), len(p.Bets))
			}
			for i, l := range s.Lines {
				if l.Bet != p.Bets[i] {
					t.Errorf("line %d is %s, want %s (layout order)", i, l.Bet, p.Bets[i])
				}
				w := tt.want[l.Bet]
				if l.Kind != w.kind || l.Pays != w.pays || l.Payout != w.payout || l.Stake != 1000 {
					t.Errorf("%s: settled %v at %v paying %d, want %v at %v paying %d", l.Bet, l.Kind, l.Pays, l.Payout, w.kind, w.pays, w.payout)
				}
			}
			if s.Payout != wantPayout || s.Staked != int64(1000*len(p.Bets)) || s.Capped {
				t.Errorf("totals: payout %d staked %d capped %v, want %d, %d, false", s.Payout, s.Staked, s.Capped, wantPayout, 1000*len(p.Bets))
			}
		})
	}
}

// TestPayoutCoupsAreAsNamed guards the hand-built coups above: the cards must
// give the points, naturals and pairs the test names claim.
func TestPayoutCoupsAreAsNamed(t *testing.T) {
	tests := []struct {
		cards          string
		winner         Side
		player, banker int
		naturals       [2]bool
		pairs, perfect [2]bool
		margin         int
	}{
		{"AS,TS,AS,TS,7H,TD", SidePlayer, 9, 0, [2]bool{}, [2]bool{true, true}, [2]bool{true, true}, 9},
		{"5S,2H,5S,3C,4D,KD", SideBanker, 4, 5, [2]bool{}, [2]bool{true, false}, [2]bool{true, false}, 1},
		{"2S,QH,3D,QD,3H,AS", SidePlayer, 8, 1, [2]bool{}, [2]bool{false, true}, [2]bool{}, 7},
		{"8S,KH,8H,9C", SideBanker, 6, 9, [2]bool{false, true}, [2]bool{true, false}, [2]bool{}, 3},
		{"3S,2H,4D,KC,AH", SidePlayer, 7, 3, [2]bool{}, [2]bool{}, [2]bool{}, 4},
		{"AS,KH,2D,QC,6H,TC", SidePlayer, 9, 0, [2]bool{}, [2]bool{}, [2]bool{}, 9},
		{"AS,2H,2D,AC,KH,6C", SideBanker, 3, 9, [2]bool{}, [2]bool{}, [2]bool{}, 6},
		{"AS,KH,2D,3C,2S,3D", SideBanker, 5, 6, [2]bool{}, [2]bool{}, [2]bool{}, 1},
		{"2S,4H,3D,2C,9H", SideBanker, 4, 6, [2]bool{}, [2]bool{}, [2]bool{}, 2},
		{"4S,KH,5D,QC", SidePlayer, 9, 0, [2]bool{true, false}, [2]bool{}, [2]bool{}, 9},
		{"4S,5H,5D,4C", SideTie, 9, 9, [2]bool{true, true}, [2]bool{}, [2]bool{}, 0},
		{"9S,KH,8D,7C", SideTie, 7, 7, [2]bool{}, [2]bool{}, [2]bool{}, 0},
		{"AS,KH,TD,QC,TH,TC", SidePlayer, 1, 0, [2]bool{}, [2]bool{}, [2]bool{}, 1},
	}
	for _, tt := range tests {
		r := deal(t, tt.cards)
		if r.Winner != tt.winner || r.PlayerPoint != tt.player || r.BankerPoint != tt.banker || r.Margin != tt.margin ||
			r.PlayerNatural != tt.naturals[0] || r.BankerNatural != tt.naturals[1] ||
			r.PlayerPair != tt.pairs[0] || r.BankerPair != tt.pairs[1] ||
			r.PlayerPerfectPair != tt.perfect[0] || r.BankerPerfectPair != tt.perfect[1] {
			t.Errorf("%s: got %+v", tt.cards, r)
		}
	}
}
