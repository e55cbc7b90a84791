package coup

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// ErrResult reports a result that cannot be settled: not a complete coup the
// tableau would deal, or one whose fields disagree with its cards.
var ErrResult = errors.New("result cannot be settled")

// Line is the settlement of one bet.
type Line struct {
	Bet   Bet   `json:"bet"`
	Stake int64 `json:"stake"`
	// Outcome is what the spot did: win (at Pays), lose or push.
	Outcome
	// Winnings is what is paid on top of the returned stake on a win, after
	// any MaxWin cap; 0 otherwise.
	Winnings int64 `json:"winnings"`
	// Withheld is what the MaxWin cap took from this line's winnings.
	Withheld int64 `json:"withheld,omitzero"`
	// Payout is what goes back to the player: stake plus winnings on a win,
	// the stake on a push, nothing on a loss.
	Payout int64 `json:"payout"`
}

// Settlement is one player's bets on one coup, settled. All amounts are
// integer minor units, and the totals are the sums of the lines.
type Settlement struct {
	Profile  string `json:"profile"`
	Lines    []Line `json:"lines"`
	Staked   int64  `json:"staked"`
	Winnings int64  `json:"winnings"`
	Payout   int64  `json:"payout"`
	// Capped reports that the winnings reached the profile's MaxWin and
	// Withheld (above it) was not paid.
	Capped   bool  `json:"capped"`
	Withheld int64 `json:"withheld"`
}

// Net is the player's gain (or, negative, loss) on the coup.
func (s *Settlement) Net() int64 { return s.Payout - s.Staked }

// Settle settles one player's stakes on a complete coup under this profile,
// in integer minor units.
//
// A win pays stake*Num/Den rounded up, in the player's favour: on Banker at
// 19:20 that is exactly a 5% commission rounded down (seeds 000 and 002,
// "rounded in the player's favour"; 101 staked wins 96, not 95), and the
// same rule rounds no-commission's 1:2 Banker-on-six and any configured
// decimal ratio.
//
// MaxWin (seed 003's "Maximálna výhra", 126,250 EUR) caps the total
// winnings: what is paid on top of returned stakes, summed over winning bets
// without netting the losing ones, since that is what the seed calls a win
// and a returned stake is the player's own money, never withheld. The excess
// is withheld from lines in layout order, the first paid in full, so every
// line is an exact account and the lines sum to the totals.
//
// Settle refuses (with a *StakeError) what cannot be settled at all: a spot
// not offered, a stake not positive or above MaxStake, a winning number with
// no ratio. It does not apply the table limits again: those are for
// ValidateStakes when bets are taken, and a stake once accepted is settled.
// A voided coup is not settled here; its stakes are returned by the caller.
func (p *Profile) Settle(st Stakes, r Result) (Settlement, error) {
	if err := checkResult(r); err != nil {
		return Settlement{}, err
	}
	vs := violations{profile: p.Name}
	p.checkStakes(st, &vs)
	if err := vs.err(); err != nil {
		return Settlement{}, err
	}
	s := Settlement{Profile: p.Name, Lines: make([]Line, 0, len(st))}
	var ok bool
	for _, b := range p.order(st) {
		l := Line{Bet: b, Stake: st[b], Outcome: p.Pays.Outcome(b, r)}
		if l.Kind == Win {
			w, err := winningsAt(l.Stake, l.Pays)
			if err != nil {
				return Settlement{}, fmt.Errorf("%w %q: %s: %w", ErrProfile, clip(p.Name), b, err)
			}
			l.Winnings = w
			if s.Winnings, ok = addAmount(s.Winnings, w); !ok {
				return Settlement{}, fmt.Errorf("%w %q: winnings overflow", ErrProfile, clip(p.Name))
			}
		}
		s.Staked += l.Stake // checkStakes bounds the total by MaxStake
		s.Lines = append(s.Lines, l)
	}
	if limit := p.Limits.MaxWin; limit > 0 && s.Winnings > limit {
		s.Capped, s.Withheld, s.Winnings = true, s.Winnings-limit, limit
		left := limit
		for i := range s.Lines {
			l := &s.Lines[i]
			if l.Winnings > left {
				l.Withheld, l.Winnings = l.Winnings-left, left
			}
			left -= l.Winnings
		}
	}
	for i := range s.Lines {
		l := &s.Lines[i]
		switch l.Kind {
		case Win:
			if l.Payout, ok = addAmount(l.Stake, l.Winnings); !ok {
				return Settlement{}, fmt.Errorf("%w %q: %s: payout overflows", ErrProfile, clip(p.Name), l.Bet)
			}
		case Push:
			l.Payout = l.Stake
		}
		if s.Payout, ok = addAmount(s.Payout, l.Payout); !ok {
			return Settlement{}, fmt.Errorf("%w %q: payout overflows", ErrProfile, clip(p.Name))
		}
	}
	return s, nil
}

// winningsAt is stake*r rounded up, computed in 128 bits so that nothing
// overflows unseen.
func winningsAt(stake int64, r Ratio) (int64, error) {
	if r.Num <= 0 || r.Den <= 0 {
		return 0, fmt.Errorf("win at invalid ratio %d:%d", r.Num, r.Den)
	}
	hi, lo := bits.Mul64(uint64(stake), uint64(r.Num))
	den := uint64(r.Den)
	if hi >= den { // the quotient would not fit 64 bits
		return 0, fmt.Errorf("winnings of %d at %s overflow", stake, r)
	}
	q, rem := bits.Div64(hi, lo, den)
	if q >= 1<<63-1 {
		return 0, fmt.Errorf("winnings of %d at %s overflow", stake, r)
	}
	if rem != 0 {
		q++
	}
	return int64(q), nil
}

// addAmount is a+b for non-negative amounts, reporting overflow.
func addAmount(a, b int64) (int64, bool) {
	s := a + b
	return s, s >= a
}

// checkResult makes sure r is a complete coup as the tableau deals it and
// that every field it is settled on agrees with its cards: settlement must
// never pay on a result that was built wrong or altered on the way.
func checkResult(r Result) error {
	np, nb := len(r.Player), len(r.Banker)
	if np < 2 || np > 3 || nb < 2 || nb > 3 {
		return fmt.Errorf("%w: hands of %d and %d cards are not a complete coup (a voided coup is not settled: return its stakes)", ErrResult, np, nb)
	}
	dealt := []Card{r.Player[0], r.Banker[0], r.Player[1], r.Banker[1]}
	if np == 3 {
		dealt = append(dealt, r.Player[2])
	}
	if nb == 3 {
		dealt = append(dealt, r.Banker[2])
	}
	want, err := Score(dealt)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrResult, err)
	}
	if !sameResult(r, want) {
		return fmt.Errorf("%w: result %q disagrees with its cards, which give %q", ErrResult, r.String(), want.String())
	}
	return nil
}

func sameResult(a, b Result) bool {
	return slices.Equal(a.Player, b.Player) && slices.Equal(a.Banker, b.Banker) &&
		a.PlayerPoint == b.PlayerPoint && a.BankerPoint == b.BankerPoint && a.Winner == b.Winner &&
		a.PlayerNatural == b.PlayerNatural && a.BankerNatural == b.BankerNatural &&
		a.PlayerPair == b.PlayerPair && a.BankerPair == b.BankerPair &&
		a.PlayerPerfectPair == b.PlayerPerfectPair && a.BankerPerfectPair == b.BankerPerfectPair &&
		a.Margin == b.Margin
}
