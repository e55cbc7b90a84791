package coup

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestLog2Bounds: the integer logarithm is never above the true one and
// log2Ceil never below, within the slack; powers of two are exact.
func TestLog2Bounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	check := func(n uint64) {
		t.Helper()
		want := math.Log2(float64(n)) * logOne
		lo, hi := float64(log2Floor(n)), float64(log2Ceil(n))
		// A float's own error is far below one unit; allow it.
		if lo > want+1e-6 || hi < want-1e-6 || hi-lo != log2Slack || want-lo > log2Slack {
			t.Fatalf("log2(%d) = %.3f units: floor %v, ceil %v", n, want, lo, hi)
		}
	}
	for n := uint64(1); n < 70_000; n++ {
		check(n)
	}
	for range 200_000 {
		check(r.Uint64()>>r.IntN(63) | 1)
	}
	for k := range 63 {
		if got := log2Floor(1 << k); got != int64(k)<<16 {
			t.Fatalf("log2(2^%d) = %d units, want exactly %d", k, got, k<<16)
		}
	}
	if got := log2Ratio(1, 2); got > -logOne || got < -logOne-log2Slack {
		t.Fatalf("log2(1/2) = %d units", got)
	}
}

// TestFalseAlarmBudgets: the run length and the score threshold are the
// ones the false-alarm bounds of docs/game-protection.md give.
func TestFalseAlarmBudgets(t *testing.T) {
	if got := RepeatRun(ShoeMemory*MaxPrint, repeatAlpha); got != RepeatRunLen {
		t.Errorf("RepeatRun(%d shoes) = %d, RepeatRunLen is %d", ShoeMemory, got, RepeatRunLen)
	}
	fa := RepeatFalseAlarm(RepeatRunLen, ShoeMemory*MaxPrint)
	if fa > repeatAlpha || RepeatFalseAlarm(RepeatRunLen-1, ShoeMemory*MaxPrint) <= repeatAlpha {
		t.Errorf("a run of %d: bound %.3g (budget %.3g)", RepeatRunLen, fa, repeatAlpha)
	}
	order := float64(orderModelCount) * MaxPrint * math.Exp2(-float64(orderThreshold)/logOne)
	if order > 1.0/orderAlphaInverse {
		t.Errorf("ordered: bound %.3g, budget %.3g", order, 1.0/orderAlphaInverse)
	}
	t.Logf("false alarms a shoe at most: repeated %.3g, ordered %.3g (threshold %.2f bits), in all %.3g: one in %.2g shoes",
		fa, order, float64(orderThreshold)/logOne, fa+order, 1/(fa+order))
	if fa+order > 4e-7 {
		t.Errorf("in all %.3g a shoe; docs/game-protection.md says under 4e-7", fa+order)
	}
}

func TestPrintRoundTrip(t *testing.T) {
	p := []uint8{0, 51, PrintUnread, 17}
	s := FormatPrint(p)
	if s != "AS"+CardAt(51).String()+"??"+CardAt(17).String() {
		t.Fatalf("FormatPrint = %q", s)
	}
	back, err := ParsePrint(s)
	if err != nil || !slices.Equal(back, p) {
		t.Fatalf("ParsePrint(%q) = %v, %v", s, back, err)
	}
	for _, bad := range []string{"A", "AS2", "XX", "as", "1S", strings.Repeat("AS", MaxPrint+1)} {
		if _, err := ParsePrint(bad); err == nil {
			t.Errorf("ParsePrint(%.20q) took it", bad)
		}
	}
}

// FuzzParsePrint: prints come back from snapshots and the floor's
// database: no text panics, and what parses formats back to itself.
func FuzzParsePrint(f *testing.F) {
	f.Add("AS9HTD??KC")
	f.Add("")
	f.Add("??")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrint(s)
		if err != nil {
			return
		}
		if FormatPrint(p) != s {
			t.Fatalf("%q parses to %v, which formats to %q", s, p, FormatPrint(p))
		}
	})
}

// longestRun is the most cards matched by a run ending at shoe's last
// card that appears in p forwards or backwards, unread cards passed over
// (not counted): brute force.
func longestRun(shoe, p []uint8) (n int) {
	i := len(shoe) - 1
	if shoe[i] == PrintUnread {
		return 0
	}
	for j := range p {
		for _, back := range []bool{false, true} {
			k, matched := 0, 0
			for i-k >= 0 {
				q := j - k
				if back {
					q = j + k
				}
				if q < 0 || q >= len(p) || shoe[i-k] != PrintUnread && p[q] != shoe[i-k] {
					break
				}
				if shoe[i-k] != PrintUnread {
					matched++
				}
				k++
			}
			n = max(n, matched)
		}
	}
	return n
}

// randomPrint is a fair 8-deck shoe's first n cards.
func randomPrint(r *rand.Rand, n int) []uint8 {
	p := make([]uint8, 0, MaxPrint)
	for range 8 {
		for c := range CardCount {
			p = append(p, uint8(c))
		}
	}
	r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p[:n]
}

// TestRunWatchFindsRuns is the index and the watch against brute force:
// shoes made of fair stretches and stretches copied from the prints,
// forwards and backwards, with unread cards here and there; at every card
// the watch reports no run longer than there is, and every run of
// MinRepeatRun cards or more, where it starts in the shoe and the print.
func TestRunWatchFindsRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := range 40 {
		x := NewPrintIndex()
		var prints [][]uint8
		ids := map[int]int{}
		for k := range 6 {
			p := randomPrint(r, 300+r.IntN(116))
			ids[x.Add(p)] = k
			prints = append(prints, p)
		}
		// Remove and add one, so numbers are reused.
		x.Remove(2)
		prints[2] = randomPrint(r, 380)
		if id := x.Add(prints[2]); id != 2 {
			t.Fatalf("Add after Remove gave %d, want 2", id)
		}
		var shoe []uint8
		for len(shoe) < 400 {
			switch r.IntN(3) {
			case 0:
				shoe = append(shoe, randomPrint(r, 1+r.IntN(20))...)
			default:
				p := prints[r.IntN(len(prints))]
				n := 3 + r.IntN(25)
				at := r.IntN(len(p) - n)
				run := slices.Clone(p[at : at+n])
				if r.IntN(2) == 0 {
					slices.Reverse(run)
				}
				shoe = append(shoe, run...)
			}
			if r.IntN(10) == 0 {
				shoe = append(shoe, PrintUnread)
			}
		}
		var w RunWatch
		for i := range shoe {
			got := w.Card(x, shoe[:i+1], -1)
			if shoe[i] == PrintUnread {
				continue // the runs pass over it; the next card judges them
			}
			want := 0
			for _, p := range prints {
				want = max(want, longestRun(shoe[:i+1], p))
			}
			if got.Len > want || want >= MinRepeatRun && got.Len < want {
				t.Fatalf("trial %d card %d: the watch says a run of %d, there is one of %d", trial, i, got.Len, want)
			}
			if got.Len == 0 {
				continue
			}
			p := x.Print(got.Print)
			for k := range i + 1 - got.From {
				q := got.At + k
				if got.Backwards {
					q = got.At - k
				}
				if shoe[got.From+k] != PrintUnread && (q < 0 || q >= len(p) || p[q] != shoe[got.From+k]) {
					t.Fatalf("trial %d card %d: run %+v: card %d of the run is not the print's %d", trial, i, got, k, q)
				}
			}
		}
	}
}

// TestPrintIndexRemove: what is removed is found no more, what stays is,
// however the probe runs wrapped round the table.
func TestPrintIndexRemove(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	x := NewPrintIndex()
	var live []int
	prints := map[int][]uint8{}
	for step := range 300 {
		if len(live) > 0 && r.IntN(3) == 0 {
			k := r.IntN(len(live))
			x.Remove(live[k])
			delete(prints, live[k])
			live = slices.Delete(live, k, k+1)
		} else {
			p := randomPrint(r, 50+r.IntN(100))
			id := x.Add(p)
			prints[id] = p
			live = append(live, id)
		}
		cards := 0
		for _, p := range prints {
			cards += len(p)
		}
		if x.Cards() != cards || x.Len() != len(live) {
			t.Fatalf("step %d: index holds %d prints of %d cards, want %d of %d", step, x.Len(), x.Cards(), len(live), cards)
		}
		entries := 0
		for _, e := range x.slots {
			if e != 0 {
				entries++
				if _, ok := prints[int(e>>9)&(1<<36-1)]; !ok {
					t.Fatalf("step %d: an entry of a removed print is left", step)
				}
			}
		}
		if entries != x.entries {
			t.Fatalf("step %d: %d entries, the index counts %d", step, entries, x.entries)
		}
	}
	// Every live print's every key is found.
	for id, p := range prints {
		for j := 0; j+printGram <= len(p); j += printStride {
			var w RunWatch
			got := w.Card(x, p[:j+printGram], -1)
			if got.Len < printGram {
				t.Fatalf("print %d place %d: its key is not found", id, j)
			}
		}
	}
}

// dealCheck feeds a shoe to a check and returns the card (from 1) of its first
// alarm and why, or 0.
func dealCheck(c *ShuffleCheck, shoe []Card) (int, string) {
	c.NewShoe(8)
	for i, card := range shoe {
		if why := c.Card(card); why != "" {
			return i + 1, why
		}
	}
	return 0, ""
}

func shoeOf(r *rand.Rand) []Card {
	var cards []Card
	for range 8 {
		for i := range CardCount {
			cards = append(cards, CardAt(i))
		}
	}
	r.Shuffle(len(cards), func(i, j int) { cards[i], cards[j] = cards[j], cards[i] })
	return cards
}

// TestShuffleCheckSigns: each sign on a shoe made for it, and what it
// says; fair shoes dealt one after another raise nothing. The figures
// over millions of shoes are tablectl-bench shuffle's
// (docs/game-protection.md).
func TestShuffleCheckSigns(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	var c ShuffleCheck
	shoes := 300
	if testing.Short() {
		shoes = 40
	}
	var last [][]Card
	for i := range shoes {
		s := shoeOf(r)[:400]
		if n, why := dealCheck(&c, s); n != 0 {
			t.Fatalf("fair shoe %d: alarm at card %d: %s", i, n, why)
		}
		last = append(last, s)
	}
	cut := func(s []Card, at int) []Card { return append(slices.Clone(s[at:]), s[:at]...) }
	reversed := slices.Clone(last[len(last)-1])
	slices.Reverse(reversed)
	prev := last[len(last)-1]
	for _, tc := range []struct {
		name   string
		shoe   []Card
		within int
		says   string
	}{
		// Each shoe dealt here goes into the memory too: the oldest first.
		{"the shoe 24 before cut 37 on", cut(last[len(last)-ShoeMemory], 37), RepeatRunLen, "of the shoe 24 before this one"},
		{"the shoe two before cut 100 on", cut(prev, 100), RepeatRunLen, "repeat 8 cards in a row of the shoe 2 before this one, its cards 101 to 108 in the same order"},
		{"the shoe three before's discards in reverse", reversed, RepeatRunLen, "its cards 400 to 393 in reverse order"},
	} {
		n, why := dealCheck(&c, tc.shoe)
		if n == 0 || n > tc.within || !strings.Contains(why, tc.says) {
			t.Errorf("%s: alarm at card %d (want within %d): %q, want it to say %q", tc.name, n, tc.within, why, tc.says)
		}
	}
	var deck []Card
	for _, s := range []Suit{Spades, Diamonds, Clubs, Hearts} {
		for k := range 13 {
			deck = append(deck, Card{Rank: Rank(k + 1), Suit: s})
		}
	}
	sorted := slices.Concat(deck, deck, deck, deck, deck, deck, deck, deck)
	if n, why := dealCheck(&c, cut(sorted, 200)); n == 0 || n > 12 || !strings.Contains(why, "as in a new deck") {
		t.Errorf("new-deck order: alarm at card %d (want within 12): %q", n, why)
	}
	// One new deck in the middle of a fair shoe: caught where it is.
	mixed := slices.Concat(shoeOf(r)[:150], deck, shoeOf(r)[:150])
	if n, why := dealCheck(&c, mixed); n <= 150 || n > 150+15 {
		t.Errorf("a new deck at card 151: alarm at card %d: %q", n, why)
	}
	// One riffle of new decks: long stretches of one packet are new-deck
	// order too, so either statistic may be first.
	rr := rand.New(rand.NewPCG(13, 13))
	a, b := sorted[:200], sorted[200:]
	var riffled []Card
	for len(a) > 0 || len(b) > 0 {
		if rr.IntN(len(a)+len(b)) < len(a) {
			riffled, a = append(riffled, a[0]), a[1:]
		} else {
			riffled, b = append(riffled, b[0]), b[1:]
		}
	}
	if n, why := dealCheck(&c, riffled); n == 0 || n > 40 || !strings.Contains(why, "new deck") {
		t.Errorf("one riffle of new decks: alarm at card %d: %q", n, why)
	}
}

// TestShuffleCheckUnread: an unread card neither breaks a repeated run
// nor counts in it.
func TestShuffleCheckUnread(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	var c ShuffleCheck
	prev := shoeOf(r)[:400]
	dealCheck(&c, prev)
	c.NewShoe(8)
	for i, card := range prev[50:] {
		var why string
		if i == 4 {
			why = c.Unread()
		} else {
			why = c.Card(card)
		}
		if why != "" {
			if i != RepeatRunLen || !strings.Contains(why, "cards 1 to 9 repeat 8 cards") {
				t.Fatalf("alarm at card %d: %q; want at card %d, the unread one not counted", i+1, why, RepeatRunLen+1)
			}
			return
		}
	}
	t.Fatal("no alarm")
}
