package coup

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSettleBankerCommission: classic Banker pays 1:1 less 5%, the
// commission rounded down (seeds 000, 002: in the player's favour).
func TestSettleBankerCommission(t *testing.T) {
	p := testProfile(t, ProfileClassic)
	r := deal(t, "3S,4H,4D,5C") // Banker natural 9-7
	tests := []struct {
		stake, winnings, payout int64 // commission = stake - winnings
	}{
		{1, 1, 2},          // 5% of 0.01 is 0.0005: no commission
		{19, 19, 38},       // 0.95: none
		{20, 19, 39},       // exactly 1
		{21, 20, 41},       // 1.05 -> 1
		{99, 95, 194},      // 4.95 -> 4
		{100, 95, 195},     // 5
		{101, 96, 197},     // 5.05 -> 5
		{105, 100, 205},    // 5.25 -> 5
		{2000, 1900, 3900}, // 100
		{2001, 1901, 3902}, // 100.05 -> 100
		{250000, 237500, 487500},
	}
	for _, tt := range tests {
		s, err := p.Settle(Stakes{BetBanker: tt.stake}, r)
		if err != nil {
			t.Fatal(err)
		}
		l := s.Lines[0]
		if l.Winnings != tt.winnings || l.Payout != tt.payout || s.Payout != tt.payout || s.Winnings != tt.winnings {
			t.Errorf("banker %d: wins %d paying %d (total %d), want %d paying %d", tt.stake, l.Winnings, l.Payout, s.Payout, tt.winnings, tt.payout)
		}
		if s.Net() != tt.winnings {
			t.Errorf("banker %d: net %d, want %d", tt.stake, s.Net(), tt.winnings)
		}
	}
}

// TestSettleBankerOnSix: no-commission pays a Banker six 1:2, half the
// stake, an odd cent rounded up for the player.
func TestSettleBankerOnSix(t *testing.T) {
	p := testProfile(t, ProfileNoCommission)
	for _, cards := range []string{"2S,4H,3D,2C,9H", "AS,KH,2D,3C,2S,3D"} {
		r := deal(t, cards)
		tests := []struct{ stake, winnings, payout int64 }{
			{1, 1, 2},
			{2, 1, 3},
			{3, 2, 5},
			{99, 50, 149},
			{100, 50, 150},
			{101, 51, 152},
			{1001, 501, 1502},
		}
		for _, tt := range tests {
			s, err := p.Settle(Stakes{BetBanker: tt.stake}, r)
			if err != nil {
				t.Fatal(err)
			}
			if l := s.Lines[0]; l.Pays != R(1, 2) || l.Winnings != tt.winnings || l.Payout != tt.payout {
				t.Errorf("%s banker %d: wins %d at %v paying %d, want %d at 1:2 paying %d", cards, tt.stake, l.Winnings, l.Pays, l.Payout, tt.winnings, tt.payout)
			}
		}
	}
	// Any other Banker point pays 1:1.
	s, err := p.Settle(Stakes{BetBanker: 101}, deal(t, "3S,4H,4D,5C"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Payout != 202 {
		t.Errorf("banker 101 on a 9: payout %d, want 202", s.Payout)
	}
}

// TestSettleDecimalRatio: a configured "0.9:1" is 9:10, rounded up too.
func TestSettleDecimalRatio(t *testing.T) {
	p, err := LoadProfile(ProfileClassic, []byte(`{"pays": {"player": "0.9:1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := deal(t, "4S,KH,5D,QC") // Player natural
	for _, tt := range []struct{ stake, payout int64 }{{1, 2}, {10, 19}, {15, 29}, {19, 37}} {
		s, err := p.Settle(Stakes{BetPlayer: tt.stake}, r)
		if err != nil {
			t.Fatal(err)
		}
		if s.Payout != tt.payout {
			t.Errorf("player %d at 0.9:1: payout %d, want %d", tt.stake, s.Payout, tt.payout)
		}
	}
}

func TestSettleMixed(t *testing.T) {
	classic := testProfile(t, ProfileClassic)
	vip := testProfile(t, ProfileVIP)
	tests := []struct {
		name                          string
		p                             *Profile
		cards                         string
		stakes                        Stakes
		staked, winnings, payout, net int64
		lines                         map[Bet][2]int64 // winnings, payout
	}{
		{"tie pays the tie and returns player", &classic, "9S,KH,8D,7C", Stakes{BetPlayer: 1000, BetTie: 500},
			1500, 4000, 5500, 4000, map[Bet][2]int64{BetPlayer: {0, 1000}, BetTie: {4000, 4500}}},
		{"banker loses", &classic, "4S,KH,5D,QC", Stakes{BetBanker: 1000},
			1000, 0, 0, -1000, map[Bet][2]int64{BetBanker: {0, 0}}},
		{"player wins, tie loses", &classic, "4S,KH,5D,QC", Stakes{BetPlayer: 1000, BetTie: 300},
			1300, 1000, 2000, 700, map[Bet][2]int64{BetPlayer: {1000, 2000}, BetTie: {0, 0}}},
		{"natural tie returns bonus, pays tie, loses pairs", &vip, "4S,5H,5D,4C",
			Stakes{BetBanker: 2000, BetTie: 100, BetBankerBonus: 1000, BetAnyPair: 50},
			3150, 800, 3900, 750, map[Bet][2]int64{BetBanker: {0, 2000}, BetTie: {800, 900}, BetBankerBonus: {0, 1000}, BetAnyPair: {0, 0}}},
	}
	for _, tt := range tests {
		s, err := tt.p.Settle(tt.stakes, deal(t, tt.cards))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if s.Staked != tt.staked || s.Winnings != tt.winnings || s.Payout != tt.payout || s.Net() != tt.net || s.Capped || s.Withheld != 0 {
			t.Errorf("%s: staked %d winnings %d payout %d net %d capped %v, want %d %d %d %d false",
				tt.name, s.Staked, s.Winnings, s.Payout, s.Net(), s.Capped, tt.staked, tt.winnings, tt.payout, tt.net)
		}
		if len(s.Lines) != len(tt.lines) {
			t.Errorf("%s: %d lines, want %d", tt.name, len(s.Lines), len(tt.lines))
		}
		for _, l := range s.Lines {
			if w := tt.lines[l.Bet]; l.Winnings != w[0] || l.Payout != w[1] {
				t.Errorf("%s: %s wins %d paying %d, want %d paying %d", tt.name, l.Bet, l.Winnings, l.Payout, w[0], w[1])
			}
		}
	}
}

// TestSettleMaxWinSeed003 is the richest coup seed 003's limits allow, which
// wins more than the seed's largest win of 126,250 EUR.
func TestSettleMaxWinSeed003(t *testing.T) {
	p := testProfile(t, ProfileVIP)
	r := deal(t, "AS,TS,AS,TS,7H,TD") // both perfect pairs, Player 9-0 without a natural
	const eur = 100
	st := Stakes{
		BetPlayer:      2375 * eur,
		BetPlayerPair:  625 * eur,
		BetBankerPair:  625 * eur,
		BetAnyPair:     625 * eur,
		BetPerfectPair: 500 * eur,
		BetPlayerBonus: 250 * eur,
	} // 5,000 EUR: the table maximum
	if err := p.ValidateStakes(st); err != nil {
		t.Fatalf("the stakes are within seed 003's limits: %v", err)
	}
	s, err := p.Settle(st, r)
	if err != nil {
		t.Fatal(err)
	}
	// Uncapped: 2,375 + 6,875 + 6,875 + 3,125 + 100,000 + 7,500 = 126,750 EUR.
	// Capped at 126,250: the last line in layout order (player bonus) gives up 500.
	want := []struct {
		bet                Bet
		winnings, withheld int64
	}{
		{BetPlayer, 2375 * eur, 0},
		{BetPlayerPair, 6875 * eur, 0},
		{BetBankerPair, 6875 * eur, 0},
		{BetAnyPair, 3125 * eur, 0},
		{BetPerfectPair, 100000 * eur, 0},
		{BetPlayerBonus, 7000 * eur, 500 * eur},
	}
	if len(s.Lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(s.Lines), len(want))
	}
	for i, w := range want {
		l := s.Lines[i]
		if l.Bet != w.bet || l.Winnings != w.winnings || l.Withheld != w.withheld || l.Payout != l.Stake+w.winnings {
			t.Errorf("line %d: %s wins %d withheld %d pays %d, want %s %d %d", i, l.Bet, l.Winnings, l.Withheld, l.Payout, w.bet, w.winnings, w.withheld)
		}
	}
	if !s.Capped || s.Winnings != 126250*eur || s.Withheld != 500*eur || s.Staked != 5000*eur || s.Payout != 131250*eur {
		t.Errorf("capped %v winnings %d withheld %d staked %d payout %d; want true 12625000 50000 500000 13125000",
			s.Capped, s.Winnings, s.Withheld, s.Staked, s.Payout)
	}
}

func TestSettleMaxWinEdges(t *testing.T) {
	p, err := LoadProfile(ProfileClassic, []byte(`{"limits": {"max_win": 5000}}`))
	if err != nil {
		t.Fatal(err)
	}
	player := deal(t, "4S,KH,5D,QC")
	tie := deal(t, "9S,KH,8D,7C")
	tests := []struct {
		name                       string
		r                          Result
		st                         Stakes
		capped                     bool
		winnings, withheld, payout int64
	}{
		{"just under", player, Stakes{BetPlayer: 4999}, false, 4999, 0, 9998},
		{"exactly the cap", player, Stakes{BetPlayer: 5000}, false, 5000, 0, 10000},
		{"one over", player, Stakes{BetPlayer: 5001}, true, 5000, 1, 10001},
		// The pushed Player stake is returned whole; the tie's 8,000 is cut.
		{"push returned in full", tie, Stakes{BetPlayer: 3000, BetTie: 1000}, true, 5000, 3000, 9000},
		// Losing stakes are not netted against the cap.
		{"loss not netted", player, Stakes{BetPlayer: 6000, BetTie: 2000}, true, 5000, 1000, 11000},
	}
	for _, tt := range tests {
		s, err := p.Settle(tt.st, tt.r)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if s.Capped != tt.capped || s.Winnings != tt.winnings || s.Withheld != tt.withheld || s.Payout != tt.payout {
			t.Errorf("%s: capped %v winnings %d withheld %d payout %d, want %v %d %d %d",
				tt.name, s.Capped, s.Winnings, s.Withheld, s.Payout, tt.capped, tt.winnings, tt.withheld, tt.payout)
		}
	}
}

func TestSettleRefuses(t *testing.T) {
	classic := testProfile(t, ProfileClassic)
	nc := testProfile(t, ProfileNoCommission)
	r := deal(t, "4S,KH,5D,QC")
	tests := []struct {
		name string
		p    *Profile
		st   Stakes
		rule StakeRule
	}{
		{"spot not offered", &classic, Stakes{BetPlayerPair: 100}, RuleNotOffered},
		{"unknown spot", &classic, Stakes{"martingale": 100}, RuleNotOffered},
		{"zero", &classic, Stakes{BetPlayer: 0}, RuleNotPositive},
		{"negative", &classic, Stakes{BetPlayer: -100}, RuleNotPositive},
		{"absurd", &classic, Stakes{BetPlayer: math.MaxInt64}, RuleTooLarge},
		{"absurd total", &classic, Stakes{BetPlayer: MaxStake, BetTie: 1}, RuleTooLarge},
		{"winning number without a pay table", &nc, Stakes{WinningNumberBet(9): 100}, RuleNoPayTable},
	}
	for _, tt := range tests {
		_, err := tt.p.Settle(tt.st, r)
		var se *StakeError
		if !errors.As(err, &se) || !se.Has(tt.rule) || !errors.Is(err, ErrStakeRefused) {
			t.Errorf("%s: err %v, want a StakeError for %s", tt.name, err, tt.rule)
		}
	}
	// The largest stake settles without overflow: 10^12 at 8:1.
	s, err := classic.Settle(Stakes{BetTie: MaxStake}, deal(t, "9S,KH,8D,7C"))
	if err != nil || s.Payout != 9_000_000_000_000 {
		t.Errorf("tie of MaxStake: payout %d, %v; want 9000000000000", s.Payout, err)
	}
	// Nothing staked settles to nothing.
	s, err = classic.Settle(nil, r)
	if err != nil || len(s.Lines) != 0 || s.Payout != 0 || s.Staked != 0 {
		t.Errorf("no stakes: %+v, %v", s, err)
	}
}

// TestSettleOverflow: a profile built in code, never validated, with a
// ratio no config could give, fails cleanly instead of wrapping around.
func TestSettleOverflow(t *testing.T) {
	p := testProfile(t, ProfileClassic)
	p.Pays.Player = R(math.MaxInt64, 1)
	_, err := p.Settle(Stakes{BetPlayer: 3}, deal(t, "4S,KH,5D,QC"))
	if !errors.Is(err, ErrProfile) {
		t.Errorf("err %v, want ErrProfile", err)
	}
	p.Pays.Player = R(1<<62, 1)
	_, err = p.Settle(Stakes{BetPlayer: 1}, deal(t, "4S,KH,5D,QC"))
	if err != nil {
		t.Errorf("2^62 winnings fit: %v", err)
	}
	_, err = p.Settle(Stakes{BetPlayer: 2}, deal(t, "4S,KH,5D,QC"))
	if !errors.Is(err, ErrProfile) {
		t.Errorf("2^63 winnings: err %v, want ErrProfile", err)
	}
}

func TestSettleBadResult(t *testing.T) {
	p := testProfile(t, ProfileVIP)
	st := Stakes{BetPlayer: 100}
	good := deal(t, "AS,KH,2D,QC,6H,TC")
	tamper := []struct {
		name string
		edit func(r *Result)
	}{
		{"zero result (a voided coup)", func(r *Result) { *r = Result{} }},
		{"winner", func(r *Result) { r.Winner = SideBanker }},
		{"winner out of range", func(r *Result) { r.Winner = 9 }},
		{"margin", func(r *Result) { r.Margin = 12 }},
		{"point", func(r *Result) { r.PlayerPoint = 8 }},
		{"pair", func(r *Result) { r.PlayerPair = true }},
		{"perfect pair", func(r *Result) { r.BankerPerfectPair = true }},
		{"natural", func(r *Result) { r.PlayerNatural = true }},
		{"third card missing", func(r *Result) { r.Player = r.Player[:2] }},
		{"banker third card missing", func(r *Result) { r.Banker = r.Banker[:2] }},
		{"card changed", func(r *Result) { r.Player = []Card{r.Player[0], r.Player[1], {Rank: Seven, Suit: Hearts}} }},
		{"invalid card", func(r *Result) { r.Banker = []Card{{}, r.Banker[1], r.Banker[2]} }},
		{"four cards", func(r *Result) { r.Player = append(r.Player[:3:3], r.Player[0]) }},
	}
	for _, tt := range tamper {
		r := good
		r.Player = append([]Card(nil), good.Player...)
		r.Banker = append([]Card(nil), good.Banker...)
		tt.edit(&r)
		if _, err := p.Settle(st, r); !errors.Is(err, ErrResult) {
			t.Errorf("%s: err %v, want ErrResult", tt.name, err)
		}
	}
	if _, err := p.Settle(st, good); err != nil {
		t.Errorf("untouched result: %v", err)
	}
}

// TestSettleLineJSON pins the wire form of a settlement line.
func TestSettleLineJSON(t *testing.T) {
	p := testProfile(t, ProfileClassic)
	s, err := p.Settle(Stakes{BetBanker: 101, BetTie: 50, BetPlayer: 20}, deal(t, "3S,4H,4D,5C"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"profile":"classic","lines":[` +
		`{"bet":"player","stake":20,"outcome":"lose","winnings":0,"payout":0},` +
		`{"bet":"banker","stake":101,"outcome":"win","pays":"19:20","winnings":96,"payout":197},` +
		`{"bet":"tie","stake":50,"outcome":"lose","winnings":0,"payout":0}],` +
		`"staked":171,"winnings":96,"payout":197,"capped":false,"withheld":0}`
	if string(got) != want {
		t.Errorf("json\n got %s\nwant %s", got, want)
	}
}

// TestSettleProperties settles random coups and stakes under every profile
// and checks what must always hold: the lines add up to the totals, a win
// is rounded up and never by a whole unit, a push returns the stake, a loss
// pays nothing, and the cap is never exceeded.
func TestSettleProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	profiles := []Profile{testProfile(t, ProfileClassic), testProfile(t, ncHouse), testProfile(t, ProfileVIP)}
	capped, err := LoadProfile(ProfileVIP, []byte(`{"limits": {"max_win": 25000}}`))
	if err != nil {
		t.Fatal(err)
	}
	profiles = append(profiles, capped)
	sawCap := false
	for i := 0; i < 20000; i++ {
		p := &profiles[i%len(profiles)]
		r := randomCoup(t, rng)
		st := Stakes{}
		for _, b := range p.Bets {
			if rng.IntN(2) == 0 {
				st[b] = 1 + rng.Int64N(5000)
			}
		}
		s, err := p.Settle(st, r)
		if err != nil {
			t.Fatalf("%s on %v: %v", p.Name, r, err)
		}
		var staked, winnings, withheld, payout int64
		for _, l := range s.Lines {
			if l.Stake != st[l.Bet] {
				t.Fatalf("%s: stake %d, staked %d", l.Bet, l.Stake, st[l.Bet])
			}
			switch l.Kind {
			case Win:
				// Uncapped winnings w satisfy stake*num <= w*den < stake*num + den.
				w := l.Winnings + l.Withheld
				if lo, hi := l.Stake*l.Pays.Num, w*l.Pays.Den; hi < lo || hi >= lo+l.Pays.Den {
					t.Fatalf("%s: %d at %v won %d", l.Bet, l.Stake, l.Pays, w)
				}
				if l.Payout != l.Stake+l.Winnings {
					t.Fatalf("%s: payout %d of a win", l.Bet, l.Payout)
				}
			case Push:
				if l.Payout != l.Stake || l.Winnings != 0 {
					t.Fatalf("%s: push paid %d", l.Bet, l.Payout)
				}
			case Lose:
				if l.Payout != 0 || l.Winnings != 0 {
					t.Fatalf("%s: loss paid %d", l.Bet, l.Payout)
				}
			default:
				t.Fatalf("%s: outcome %v", l.Bet, l.Kind)
			}
			staked += l.Stake
			winnings += l.Winnings
			withheld += l.Withheld
			payout += l.Payout
		}
		if len(s.Lines) != len(st) || staked != s.Staked || winnings != s.Winnings || withheld != s.Withheld || payout != s.Payout {
			t.Fatalf("totals disagree with lines: %+v", s)
		}
		if max := p.Limits.MaxWin; max > 0 && s.Winnings > max || s.Capped != (s.Withheld > 0) {
			t.Fatalf("cap: %+v", s)
		}
		sawCap = sawCap || s.Capped
	}
	if !sawCap {
		t.Error("no random coup reached the cap: the property was not exercised")
	}
}

// randomCoup deals a complete coup from a fresh 8-deck shoe.
func randomCoup(t testing.TB, rng *rand.Rand) Result {
	t.Helper()
	shoe, err := NewShoe(8)
	if err != nil {
		t.Fatal(err)
	}
	var dealt []Card
	for {
		pos, err := Next(dealt)
		if err != nil {
			t.Fatal(err)
		}
		if pos == Complete {
			break
		}
		for {
			c := CardAt(rng.IntN(CardCount))
			if shoe.Remove(c) == nil {
				dealt = append(dealt, c)
				break
			}
		}
	}
	r, err := Score(dealt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func BenchmarkSettle(b *testing.B) {
	p := testProfile(b, ProfileVIP)
	r := deal(b, "AS,TS,AS,TS,7H,TD")
	st := Stakes{BetPlayer: 237500, BetPlayerPair: 62500, BetBankerPair: 62500, BetAnyPair: 62500, BetPerfectPair: 50000, BetPlayerBonus: 25000}
	for b.Loop() {
		if _, err := p.Settle(st, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateStakes(b *testing.B) {
	p := testProfile(b, ProfileVIP)
	st := Stakes{BetPlayer: 237500, BetPlayerPair: 62500, BetBankerPair: 62500, BetAnyPair: 62500, BetPerfectPair: 50000, BetPlayerBonus: 25000}
	for b.Loop() {
		if err := p.ValidateStakes(st); err != nil {
			b.Fatal(err)
		}
	}
}
