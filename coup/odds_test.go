package coup

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateOdds = flag.Bool("update-odds", false, "rewrite coup/testdata/odds golden files")

// bruteOdds is the analysis of a shoe found the slow, obvious way: every
// ordered draw of card identities, weighted by how many physical cards
// realise it, played through Next, Score and Profile.Outcome.
type bruteOdds struct {
	total, player, banker, tie uint64
	points                     [10][10]uint64
	win, push, lose            map[Bet]uint64
	wins                       map[Bet]map[Ratio]uint64
	ev                         map[Bet]*big.Rat // sum of weight x value
}

// unpricedWin is seed 001's winning number, straight from its definition:
// it wins when a side wins on point n.
func unpricedWin(n int, r Result) bool { return r.Winner != SideTie && r.WinningPoint() == n }

func bruteForce(t *testing.T, s *Shoe, p *Profile) bruteOdds {
	t.Helper()
	b := bruteOdds{
		win: map[Bet]uint64{}, push: map[Bet]uint64{}, lose: map[Bet]uint64{},
		wins: map[Bet]map[Ratio]uint64{}, ev: map[Bet]*big.Rat{},
	}
	for _, bet := range p.Bets {
		b.wins[bet] = map[Ratio]uint64{}
		b.ev[bet] = new(big.Rat)
	}
	counts := s.Counts()
	var dealt [6]Card
	var walk func(k int, w uint64, left uint64)
	walk = func(k int, w uint64, left uint64) {
		pos, err := Next(dealt[:k])
		if err != nil {
			t.Fatalf("Next(%v): %v", dealt[:k], err)
		}
		if pos != Complete {
			for i := range counts {
				if counts[i] == 0 {
					continue
				}
				c := uint64(counts[i])
				counts[i]--
				dealt[k] = CardAt(i)
				walk(k+1, w*c, left-1)
				counts[i]++
			}
			return
		}
		// The cards after the coup are drawn all the same: any of what
		// is left, in order.
		for j := k; j < CoupCards; j++ {
			w *= left
			left--
		}
		r, err := Score(dealt[:k])
		if err != nil {
			t.Fatalf("Score(%v): %v", dealt[:k], err)
		}
		b.total += w
		b.points[r.PlayerPoint][r.BankerPoint] += w
		switch r.Winner {
		case SidePlayer:
			b.player += w
		case SideBanker:
			b.banker += w
		case SideTie:
			b.tie += w
		}
		for _, bet := range p.Bets {
			if n, ok := bet.WinningNumber(); ok && p.Pays.WinningNumber[n].IsZero() {
				if unpricedWin(n, r) {
					b.win[bet] += w
				} else {
					b.lose[bet] += w
				}
				continue
			}
			o, err := p.Outcome(bet, r)
			if err != nil {
				t.Fatal(err)
			}
			wr := new(big.Rat).SetInt(new(big.Int).SetUint64(w))
			switch o.Kind {
			case Win:
				b.win[bet] += w
				b.wins[bet][o.Pays] += w
				b.ev[bet].Add(b.ev[bet], wr.Mul(wr, big.NewRat(o.Pays.Num, o.Pays.Den)))
			case Push:
				b.push[bet] += w
			case Lose:
				b.lose[bet] += w
				b.ev[bet].Sub(b.ev[bet], wr)
			default:
				t.Fatalf("%s: outcome %v", bet, o)
			}
		}
	}
	walk(0, 1, uint64(s.Remaining()))
	return b
}

// smallShoe is a shoe of decks decks from which everything but cards has
// been removed.
func smallShoe(t *testing.T, decks int, cards []Card) Shoe {
	t.Helper()
	s, err := NewShoe(decks)
	if err != nil {
		t.Fatal(err)
	}
	keep := map[Card]int{}
	for _, c := range cards {
		keep[c]++
	}
	for i := range CardCount {
		c := CardAt(i)
		for range decks - keep[c] {
			if err := s.Remove(c); err != nil {
				t.Fatalf("building shoe %v: %v", cards, err)
			}
		}
	}
	return s
}

// randomSmallCards draws a few card identities from a narrow pool, so that
// rank pairs, perfect pairs, zero-point ranks of different kinds and every
// branch of the tableau all turn up, and repeats each up to decks times.
func randomSmallCards(rng *rand.Rand, decks int) []Card {
	ranks := []Rank{Ace, Two, Three, Four, Five, Six, Seven, Eight, Nine, Ten, Jack, Queen, King}
	rng.Shuffle(len(ranks), func(i, j int) { ranks[i], ranks[j] = ranks[j], ranks[i] })
	ranks = ranks[:3+rng.IntN(3)]
	distinct := 3 + rng.IntN(4) // 3..6 identities
	var cards []Card
	seen := map[Card]bool{}
	for len(seen) < distinct {
		c := Card{Rank: ranks[rng.IntN(len(ranks))], Suit: Suit(rng.IntN(2))} // two suits: more perfect pairs
		if seen[c] {
			continue
		}
		seen[c] = true
		for range 1 + rng.IntN(min(decks, 3)) {
			cards = append(cards, c)
		}
	}
	for len(cards) < CoupCards { // at least a coup's worth
		cards = append(cards, cards[rng.IntN(len(cards))])
	}
	return cards
}

// oddsProfiles are the built-in profiles plus no-commission with its
// winning-number pay table configured (and ties returning it), so that
// priced winning numbers are covered too.
func oddsProfiles(t *testing.T) []Profile {
	t.Helper()
	var ps []Profile
	for _, name := range ProfileNames() {
		p, err := BuiltinProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	nc, err := BuiltinProfile(ProfileNoCommission)
	if err != nil {
		t.Fatal(err)
	}
	nc.Name = "no-commission-configured"
	for n := 1; n <= 9; n++ {
		nc.Pays.WinningNumber[n] = R(int64(20-2*n), int64(n%3+1))
	}
	nc.Pays.WinningNumberTiePush = true
	ps = append(ps, nc)
	return ps
}

func compareBrute(t *testing.T, a Analysis, b bruteOdds, p *Profile) {
	t.Helper()
	if a.Total != b.total || a.Player != b.player || a.Banker != b.banker || a.Tie != b.tie {
		t.Errorf("total/P/B/T = %d/%d/%d/%d, brute force %d/%d/%d/%d",
			a.Total, a.Player, a.Banker, a.Tie, b.total, b.player, b.banker, b.tie)
	}
	if a.Points != b.points {
		t.Errorf("points = %v, brute force %v", a.Points, b.points)
	}
	if len(a.Bets) != len(p.Bets) {
		t.Fatalf("%d bets analysed, profile offers %d", len(a.Bets), len(p.Bets))
	}
	for i, o := range a.Bets {
		bet := p.Bets[i]
		if o.Bet != bet {
			t.Errorf("bet %d is %s, profile has %s", i, o.Bet, bet)
			continue
		}
		if o.Win != b.win[bet] || o.Push != b.push[bet] || o.Lose != b.lose[bet] {
			t.Errorf("%s: win/push/lose = %d/%d/%d, brute force %d/%d/%d",
				bet, o.Win, o.Push, o.Lose, b.win[bet], b.push[bet], b.lose[bet])
		}
		if want := float64(b.win[bet]) / float64(b.total); !near(o.PWin, want, 1e-12) {
			t.Errorf("%s: p_win = %v, brute force %v", bet, o.PWin, want)
		}
		n, isWN := bet.WinningNumber()
		if unpriced := isWN && p.Pays.WinningNumber[n].IsZero(); unpriced {
			if o.Priced || o.EV != 0 || len(o.Wins) != 0 {
				t.Errorf("%s: unconfigured spot priced: %+v", bet, o)
			}
			continue
		}
		if !o.Priced {
			t.Errorf("%s: not priced", bet)
		}
		got := map[Ratio]uint64{}
		for i, w := range o.Wins {
			got[w.Pays] = w.Count
			if i > 0 && w.Pays.Float() >= o.Wins[i-1].Pays.Float() {
				t.Errorf("%s: wins not best paid first: %v", bet, o.Wins)
			}
		}
		if len(b.wins[bet]) == 0 {
			got = map[Ratio]uint64{} // nil and empty alike
		}
		if fmt.Sprint(got) != fmt.Sprint(b.wins[bet]) {
			t.Errorf("%s: wins by ratio = %v, brute force %v", bet, got, b.wins[bet])
		}
		ev, _ := new(big.Rat).Quo(b.ev[bet], new(big.Rat).SetInt(new(big.Int).SetUint64(b.total))).Float64()
		if !near(o.EV, ev, 1e-12) {
			t.Errorf("%s: ev = %v, brute force %v", bet, o.EV, ev)
		}
	}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestAnalyzeBruteForce checks the fast count against every ordered draw of
// many small random shoes, for every profile.
func TestAnalyzeBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 0xbacca7))
	shoes := 40
	if testing.Short() {
		shoes = 8
	}
	profiles := oddsProfiles(t)
	for i := range shoes {
		decks := 6 + 2*(i%2)
		cards := randomSmallCards(rng, decks)
		s := smallShoe(t, decks, cards)
		p := profiles[i%len(profiles)]
		t.Run(fmt.Sprintf("%s/%s", p.Name, FormatCards(cards)), func(t *testing.T) {
			a, err := Analyze(&s, &p)
			if err != nil {
				t.Fatal(err)
			}
			if a.CardsRemaining != len(cards) || a.Decks != decks {
				t.Errorf("cards remaining %d decks %d, want %d %d", a.CardsRemaining, a.Decks, len(cards), decks)
			}
			compareBrute(t, a, bruteForce(t, &s, &p), &p)
		})
	}
}

// TestAnalyzeBruteForceShapes covers shoes picked to stress one part of the
// count: one rank only (every card pairs), one identity (every pair is
// perfect), only zero-point cards of four ranks, exactly six cards.
func TestAnalyzeBruteForceShapes(t *testing.T) {
	cs := func(s string) []Card {
		c, err := ParseCards(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name  string
		decks int
		cards []Card
	}{
		{"one identity", 8, cs("7S,7S,7S,7S,7S,7S,7S,7S")},
		{"one rank", 6, cs("4S,4S,4S,4H,4H,4D,4C,4C")},
		{"zero points", 6, cs("TS,TS,JS,JH,QD,QD,KC,KC,KC")},
		{"six cards", 8, cs("9D,9D,KH,2C,2C,6S")},
		{"naturals", 6, cs("8S,8S,9H,9H,TS,TS,KC")},
		{"third cards", 8, cs("AS,AS,2H,3D,5C,5C,6S,7H,KD")},
	}
	for _, tc := range tests {
		s := smallShoe(t, tc.decks, tc.cards)
		for _, p := range oddsProfiles(t) {
			t.Run(tc.name+"/"+p.Name, func(t *testing.T) {
				a, err := Analyze(&s, &p)
				if err != nil {
					t.Fatal(err)
				}
				compareBrute(t, a, bruteForce(t, &s, &p), &p)
			})
		}
	}
}

// Published exact figures for a fresh shoe, counted the same way (ordered
// draws of six cards, 416!/410! for eight decks):
//
//   - Banker, Player and Tie counts with their house edges, 8 and 6 decks:
//     Wizard of Odds, "Baccarat" (the analysis as mirrored at
//     http://www.casinoexploit.com/baccarat.html, "Probabilities in 8deck
//     Baccarat" and "in 6deck Baccarat"); 8-deck edges to six places from
//     excelpunks.com, "Baccarat Vs. Non-Commission Baccarat – Why does a
//     Banker Win on 6 Pay Half?" (2018), which also gives the Banker edge
//     when a win on 6 pays half: 0.014581045.
//   - Winning side and total, 8 decks: Wizard of Odds, "Exact Winning Side
//     and Total in Baccarat".
//   - Player totals, 8 decks: Wizard of Odds, "Side Total Side Bets in
//     Baccarat".
//   - Dragon Bonus (seed 003's Player/Banker bonus pay table), 8 decks, and
//     its edges for 6 and 8 decks: Wizard of Odds, "Baccarat Side Bets"
//     (games/baccarat/appendix/5).
//   - Perfect pairs: Wizard of Odds, "Perfect Pairs (Version 1)" and
//     "(Version 2)"; counted there over the first four cards divided by
//     four, so multiplied here by 4 x (n-4)(n-5).
//   - Pairs at 11:1, 8 decks, 10.361%: E. Jacobson, "Computer perfect play
//     against the baccarat pairs bet" (888casino blog); Either Pair at 5:1,
//     13.71%, as tabulated from the Wizard of Odds.
type published struct {
	decks                      int
	total, banker, player, tie uint64
	// edge is each bet's published house edge, to its published places.
	edge                   map[Bet]publishedEdge
	noCommissionBankerEdge publishedEdge
	// WoO's perfect-pair counts over the first four cards.
	perfectOneOrBoth4, perfect4, perfectBoth4 uint64
}

// publishedEdge is a house edge as published, rounded to places decimals.
type publishedEdge struct {
	edge   float64
	places int
}

func (e publishedEdge) matches(got float64) bool {
	return near(got, e.edge, 0.5*math.Pow(10, -float64(e.places))+1e-15)
}

var publishedFresh = []published{
	{
		decks: 8, total: 4_998_398_275_503_360,
		banker: 2_292_252_566_437_888, player: 2_230_518_282_592_256, tie: 475_627_426_473_216,
		edge: map[Bet]publishedEdge{
			BetBanker: {0.010579, 6}, BetPlayer: {0.012351, 6}, BetTie: {0.143596, 6},
			BetPlayerBonus: {0.026517, 6}, BetBankerBonus: {0.093731, 6}, // Dragon Bonus tables
			BetPlayerPair: {0.10361, 5}, BetBankerPair: {0.10361, 5},
			BetAnyPair: {0.1371, 4},
		},
		noCommissionBankerEdge: publishedEdge{0.014581045, 9},
		perfectOneOrBoth4:      246_848_784, perfect4: 7_379_583_120, perfectBoth4: 2_101_008,
	},
	{
		decks: 6, total: 312 * 311 * 310 * 309 * 308 * 307,
		banker: 403_095_751_234_560, player: 392_220_492_728_832, tie: 83_552_962_932_288,
		edge: map[Bet]publishedEdge{
			BetBanker: {0.0106, 4}, BetPlayer: {0.0124, 4}, BetTie: {0.1444, 4},
			BetPlayerBonus: {0.0267, 4}, BetBankerBonus: {0.0939, 4},
		},
		perfectOneOrBoth4: 74_114_820, perfect4: 2_323_673_820,
	},
}

func TestAnalyzePublished(t *testing.T) {
	vip, err := BuiltinProfile(ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := BuiltinProfile(ProfileNoCommission)
	if err != nil {
		t.Fatal(err)
	}
	for _, pub := range publishedFresh {
		t.Run(fmt.Sprintf("%d decks", pub.decks), func(t *testing.T) {
			s, err := NewShoe(pub.decks)
			if err != nil {
				t.Fatal(err)
			}
			a, err := Analyze(&s, &vip)
			if err != nil {
				t.Fatal(err)
			}
			if a.Total != pub.total || a.Banker != pub.banker || a.Player != pub.player || a.Tie != pub.tie {
				t.Errorf("total/B/P/T = %d/%d/%d/%d, published %d/%d/%d/%d",
					a.Total, a.Banker, a.Player, a.Tie, pub.total, pub.banker, pub.player, pub.tie)
			}
			for bet, edge := range pub.edge {
				o := mustOdds(t, a, bet)
				if !edge.matches(o.HouseEdge()) {
					t.Errorf("%s: house edge %.7f, published %v", bet, o.HouseEdge(), edge.edge)
				}
			}
			// Perfect pair: WoO counts the first four cards over 4.
			scale := 4 * uint64(s.Remaining()-4) * uint64(s.Remaining()-5)
			if pub.perfect4*scale != a.Total {
				t.Fatalf("published perfect-pair total %d scales to %d, not %d", pub.perfect4, pub.perfect4*scale, a.Total)
			}
			pp := mustOdds(t, a, BetPerfectPair)
			if pp.Win != pub.perfectOneOrBoth4*scale {
				t.Errorf("perfect pair wins %d, published %d x %d", pp.Win, pub.perfectOneOrBoth4, scale)
			}
			if pub.perfectBoth4 != 0 {
				both := pub.perfectBoth4 * scale
				wantWins := []RatioCount{{R(200, 1), both}, {R(25, 1), pp.Win - both}}
				if !slices.Equal(pp.Wins, wantWins) {
					t.Errorf("perfect pair wins %v, published %v", pp.Wins, wantWins)
				}
				// Seed 003 pays 25:1 and 200:1 (version 2 of the bet pays
				// 250:1 for both); the edge follows from the published counts.
				ev := (200*float64(both) + 25*float64(pp.Win-both) - float64(a.Total-pp.Win)) / float64(a.Total)
				if !near(pp.EV, ev, 1e-12) {
					t.Errorf("perfect pair ev %v, from published counts %v", pp.EV, ev)
				}
			}
			if pub.noCommissionBankerEdge.edge != 0 {
				a, err := Analyze(&s, &nc)
				if err != nil {
					t.Fatal(err)
				}
				if o := mustOdds(t, a, BetBanker); !pub.noCommissionBankerEdge.matches(o.HouseEdge()) {
					t.Errorf("no-commission banker edge %.10f, published %v", o.HouseEdge(), pub.noCommissionBankerEdge.edge)
				}
			}
		})
	}
}

func mustOdds(t *testing.T, a Analysis, b Bet) BetOdds {
	t.Helper()
	o, ok := a.Odds(b)
	if !ok {
		t.Fatalf("no odds for %s", b)
	}
	return o
}

// TestAnalyzePublishedEightDeckDetail checks the finer published tables for
// a fresh 8-deck shoe: Dragon Bonus outcomes, the winning side and total
// (seed 001's winning number), and Player's final totals.
func TestAnalyzePublishedEightDeckDetail(t *testing.T) {
	s, err := NewShoe(8)
	if err != nil {
		t.Fatal(err)
	}
	vip, err := BuiltinProfile(ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(&s, &vip)
	if err != nil {
		t.Fatal(err)
	}
	// Dragon Bonus, 8 decks. Natural win and win by 4 both pay 1:1.
	dragon := []struct {
		bet                          Bet
		by9, by8, by7, by6, by5, by4 uint64
		natural, naturalTie          uint64
	}{
		{BetPlayerBonus, 18_409_431_764_992, 34_097_645_543_424, 89_590_261_473_280, 141_238_897_317_888,
			166_169_165_987_840, 186_780_352_174_080, 812_685_054_124_032, 89_325_908_267_520},
		{BetBankerBonus, 15_390_342_909_952, 28_305_092_784_128, 79_517_099_278_336, 119_200_072_366_080,
			157_275_882_332_160, 201_147_167_287_296, 812_685_054_124_032, 89_325_908_267_520},
	}
	for _, d := range dragon {
		o := mustOdds(t, a, d.bet)
		want := []RatioCount{{R(30, 1), d.by9}, {R(10, 1), d.by8}, {R(6, 1), d.by7}, {R(4, 1), d.by6},
			{R(2, 1), d.by5}, {R(1, 1), d.by4 + d.natural}}
		if !slices.Equal(o.Wins, want) {
			t.Errorf("%s wins %v, published %v", d.bet, o.Wins, want)
		}
		if o.Push != d.naturalTie {
			t.Errorf("%s pushes %d, published natural ties %d", d.bet, o.Push, d.naturalTie)
		}
	}

	// Winning side and total: [point] = {Player wins, Banker wins, ties}.
	sideTotal := [10][3]uint64{
		9: {613_074_020_540_416, 586_850_279_002_112, 55_146_054_060_032},
		8: {555_823_197_134_848, 529_914_458_673_152, 54_879_416_675_072},
		7: {408_043_979_470_848, 384_279_324_919_808, 101_717_538_899_968},
		6: {312_658_895_192_064, 269_232_304_455_680, 96_170_001_308_416},
		5: {122_838_277_197_824, 216_715_928_915_968, 39_684_046_743_808},
		4: {86_165_771_096_064, 163_359_790_133_248, 36_294_133_463_040},
		3: {62_946_423_310_336, 72_927_778_568_192, 22_250_510_129_408},
		2: {44_328_525_111_296, 44_681_581_871_104, 20_006_606_104_576},
		1: {24_639_193_538_560, 24_291_119_898_624, 20_499_217_668_352},
		0: {0, 0, 28_979_901_420_544},
	}
	for pt := range 10 {
		var pw, bw uint64
		for other := range pt {
			pw += a.Points[pt][other]
			bw += a.Points[other][pt]
		}
		got := [3]uint64{pw, bw, a.Points[pt][pt]}
		if got != sideTotal[pt] {
			t.Errorf("winning total %d: P/B/T %v, published %v", pt, got, sideTotal[pt])
		}
	}
	nc, err := BuiltinProfile(ProfileNoCommission)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := Analyze(&s, &nc)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 9; n++ {
		o := mustOdds(t, a2, WinningNumberBet(n))
		if want := sideTotal[n][0] + sideTotal[n][1]; o.Win != want || o.Priced {
			t.Errorf("winning number %d: %d wins (priced %v), published %d, unpriced", n, o.Win, o.Priced, want)
		}
	}

	// Player's final totals, 9 down to 0.
	playerTotal := [10]uint64{
		469_796_508_410_880, 372_517_055_559_936, 371_465_655_324_672, 372_517_215_488_256, 371_426_030_979_072,
		372_435_601_541_376, 665_920_136_276_736, 668_117_541_187_584, 665_982_456_134_400, 668_220_074_600_448,
	}
	for pt, want := range playerTotal {
		var got uint64
		for b := range 10 {
			got += a.Points[pt][b]
		}
		if got != want {
			t.Errorf("Player total %d: %d, published %d", pt, got, want)
		}
	}
}

// TestAnalyzeClosedForms checks, for depleted shoes too large for brute
// force, what follows from the composition alone: pair and perfect-pair
// counts by direct combinatorics over the 52 card identities, Player and
// Banker pairs alike by symmetry, and every count adding up.
func TestAnalyzeClosedForms(t *testing.T) {
	vip, err := BuiltinProfile(ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 31))
	for i := range 25 {
		decks := 6 + 2*(i%2)
		s, err := NewShoe(decks)
		if err != nil {
			t.Fatal(err)
		}
		// Deplete at random, sometimes all but a handful, sometimes
		// lopsided (one rank or one suit drained first).
		target := rng.IntN(s.Remaining() - CoupCards + 1)
		for s.Remaining() > CoupCards && s.Remaining() > decks*CardCount-target {
			c := CardAt(rng.IntN(CardCount))
			if i%5 == 0 && s.Count(Card{Rank: Nine, Suit: c.Suit}) > 0 {
				c.Rank = Nine
			}
			_ = s.Remove(c) // nothing left of c: try another
		}
		a, err := Analyze(&s, &vip)
		if err != nil {
			t.Fatal(err)
		}
		counts := s.Counts()
		n := uint64(s.Remaining())
		var rankK [14]uint64
		var perfectOne, perfectSame, rankSame uint64
		for id, k16 := range counts {
			k := uint64(k16)
			rankK[CardAt(id).Rank] += k
			if k >= 2 {
				perfectOne += k * (k - 1)
			}
			if k >= 4 {
				perfectSame += k * (k - 1) * (k - 2) * (k - 3)
			}
		}
		var pairOne uint64
		for _, k := range rankK {
			if k >= 2 {
				pairOne += k * (k - 1)
			}
			if k >= 4 {
				rankSame += k * (k - 1) * (k - 2) * (k - 3)
			}
		}
		// Both hands paired: two different identities (ranks) or one.
		var perfectBoth, pairBoth uint64
		for x, kx := range counts {
			for y, ky := range counts {
				if x != y && kx >= 2 && ky >= 2 {
					perfectBoth += uint64(kx) * uint64(kx-1) * uint64(ky) * uint64(ky-1)
				}
			}
		}
		perfectBoth += perfectSame
		for x, kx := range rankK {
			for y, ky := range rankK {
				if x != y && kx >= 2 && ky >= 2 {
					pairBoth += kx * (kx - 1) * ky * (ky - 1)
				}
			}
		}
		pairBoth += rankSame
		rest2 := (n - 2) * (n - 3) * (n - 4) * (n - 5)
		rest4 := (n - 4) * (n - 5)
		name := fmt.Sprintf("%d decks %d left", decks, n)
		check := func(what string, got, want uint64) {
			if got != want {
				t.Errorf("%s: %s = %d, want %d", name, what, got, want)
			}
		}
		check("total", a.Total, n*(n-1)*(n-2)*(n-3)*(n-4)*(n-5))
		check("player+banker+tie", a.Player+a.Banker+a.Tie, a.Total)
		check("player pair", mustOdds(t, a, BetPlayerPair).Win, pairOne*rest2)
		check("banker pair", mustOdds(t, a, BetBankerPair).Win, pairOne*rest2)
		check("any pair", mustOdds(t, a, BetAnyPair).Win, 2*pairOne*rest2-pairBoth*rest4)
		pp := mustOdds(t, a, BetPerfectPair)
		check("perfect pair", pp.Win, 2*perfectOne*rest2-perfectBoth*rest4)
		var both uint64
		for _, w := range pp.Wins {
			if w.Pays == vip.Pays.PerfectPairBoth {
				both = w.Count
			}
		}
		check("perfect pair both", both, perfectBoth*rest4)
		var pts, pw, bw, tw uint64
		for p := range 10 {
			for b := range 10 {
				w := a.Points[p][b]
				pts += w
				switch {
				case p > b:
					pw += w
				case b > p:
					bw += w
				default:
					tw += w
				}
			}
		}
		check("points", pts, a.Total)
		check("points player", pw, a.Player)
		check("points banker", bw, a.Banker)
		check("points tie", tw, a.Tie)
		for _, o := range a.Bets {
			check(string(o.Bet)+" win+push+lose", o.Win+o.Push+o.Lose, a.Total)
			var sum uint64
			for _, w := range o.Wins {
				sum += w.Count
			}
			check(string(o.Bet)+" wins by ratio", sum, o.Win)
		}
	}
}

func TestAnalyzeErrors(t *testing.T) {
	vip, err := BuiltinProfile(ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	five := smallShoe(t, 8, []Card{{Ace, Spades}, {Two, Spades}, {Three, Spades}, {Four, Spades}, {Five, Spades}})
	if _, err := Analyze(&five, &vip); !errors.Is(err, ErrShortShoe) {
		t.Errorf("5 cards left: err = %v, want ErrShortShoe", err)
	}
	var empty Shoe
	if _, err := Analyze(&empty, &vip); !errors.Is(err, ErrShortShoe) {
		t.Errorf("empty shoe: err = %v, want ErrShortShoe", err)
	}
	if _, err := Analyze(nil, &vip); err == nil {
		t.Error("nil shoe: no error")
	}
	s, err := NewShoe(8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Analyze(&s, nil); err == nil {
		t.Error("nil profile: no error")
	}
}

// TestDealtNotInShoe: a dealt list naming a card the shoe cannot hold is an
// error, and leaves the shoe as it was.
func TestDealtNotInShoe(t *testing.T) {
	tests := []struct {
		decks int
		dealt string
		want  error
	}{
		{6, "KH,KH,KH,KH,KH,KH,KH", ErrNotInShoe},          // seven of a card in six decks
		{8, strings.Repeat("2C,", 8) + "2C", ErrNotInShoe}, // nine in eight
		{8, "KH,ZZ", ErrBadCard},
		{8, "KH,,9S", ErrBadCard},
		{6, "10H", ErrBadCard},
	}
	for _, tc := range tests {
		t.Run(tc.dealt, func(t *testing.T) {
			s, err := NewShoe(tc.decks)
			if err != nil {
				t.Fatal(err)
			}
			cards, err := ParseCards(tc.dealt)
			if err == nil {
				err = s.RemoveAll(cards)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if s.Remaining() != tc.decks*CardCount {
				t.Errorf("%d cards left after a refused list, want %d", s.Remaining(), tc.decks*CardCount)
			}
		})
	}
}

// renderAnalysis writes an analysis as stable text for golden files.
func renderAnalysis(a Analysis) string {
	var b strings.Builder
	fmt.Fprintf(&b, "decks %d, %d cards left, %d ordered draws of six\n", a.Decks, a.CardsRemaining, a.Total)
	fmt.Fprintf(&b, "banker %d\nplayer %d\ntie %d\n", a.Banker, a.Player, a.Tie)
	b.WriteString("points (row Player, column Banker):\n")
	for p := range 10 {
		for bk := range 10 {
			if bk > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprint(&b, a.Points[p][bk])
		}
		b.WriteByte('\n')
	}
	for _, o := range a.Bets {
		fmt.Fprintf(&b, "%s: win %d push %d lose %d p_win %.12f", o.Bet, o.Win, o.Push, o.Lose, o.PWin)
		if o.Priced {
			fmt.Fprintf(&b, " ev %.12f", o.EV)
			for _, w := range o.Wins {
				fmt.Fprintf(&b, " %d:%d=%d", w.Pays.Num, w.Pays.Den, w.Count)
			}
		} else {
			b.WriteString(" unpriced")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestAnalyzeGolden pins whole analyses of a few shoes, fresh and partly
// dealt. The fresh ones agree with TestAnalyzePublished; the rest guard
// against unnoticed change.
func TestAnalyzeGolden(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		decks   int
		dealt   string
	}{
		{"classic-6-fresh", ProfileClassic, 6, ""},
		{"no-commission-6-fresh", ProfileNoCommission, 6, ""},
		{"vip-8-fresh", ProfileVIP, 8, ""},
		{"vip-8-dealt", ProfileVIP, 8, "5C,8S,KH,AD,9S,9S,TD,QC,2H,7D,7D,7D,3S,4H,6C,JH,8S,8D"},
		{"no-commission-6-late", ProfileNoCommission, 6,
			strings.Repeat("TS,JH,QD,KC,TH,JD,QC,KS,", 6) + strings.Repeat("9S,9H,8D,8C,", 5) + "AS,2H,3D,4C,5S,6H,7D"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := BuiltinProfile(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewShoe(tc.decks)
			if err != nil {
				t.Fatal(err)
			}
			cards, err := ParseCards(tc.dealt)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RemoveAll(cards); err != nil {
				t.Fatal(err)
			}
			a, err := Analyze(&s, &p)
			if err != nil {
				t.Fatal(err)
			}
			got := renderAnalysis(a)
			path := filepath.Join("testdata", "odds", tc.name+".golden")
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
				t.Errorf("analysis differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// FuzzParseCards: card notation and dealt lists come from outside (flags,
// supervisor commands). Parsing never panics, accepts only real cards, and
// what it accepts writes back to the same list in canonical form.
func FuzzParseCards(f *testing.F) {
	for _, s := range []string{"", "KH", "KH,9S,TD", "kh, 9s ,td", "AS,2H,3D,4C,5S,6H,7D,8C,9S,TS,JH,QD,KC",
		"10H", "KH,", ",KH", "K H", "KX", "\x00\xff", " \t ", "KH,,9S", "ÄS"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cards, err := ParseCards(s)
		if err != nil {
			if cards != nil {
				t.Errorf("ParseCards(%q) returned cards %v with error %v", s, cards, err)
			}
			return
		}
		if len(cards) > MaxCardList {
			t.Errorf("ParseCards(%q) accepted %d cards, more than %d", s, len(cards), MaxCardList)
		}
		for _, c := range cards {
			if !c.Valid() {
				t.Fatalf("ParseCards(%q) accepted invalid card %#v", s, c)
			}
		}
		// Canonical form: the input without white space, in upper case.
		text := FormatCards(cards)
		if want := strings.ToUpper(strings.Join(strings.Fields(s), "")); text != want {
			t.Errorf("FormatCards(ParseCards(%q)) = %q, want %q", s, text, want)
		}
		again, err := ParseCards(text)
		if err != nil {
			t.Fatalf("ParseCards(FormatCards(...)) = %v for %q", err, text)
		}
		if !slices.Equal(again, cards) {
			t.Errorf("round trip of %q: %v, then %v", s, cards, again)
		}
	})
}
