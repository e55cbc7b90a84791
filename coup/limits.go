package coup

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// MaxStake bounds one stake, and one player's total stake on one coup, in
// minor units: 10^12 (ten thousand million in a two-decimal currency) is far
// above any table's limit, and small enough that no payout at a ratio of up
// to MaxRatioTerm can overflow int64.
const MaxStake int64 = 1_000_000_000_000

// Stakes are one player's bets on one coup: spot to stake, in minor units.
type Stakes map[Bet]int64

// ErrStakeRefused is wrapped by every StakeError.
var ErrStakeRefused = errors.New("stake refused")

// StakeRule names the rule a stake breaks, for callers that act on the kind
// of refusal (a display's message, a metric label).
type StakeRule string

// The rules a stake can break.
const (
	RuleNoStake      StakeRule = "no_stake"       // nothing staked at all
	RuleNotOffered   StakeRule = "not_offered"    // the profile has no such spot
	RuleNotPositive  StakeRule = "not_positive"   // a stake of zero or less
	RuleTooLarge     StakeRule = "too_large"      // above MaxStake
	RuleNoPayTable   StakeRule = "no_pay_table"   // a winning-number spot with no ratio configured
	RuleSpotLimit    StakeRule = "spot_limit"     // above the spot's own limit
	RuleBelowMinimum StakeRule = "below_minimum"  // total below the table minimum
	RuleAboveMaximum StakeRule = "above_maximum"  // total above the table maximum
	RuleOpposingMain StakeRule = "opposing_main"  // Player and Banker together
	RuleSideBetMain  StakeRule = "side_bet_main"  // restricted side bet without enough main bets
	RuleSideBetShare StakeRule = "side_bet_share" // restricted side bet above its share of the main bets
)

// Violation is one reason stakes are refused.
type Violation struct {
	// Bet is the spot at fault; empty when the rule is about the whole stake.
	Bet    Bet       `json:"bet,omitempty"`
	Rule   StakeRule `json:"rule"`
	Reason string    `json:"reason"`
}

// String is the violation as the player is told it: "spot: reason".
func (v Violation) String() string {
	if v.Bet == "" {
		return v.Reason
	}
	return string(v.Bet) + ": " + v.Reason
}

// StakeError lists every rule a player's stakes break, so the player can be
// told all of them at once. Amounts in reasons are minor units.
type StakeError struct {
	Profile    string
	Violations []Violation
}

// Error lists every violation in one line.
func (e *StakeError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return fmt.Sprintf("stake refused by profile %s: %s", e.Profile, strings.Join(parts, "; "))
}

// Unwrap makes errors.Is(err, ErrStakeRefused) hold.
func (e *StakeError) Unwrap() error { return ErrStakeRefused }

// Has reports whether rule is among the violations.
func (e *StakeError) Has(rule StakeRule) bool {
	for _, v := range e.Violations {
		if v.Rule == rule {
			return true
		}
	}
	return false
}

// violations collects refusals in a stable order.
type violations struct {
	profile string
	list    []Violation
}

func (vs *violations) add(b Bet, rule StakeRule, format string, a ...any) {
	vs.list = append(vs.list, Violation{Bet: Bet(clip(string(b))), Rule: rule, Reason: fmt.Sprintf(format, a...)})
}

func (vs *violations) err() error {
	if len(vs.list) == 0 {
		return nil
	}
	return &StakeError{Profile: vs.profile, Violations: vs.list}
}

// order lists the staked spots in a stable order: the spots the profile
// offers in layout order, then any others by name.
func (p *Profile) order(st Stakes) []Bet {
	out := make([]Bet, 0, len(st))
	for _, b := range p.Bets {
		if _, ok := st[b]; ok {
			out = append(out, b)
		}
	}
	var others []Bet
	for b := range st {
		if !p.Offers(b) {
			others = append(others, b)
		}
	}
	slices.Sort(others)
	return append(out, others...)
}

// checkStakes applies the rules without which a stake cannot be settled at
// all: an offered spot with a configured ratio, and a positive stake within
// MaxStake, the total too. It returns the sum of the well-formed stakes.
func (p *Profile) checkStakes(st Stakes, vs *violations) (total int64) {
	for _, b := range p.order(st) {
		s := st[b]
		switch {
		case !p.Offers(b):
			vs.add(b, RuleNotOffered, "profile %s has no such bet", p.Name)
			continue
		case s <= 0:
			vs.add(b, RuleNotPositive, "stake %d is not positive", s)
			continue
		case s > MaxStake:
			vs.add(b, RuleTooLarge, "stake %d is above the most any stake may be (%d)", s, MaxStake)
			continue
		}
		if n, ok := b.WinningNumber(); ok && p.Pays.WinningNumber[n].IsZero() {
			vs.add(b, RuleNoPayTable, "no payout is configured for winning number %d", n)
		}
		total = satAdd(total, s)
	}
	if total > MaxStake {
		vs.add("", RuleTooLarge, "total stake %d is above the most any stake may be (%d)", total, MaxStake)
	}
	return total
}

// ValidateStakes checks one player's stakes on one coup against the
// profile's spots and limits, and returns a *StakeError listing every rule
// broken, or nil:
//   - each spot offered, each stake positive and at most MaxStake;
//   - a winning-number spot only once its ratio is configured (seed 001
//     gives none);
//   - each spot within its own limit, the total within MinTotal..MaxTotal;
//   - no Player and Banker together when NoOpposingMain (seed 003);
//   - each restricted side bet (seed 003: the bonuses and perfect pair) only
//     when the main bets (Player, Banker, Tie) total at least
//     SideBetMinMainMultiple times MinTotal, and at most SideBetMaxMainShare
//     of the main bets.
func (p *Profile) ValidateStakes(st Stakes) error {
	vs := violations{profile: p.Name}
	if len(st) == 0 {
		vs.add("", RuleNoStake, "no bet placed")
		return vs.err()
	}
	total := p.checkStakes(st, &vs)
	lim := &p.Limits
	for _, b := range p.order(st) {
		// A stake refused above (not positive, too large) is not reported
		// again against the spot's limit.
		s := st[b]
		if limit, ok := lim.PerBet[b]; ok && p.Offers(b) && s <= MaxStake && s > limit {
			vs.add(b, RuleSpotLimit, "stake %d is above the spot's limit of %d", s, limit)
		}
	}
	if total < lim.MinTotal {
		vs.add("", RuleBelowMinimum, "total stake %d is below the table minimum of %d", total, lim.MinTotal)
	}
	if lim.MaxTotal > 0 && total > lim.MaxTotal {
		vs.add("", RuleAboveMaximum, "total stake %d is above the table maximum of %d", total, lim.MaxTotal)
	}
	// Non-positive stakes are already refused; they count as no bet here so
	// that one mistake is not reported under several rules.
	pos := func(b Bet) int64 { return max(st[b], 0) }
	if lim.NoOpposingMain && pos(BetPlayer) > 0 && pos(BetBanker) > 0 {
		vs.add("", RuleOpposingMain, "player and banker may not be bet together")
	}
	main := satAdd(satAdd(pos(BetPlayer), pos(BetBanker)), pos(BetTie))
	need := satMul(lim.SideBetMinMainMultiple, lim.MinTotal)
	share := lim.SideBetMaxMainShare
	for _, b := range p.order(st) {
		s := pos(b)
		if s == 0 || !p.Offers(b) || !isRestricted(lim, b) {
			continue
		}
		if lim.SideBetMinMainMultiple > 0 && main < need {
			vs.add(b, RuleSideBetMain, "side bet needs main bets of at least %d (%d x the table minimum), have %d",
				need, lim.SideBetMinMainMultiple, main)
		}
		// s > main*Num/Den, compared exactly as s*Den > main*Num.
		if !share.IsZero() && cmpProducts(s, share.Den, main, share.Num) > 0 {
			vs.add(b, RuleSideBetShare, "stake %d is above the allowed share (%s) of the main bets (%d)", s, share, main)
		}
	}
	return vs.err()
}

func isRestricted(l *Limits, b Bet) bool {
	for _, r := range l.RestrictedSideBets {
		if r == b {
			return true
		}
	}
	return false
}

// satMul multiplies non-negative amounts, stopping at the int64 maximum.
func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(lo)
}

// cmpProducts compares a*b with c*d exactly, for non-negative operands.
func cmpProducts(a, b, c, d int64) int {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	switch {
	case h1 != h2:
		if h1 < h2 {
			return -1
		}
		return 1
	case l1 < l2:
		return -1
	case l1 > l2:
		return 1
	}
	return 0
}
