package coup

import (
	"errors"
	"fmt"
	"slices"
)

// ErrShortShoe reports a shoe with too few cards left to analyse a coup.
var ErrShortShoe = errors.New("too few cards left in the shoe")

// CoupCards is the most cards one coup can take from the shoe.
const CoupCards = 6

// Analysis is the exact analysis of the next coup dealt from a shoe: how many
// ordered draws of six cards end in each result, and what each bet spot of a
// rule profile is worth.
//
// Every count is over all n(n-1)(n-2)(n-3)(n-4)(n-5) ordered draws of six of
// the n cards left, even when the coup ends on four or five cards: the cards
// after it are counted as drawn all the same. That is how the published
// combinatorial analyses count, so a fresh shoe reproduces their figures
// digit for digit, and every probability is a count over Total.
type Analysis struct {
	// Decks is the number of decks the shoe was made of.
	Decks int
	// CardsRemaining is the number of cards left in the shoe.
	CardsRemaining int
	// Total is the number of ordered draws of six cards.
	Total uint64
	// Player, Banker and Tie count the draws each side wins, or that tie.
	Player, Banker, Tie uint64
	// Points[p][b] counts the draws that end with Player on p and Banker on b.
	Points [10][10]uint64
	// Bets holds one entry for each spot the profile offers, in its order.
	Bets []BetOdds
}

// BetOdds is one bet spot's exact odds.
type BetOdds struct {
	Bet Bet
	// Win, Push and Lose count the draws on which the spot wins, is returned
	// or loses; they sum to the analysis' Total.
	Win, Push, Lose uint64
	// Wins splits Win by payout ratio, best paid first. It is empty for a
	// spot that is not Priced.
	Wins []RatioCount
	// Priced is false for a spot whose pay table is not configured (seed
	// 001's winning number): it still has Win and PWin, but no EV, since
	// nobody knows what it pays.
	Priced bool
	// PWin and PPush are the probabilities of a win and of a push.
	PWin, PPush float64
	// EV is the expected value per unit staked: each win's ratio, zero for
	// a push and -1 for a loss, weighted by probability. The house edge is
	// -EV. Zero when not Priced.
	EV float64
}

// RatioCount is how many draws win at one payout ratio.
type RatioCount struct {
	Pays  Ratio
	Count uint64
}

// HouseEdge is the house's expected gain per unit staked, -EV.
func (b BetOdds) HouseEdge() float64 { return -b.EV }

// Odds returns the odds of spot b, if the profile analysed offers it.
func (a *Analysis) Odds(b Bet) (BetOdds, bool) {
	for _, o := range a.Bets {
		if o.Bet == b {
			return o, true
		}
	}
	return BetOdds{}, false
}

// Analyze gives the exact odds of the next coup dealt from what remains in s,
// for every bet spot p offers. Each spot is settled by p's own pay table
// (PayTable.Outcome), the same code that settles real coups. A winning-number
// spot with no configured ratio gets its probability of winning and no EV.
//
// It counts by rank and point value, not card by card, and so takes a few
// milliseconds whatever the composition: fast enough to run after every coup.
func Analyze(s *Shoe, p *Profile) (Analysis, error) {
	if s == nil || p == nil {
		return Analysis{}, errors.New("analyze: nil shoe or profile")
	}
	c := newOddsComp(s.Counts())
	if c.n < CoupCards {
		return Analysis{}, fmt.Errorf("%w: %d left, a coup may need %d", ErrShortShoe, c.n, CoupCards)
	}
	a := Analysis{Decks: s.Decks(), CardsRemaining: int(c.n), Total: falling(c.n, CoupCards)}

	var classes [classCount]uint64
	c.count(&classes)

	// Each spot is settled through the pay table; a winning number that
	// has no ratio yet would always lose there, so it is asked of a copy
	// that pays 1:1, to learn when it wins, and is left unpriced.
	bets := make([]BetOdds, len(p.Bets))
	tables := make([]*PayTable, len(p.Bets))
	probe := p.Pays
	for i, b := range p.Bets {
		bets[i] = BetOdds{Bet: b, Priced: true}
		tables[i] = &p.Pays
		if n, ok := b.WinningNumber(); ok && p.Pays.WinningNumber[n].IsZero() {
			probe.WinningNumber[n] = R(1, 1)
			tables[i] = &probe
			bets[i].Priced = false
		}
	}

	var sum uint64
	for k, w := range classes {
		if w == 0 {
			continue
		}
		sum += w
		r := classResult(k)
		a.Points[r.PlayerPoint][r.BankerPoint] += w
		switch r.Winner {
		case SidePlayer:
			a.Player += w
		case SideBanker:
			a.Banker += w
		default:
			a.Tie += w
		}
		for i := range bets {
			o := tables[i].Outcome(bets[i].Bet, r)
			bets[i].add(o, w)
		}
	}
	if sum != a.Total {
		// Cannot happen while the counting below is right; say so rather
		// than publish wrong odds.
		return Analysis{}, fmt.Errorf("analyze: counted %d draws of %d (internal error)", sum, a.Total)
	}
	for i := range bets {
		bets[i].finish(a.Total)
	}
	a.Bets = bets
	return a, nil
}

// add counts w draws with outcome o.
func (b *BetOdds) add(o Outcome, w uint64) {
	switch o.Kind {
	case Win:
		b.Win += w
		if !b.Priced {
			return
		}
		for i := range b.Wins {
			if b.Wins[i].Pays == o.Pays {
				b.Wins[i].Count += w
				return
			}
		}
		b.Wins = append(b.Wins, RatioCount{Pays: o.Pays, Count: w})
	case Push:
		b.Push += w
	default:
		b.Lose += w
	}
}

// finish turns the counts into probabilities and the expected value.
func (b *BetOdds) finish(total uint64) {
	t := float64(total)
	b.PWin = float64(b.Win) / t
	b.PPush = float64(b.Push) / t
	slices.SortFunc(b.Wins, func(x, y RatioCount) int {
		// Descending by ratio: compare x.Num/x.Den with y.Num/y.Den.
		l, r := x.Pays.Num*y.Pays.Den, y.Pays.Num*x.Pays.Den
		switch {
		case l > r:
			return -1
		case l < r:
			return 1
		}
		return 0
	})
	if !b.Priced {
		return
	}
	// Counts stay below 2^53 for an 8-deck shoe, so each is exact as a
	// float; only the ratios and the sum round. The explicit conversion
	// keeps the compiler from fusing multiply and add (it may on arm64),
	// so every platform prints the same digits.
	ev := -float64(b.Lose)
	for _, w := range b.Wins {
		ev += float64(float64(w.Count) * w.Pays.Float())
	}
	b.EV = ev / t
}

// falling is n(n-1)...(n-k+1), or 0 when n < k.
func falling(n int64, k int) uint64 {
	if n < int64(k) {
		return 0
	}
	f := uint64(1)
	for i := range k {
		f *= uint64(n - int64(i))
	}
	return f
}

// A result class is everything a pay table can ask of a coup's result: both
// final points, which hands are naturals, and each hand's pair state. All
// draws of one class settle every spot alike, so the counting below works in
// classes and each class is settled once.
const (
	pairNone    = iota // first two cards of different ranks
	pairRank           // a pair, but not a perfect one
	pairPerfect        // two identical cards
	pairStates

	// classCount is 10 Player points x 10 Banker points x 4 natural
	// states x 3 x 3 pair states.
	classCount = 10 * 10 * 4 * pairStates * pairStates
)

// classKey numbers a result class. nat has bit 0 for a Player natural and
// bit 1 for a Banker one; pairs is playerPair*pairStates + bankerPair.
func classKey(player, banker, nat, pairs int) int {
	return ((player*10+banker)*4+nat)*pairStates*pairStates + pairs
}

// classResult is a Result for class k with every field a pay table reads;
// it has no cards, since a class stands for many.
func classResult(k int) Result {
	pairs := k % (pairStates * pairStates)
	k /= pairStates * pairStates
	nat := k % 4
	k /= 4
	pp, bp := pairs/pairStates, pairs%pairStates
	r := Result{
		PlayerPoint:       k / 10,
		BankerPoint:       k % 10,
		PlayerNatural:     nat&1 != 0,
		BankerNatural:     nat&2 != 0,
		PlayerPair:        pp != pairNone,
		BankerPair:        bp != pairNone,
		PlayerPerfectPair: pp == pairPerfect,
		BankerPerfectPair: bp == pairPerfect,
	}
	r.decide()
	return r
}

// oddsComp is a shoe's composition arranged for counting. Rank indices are
// Rank-1 (0 = ace ... 12 = king).
type oddsComp struct {
	n     int64     // cards left
	rank  [13]int64 // cards left of each rank
	point [10]int64 // cards left of each point value
	// Per rank, over its four suits with k cards left of each:
	d2  [13]int64 // sum k(k-1): ordered draws of two identical cards
	d22 [13]int64 // sum (k(k-1))^2
	d4  [13]int64 // sum k(k-1)(k-2)(k-3): four identical cards
}

// pointRanks lists the rank indices worth each point value: ten, jack,
// queen and king are all worth zero.
var pointRanks = [10][]int{{9, 10, 11, 12}, {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}}

func newOddsComp(counts [CardCount]uint16) *oddsComp {
	c := &oddsComp{}
	for i, k16 := range counts {
		k := int64(k16)
		card := CardAt(i)
		r := int(card.Rank) - 1
		c.n += k
		c.rank[r] += k
		c.point[card.Points()] += k
		d := k * (k - 1)
		c.d2[r] += d
		c.d22[r] += d * d
		c.d4[r] += d * (k - 2) * (k - 3)
	}
	return c
}

// count adds the number of ordered six-card draws of each result class to
// classes.
//
// It runs over the point values of the first four cards (Player, Banker,
// Player, Banker): they fix both two-card points and hence the tableau. For
// each, it weighs the ways to draw four such cards by the pair state of
// each hand (ranks within the zero-point class; suits for perfect pairs),
// and, once, the ways the fifth and sixth cards end the coup, which depend
// only on point values. Their products are the class counts.
//
// Swapping cards 1 and 3 of a draw, or 2 and 4, leaves both hands as they
// were, so it maps the draws of one start onto those of the swapped start
// result for result: only starts with a1 <= a3 and a2 <= a4 are counted,
// each standing for its swaps too.
func (c *oddsComp) count(classes *[classCount]uint64) {
	pt := c.point
	n4 := c.n - 4
	// The tail of the coup for one start: final points and draws of cards
	// five and six. At most 10 x 10 entries.
	var tailP, tailB [100]int
	var tailW [100]uint64
	for a1 := range 10 {
		if pt[a1] == 0 {
			continue
		}
		pt[a1]--
		for a3 := a1; a3 < 10; a3++ {
			if pt[a3] == 0 {
				continue
			}
			pt[a3]--
			for a2 := range 10 {
				if pt[a2] == 0 {
					continue
				}
				pt[a2]--
				for a4 := a2; a4 < 10; a4++ {
					if pt[a4] == 0 {
						continue
					}
					pt[a4]--

					w, ok := c.firstFour(a1, a2, a3, a4)
					if ok {
						swaps := uint64(1)
						if a1 != a3 {
							swaps *= 2
						}
						if a2 != a4 {
							swaps *= 2
						}
						p2, b2 := (a1+a3)%10, (a2+a4)%10
						nat := 0
						if IsNatural(p2) {
							nat |= 1
						}
						if IsNatural(b2) {
							nat |= 2
						}
						nt := tail(&pt, n4, p2, b2, &tailP, &tailB, &tailW)
						for s, ws := range w {
							if ws == 0 {
								continue
							}
							ws *= swaps
							for i := range nt {
								classes[classKey(tailP[i], tailB[i], nat, s)] += ws * tailW[i]
							}
						}
					}

					pt[a4]++
				}
				pt[a2]++
			}
			pt[a3]++
		}
		pt[a1]++
	}
}

// tail lists how a coup whose two-card points are p2 and b2 ends, given the
// point values m left after the first four cards (n of them): each entry is
// final points and the ordered draws of cards five and six that reach them.
// It returns the number of entries.
func tail(m *[10]int64, n int64, p2, b2 int, tp, tb *[100]int, tw *[100]uint64) int {
	k := 0
	put := func(p, b int, w int64) {
		if w > 0 {
			tp[k], tb[k], tw[k] = p, b, uint64(w)
			k++
		}
	}
	switch {
	case IsNatural(p2) || IsNatural(b2):
		put(p2, b2, n*(n-1))
	case PlayerDraws(p2):
		for v := range 10 {
			mv := m[v]
			if mv == 0 {
				continue
			}
			p3 := (p2 + v) % 10
			if !BankerDraws(b2, v) {
				put(p3, b2, mv*(n-1))
				continue
			}
			m[v]--
			for u := range 10 {
				put(p3, (b2+u)%10, mv*m[u])
			}
			m[v]++
		}
	case BankerDraws(b2, -1):
		for u := range 10 {
			put(p2, (b2+u)%10, m[u]*(n-1))
		}
	default:
		put(p2, b2, n*(n-1))
	}
	return k
}

// firstFour weighs the ordered draws of four cards with point values a1..a4
// (Player, Banker, Player, Banker) by pair state: w[pp*pairStates+bp] for
// Player's pair state pp and Banker's bp. ok reports a non-zero weight.
func (c *oddsComp) firstFour(a1, a2, a3, a4 int) (w [pairStates * pairStates]uint64, ok bool) {
	for _, r1 := range pointRanks[a1] {
		for _, r2 := range pointRanks[a2] {
			for _, r3 := range pointRanks[a3] {
				for _, r4 := range pointRanks[a4] {
					if c.ranksFour(r1, r2, r3, r4, &w) {
						ok = true
					}
				}
			}
		}
	}
	return w, ok
}

// ranksFour adds to w the ordered draws of four cards of ranks r1..r4, split
// by pair state, and reports whether there were any.
//
// A pair is r1 == r3 (Player) or r2 == r4 (Banker). Whether it is perfect
// depends on suits: among the k(k-1) ordered draws of two cards of one rank,
// d2 = sum over suits of k_s(k_s-1) are two identical cards.
func (c *oddsComp) ranksFour(r1, r2, r3, r4 int, w *[pairStates * pairStates]uint64) bool {
	// All ordered draws with these ranks: each card from what its rank has
	// left once the earlier cards of the same rank are out.
	f1 := c.rank[r1]
	f2 := c.rank[r2] - eq(r2, r1)
	f3 := c.rank[r3] - eq(r3, r1) - eq(r3, r2)
	f4 := c.rank[r4] - eq(r4, r1) - eq(r4, r2) - eq(r4, r3)
	if f1 <= 0 || f2 <= 0 || f3 <= 0 || f4 <= 0 {
		return false // the shoe has not enough of these ranks
	}
	t := f1 * f2 * f3 * f4
	const ps = pairStates
	switch p, b := r1 == r3, r2 == r4; {
	case !p && !b:
		w[pairNone*ps+pairNone] += uint64(t)
	case p && !b:
		// Cards 1 and 3 identical, then cards 2 and 4 (of different ranks)
		// from what is left.
		perfect := c.d2[r1] * (c.rank[r2] - 2*eq(r2, r1)) * (c.rank[r4] - 2*eq(r4, r1))
		w[pairPerfect*ps+pairNone] += uint64(perfect)
		w[pairRank*ps+pairNone] += uint64(t - perfect)
	case !p && b:
		perfect := c.d2[r2] * (c.rank[r1] - 2*eq(r1, r2)) * (c.rank[r3] - 2*eq(r3, r2))
		w[pairNone*ps+pairPerfect] += uint64(perfect)
		w[pairNone*ps+pairRank] += uint64(t - perfect)
	case r1 != r2:
		// Two pairs of different ranks: independent.
		pt, pp := c.rank[r1]*(c.rank[r1]-1), c.d2[r1]
		bt, bp := c.rank[r2]*(c.rank[r2]-1), c.d2[r2]
		w[pairPerfect*ps+pairPerfect] += uint64(pp * bp)
		w[pairPerfect*ps+pairRank] += uint64(pp * (bt - bp))
		w[pairRank*ps+pairPerfect] += uint64((pt - pp) * bp)
		w[pairRank*ps+pairRank] += uint64((pt - pp) * (bt - bp))
	default:
		// Four cards of one rank. one: cards 1 and 3 identical, 2 and 4
		// any (the same for Banker, by symmetry). both: two identical
		// pairs, of different suits or all four of one suit.
		k := c.rank[r1]
		one := c.d2[r1] * (k - 2) * (k - 3)
		both := c.d2[r1]*c.d2[r1] - c.d22[r1] + c.d4[r1]
		w[pairPerfect*ps+pairPerfect] += uint64(both)
		w[pairPerfect*ps+pairRank] += uint64(one - both)
		w[pairRank*ps+pairPerfect] += uint64(one - both)
		w[pairRank*ps+pairRank] += uint64(t - 2*one + both)
	}
	return true
}

// eq is 1 when a == b, else 0.
func eq(a, b int) int64 {
	if a == b {
		return 1
	}
	return 0
}
