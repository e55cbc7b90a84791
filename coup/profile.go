package coup

import (
	"fmt"
	"slices"
	"sort"
)

// Bet names a bet spot on the layout.
type Bet string

// The bet spots the seeds describe. WinningNumber is a family: the spot for
// point N is WinningNumberBet(N), named "winning_number_N".
const (
	BetPlayer      Bet = "player"
	BetBanker      Bet = "banker"
	BetTie         Bet = "tie"
	BetPlayerPair  Bet = "player_pair"
	BetBankerPair  Bet = "banker_pair"
	BetAnyPair     Bet = "any_pair"
	BetPerfectPair Bet = "perfect_pair"
	BetPlayerBonus Bet = "player_bonus"
	BetBankerBonus Bet = "banker_bonus"
)

// winningNumberPrefix starts the name of each winning-number spot.
const winningNumberPrefix = "winning_number_"

// WinningNumberBet is the spot of the no-commission side bet on the winning
// hand's point n (1-9).
func WinningNumberBet(n int) Bet { return Bet(fmt.Sprintf("%s%d", winningNumberPrefix, n)) }

// WinningNumber returns n when b is a winning-number spot.
func (b Bet) WinningNumber() (int, bool) {
	s := string(b)
	if len(s) != len(winningNumberPrefix)+1 || s[:len(winningNumberPrefix)] != winningNumberPrefix {
		return 0, false
	}
	n := int(s[len(s)-1] - '0')
	return n, n >= 1 && n <= 9
}

// IsMain reports the main bets: Player, Banker and Tie.
func (b Bet) IsMain() bool { return b == BetPlayer || b == BetBanker || b == BetTie }

// OutcomeKind is what a bet does when a coup ends.
type OutcomeKind uint8

// A bet loses, wins, or is returned (push).
const (
	Lose OutcomeKind = iota + 1
	Win
	Push
)

func (k OutcomeKind) String() string {
	switch k {
	case Lose:
		return "lose"
	case Win:
		return "win"
	case Push:
		return "push"
	}
	return fmt.Sprintf("outcome(%d)", uint8(k))
}

// MarshalText writes the outcome's name.
func (k OutcomeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Ratio is a payout ratio Num:Den, the winnings per unit staked (11:1 pays
// eleven times the stake on top of the stake returned; 19:20 is 1:1 less 5%).
// The zero Ratio means "not paid".
type Ratio struct {
	Num int64
	Den int64
}

// R builds a ratio num:den.
func R(num, den int64) Ratio { return Ratio{Num: num, Den: den} }

// IsZero reports the unset ratio.
func (r Ratio) IsZero() bool { return r.Num == 0 }

// Float is the ratio as a float, for odds only; money never uses it.
func (r Ratio) Float() float64 {
	if r.Den == 0 {
		return 0
	}
	return float64(r.Num) / float64(r.Den)
}

// Outcome is one bet spot's fate in one coup.
type Outcome struct {
	Kind OutcomeKind `json:"outcome"`
	// Pays is the payout ratio of a win; zero otherwise.
	Pays Ratio `json:"pays,omitzero"`
}

// PayTable is what a profile pays on each spot.
type PayTable struct {
	Player Ratio `json:"player"`
	// Banker is a Banker win's ratio: 19:20 is 1:1 less 5% commission.
	Banker Ratio `json:"banker"`
	// BankerOnSix, when set, replaces Banker for a Banker win on a point of
	// 6 (seed 001: 1:2).
	BankerOnSix     Ratio `json:"banker_on_six"`
	Tie             Ratio `json:"tie"`
	PlayerPair      Ratio `json:"player_pair"`
	BankerPair      Ratio `json:"banker_pair"`
	AnyPair         Ratio `json:"any_pair"`
	PerfectPairOne  Ratio `json:"perfect_pair_one"`
	PerfectPairBoth Ratio `json:"perfect_pair_both"`
	// BonusNatural pays a Player or Banker bonus won with a natural.
	BonusNatural Ratio `json:"bonus_natural"`
	// BonusMargin[m] pays a bonus won without a natural by m points; a zero
	// ratio loses.
	BonusMargin [10]Ratio `json:"bonus_margin"`
	// WinningNumber[n] pays the winning-number bet on point n (1-9). Seed 001
	// gives no table, so it must be configured before the spots are offered.
	WinningNumber [10]Ratio `json:"winning_number"`
	// WinningNumberTiePush returns winning-number bets on a tie instead of
	// losing them (the seed is silent; losing is the default).
	WinningNumberTiePush bool `json:"winning_number_tie_push"`
}

// Limits are a table's stake limits, in integer minor units.
type Limits struct {
	// MinTotal is the table minimum: the least total stake of one player.
	MinTotal int64 `json:"min_total"`
	// MaxTotal is the most one player may stake on one coup; 0 is no limit.
	MaxTotal int64 `json:"max_total"`
	// PerBet is each spot's maximum; a spot not listed has no own limit.
	PerBet map[Bet]int64 `json:"per_bet,omitempty"`
	// RestrictedSideBets are the side bets allowed only alongside enough main
	// bets (seed 003: the bonuses and perfect pair).
	RestrictedSideBets []Bet `json:"restricted_side_bets,omitempty"`
	// SideBetMinMainMultiple: restricted side bets need main bets totalling at
	// least this many times MinTotal (seed 003: 2); 0 is no rule.
	SideBetMinMainMultiple int64 `json:"side_bet_min_main_multiple"`
	// SideBetMaxMainShare caps each restricted side bet at this share of the
	// main bets (seed 003: 1:2, half); zero is no rule.
	SideBetMaxMainShare Ratio `json:"side_bet_max_main_share"`
	// NoOpposingMain refuses Player and Banker staked together.
	NoOpposingMain bool `json:"no_opposing_main"`
	// MaxWin caps one player's winnings on one coup; 0 is no cap.
	MaxWin int64 `json:"max_win"`
}

// Profile is a house's rule profile: decks, the spots offered, what they pay
// and the limits.
type Profile struct {
	Name   string   `json:"name"`
	Decks  int      `json:"decks"`
	Bets   []Bet    `json:"bets"`
	Pays   PayTable `json:"pays"`
	Limits Limits   `json:"limits"`
}

// Offers reports whether the profile has spot b.
func (p *Profile) Offers(b Bet) bool { return slices.Contains(p.Bets, b) }

// Outcome is what spot b does on result r under this profile. A spot the
// profile does not offer is an error.
func (p *Profile) Outcome(b Bet, r Result) (Outcome, error) {
	if !p.Offers(b) {
		return Outcome{}, fmt.Errorf("profile %s has no %q bet", p.Name, b)
	}
	return p.Pays.Outcome(b, r), nil
}

func win(r Ratio) Outcome { return Outcome{Kind: Win, Pays: r} }

var (
	lose = Outcome{Kind: Lose}
	push = Outcome{Kind: Push}
)

// winIf wins at ratio when cond holds and ratio is set, else loses.
func winIf(cond bool, ratio Ratio) Outcome {
	if cond && !ratio.IsZero() {
		return win(ratio)
	}
	return lose
}

// Outcome is what spot b does on result r under this pay table.
func (t *PayTable) Outcome(b Bet, r Result) Outcome {
	switch b {
	case BetPlayer:
		if r.Winner == SideTie {
			return push
		}
		return winIf(r.Winner == SidePlayer, t.Player)
	case BetBanker:
		if r.Winner == SideTie {
			return push
		}
		if r.Winner == SideBanker && r.BankerPoint == 6 && !t.BankerOnSix.IsZero() {
			return win(t.BankerOnSix)
		}
		return winIf(r.Winner == SideBanker, t.Banker)
	case BetTie:
		return winIf(r.Winner == SideTie, t.Tie)
	case BetPlayerPair:
		return winIf(r.PlayerPair, t.PlayerPair)
	case BetBankerPair:
		return winIf(r.BankerPair, t.BankerPair)
	case BetAnyPair:
		return winIf(r.PlayerPair || r.BankerPair, t.AnyPair)
	case BetPerfectPair:
		if r.PlayerPerfectPair && r.BankerPerfectPair {
			return winIf(true, t.PerfectPairBoth)
		}
		return winIf(r.PlayerPerfectPair || r.BankerPerfectPair, t.PerfectPairOne)
	case BetPlayerBonus:
		return t.bonus(SidePlayer, r)
	case BetBankerBonus:
		return t.bonus(SideBanker, r)
	}
	if n, ok := b.WinningNumber(); ok {
		if r.Winner == SideTie {
			if t.WinningNumberTiePush {
				return push
			}
			return lose
		}
		return winIf(r.WinningPoint() == n, t.WinningNumber[n])
	}
	return lose
}

// bonus is seed 003's Player/Banker bonus: a natural win pays BonusNatural, a
// win without a natural pays by margin; a natural tie is returned, any other
// tie loses.
func (t *PayTable) bonus(side Side, r Result) Outcome {
	if r.Winner == SideTie {
		if r.PlayerNatural && r.BankerNatural {
			return push
		}
		return lose
	}
	if r.Winner != side {
		return lose
	}
	natural := r.PlayerNatural
	if side == SideBanker {
		natural = r.BankerNatural
	}
	if natural {
		return winIf(true, t.BonusNatural)
	}
	return winIf(true, t.BonusMargin[r.Margin])
}

// Profile names built in.
const (
	ProfileClassic      = "classic"
	ProfileNoCommission = "no-commission"
	ProfileVIP          = "vip"
)

// euro is one euro in minor units (cents).
const euro = 100

// builtins builds the seeds' profiles afresh, so callers may change them.
var builtins = map[string]func() Profile{
	// Seeds 000, 002, 004: 6 decks; Banker 1:1 less 5%; Tie 8:1.
	ProfileClassic: func() Profile {
		return Profile{
			Name:  ProfileClassic,
			Decks: 6,
			Bets:  []Bet{BetPlayer, BetBanker, BetTie},
			Pays:  PayTable{Player: R(1, 1), Banker: R(19, 20), Tie: R(8, 1)},
		}
	},
	// Seed 001: 6 decks; Banker 1:1 but 1:2 on a six; Tie 8:1; the winning
	// number spots are on the layout, but a stake on one is refused until
	// its pay table is configured (the seed gives none).
	ProfileNoCommission: func() Profile {
		return Profile{
			Name:  ProfileNoCommission,
			Decks: 6,
			Bets: []Bet{BetPlayer, BetBanker, BetTie,
				WinningNumberBet(1), WinningNumberBet(2), WinningNumberBet(3), WinningNumberBet(4), WinningNumberBet(5),
				WinningNumberBet(6), WinningNumberBet(7), WinningNumberBet(8), WinningNumberBet(9)},
			Pays: PayTable{Player: R(1, 1), Banker: R(1, 1), BankerOnSix: R(1, 2), Tie: R(8, 1)},
		}
	},
	// Seed 003: 8 decks; Banker 0.95:1; pairs, any pair, perfect pair,
	// bonuses; the seed's limits in euro.
	ProfileVIP: func() Profile {
		return Profile{
			Name:  ProfileVIP,
			Decks: 8,
			Bets: []Bet{BetPlayer, BetBanker, BetTie, BetPlayerPair, BetBankerPair, BetAnyPair,
				BetPerfectPair, BetPlayerBonus, BetBankerBonus},
			Pays: PayTable{
				Player: R(1, 1), Banker: R(19, 20), Tie: R(8, 1),
				PlayerPair: R(11, 1), BankerPair: R(11, 1), AnyPair: R(5, 1),
				PerfectPairOne: R(25, 1), PerfectPairBoth: R(200, 1),
				BonusNatural: R(1, 1),
				BonusMargin:  [10]Ratio{4: R(1, 1), 5: R(2, 1), 6: R(4, 1), 7: R(6, 1), 8: R(10, 1), 9: R(30, 1)},
			},
			Limits: Limits{
				MinTotal: 10, // 0,10 EUR
				MaxTotal: 5000 * euro,
				PerBet: map[Bet]int64{
					BetPlayer: 2500 * euro, BetBanker: 2500 * euro, BetTie: 625 * euro,
					BetPlayerBonus: 250 * euro, BetBankerBonus: 250 * euro, BetPerfectPair: 500 * euro,
					BetPlayerPair: 625 * euro, BetAnyPair: 625 * euro, BetBankerPair: 625 * euro,
				},
				RestrictedSideBets:     []Bet{BetPlayerBonus, BetBankerBonus, BetPerfectPair},
				SideBetMinMainMultiple: 2,
				SideBetMaxMainShare:    R(1, 2),
				NoOpposingMain:         true,
				MaxWin:                 126250 * euro,
			},
		}
	},
}

// ProfileNames lists the built-in profiles.
func ProfileNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BuiltinProfile returns a fresh copy of a built-in profile by name.
func BuiltinProfile(name string) (Profile, error) {
	f, ok := builtins[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown rule profile %q (have %v)", clip(name), ProfileNames())
	}
	return f(), nil
}
