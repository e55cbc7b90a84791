package coup

import (
	"errors"
	"fmt"
	"testing"
)

// The seeds' Banker tables, transcribed as each book writes them, so the
// tests check the production tableau against the primary sources rather than
// against itself. Each maps Banker's two-card point to the values of
// Player's third card on which Banker draws.

// Seed 000 (Slovenian) and seed 002 (Italian): third-card values 0-9.
var seed000BankerDraws = map[int][]int{
	0: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	1: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	2: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	3: {0, 1, 2, 3, 4, 5, 6, 7, 9},
	4: {2, 3, 4, 5, 6, 7},
	5: {4, 5, 6, 7},
	6: {6, 7},
	7: {},
}

// Seed 001 (Serbian/English) writes the third card as 1..10, 10 standing for
// any zero-point card; 0-2 draw on anything ("BANKA ... 0,1,2" is implied by
// the Player rules' "draws" column).
var seed001BankerDraws = map[int][]int{
	3: {1, 2, 3, 4, 5, 6, 7, 9, 10},
	4: {2, 3, 4, 5, 6, 7},
	5: {4, 5, 6, 7},
	6: {6, 7},
}

// seed003Banker is seed 003's (Slovak) prose rule for Banker once Player drew.
func seed003Banker(b2, third int) bool {
	switch {
	case b2 <= 2:
		return true
	case b2 == 3:
		return third != 8
	case b2 == 4:
		return !(third == 0 || third == 1 || third == 8 || third == 9)
	case b2 == 5:
		return third >= 4 && third <= 7
	case b2 == 6:
		return third == 6 || third == 7
	}
	return false
}

// seed004Banker is seed 004's (German) rule for Banker once Player drew:
// "Banco bekommt nur dann eine dritte Karte, wenn Punto 2..7 ... bekommt".
func seed004Banker(b2, third int) bool {
	only := map[int][]int{4: {2, 3, 4, 5, 6, 7}, 5: {4, 5, 6, 7}, 6: {6, 7}}
	switch {
	case b2 <= 2:
		return true
	case b2 == 3:
		return third != 8
	case b2 >= 7:
		return false
	}
	return contains(only[b2], third)
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// oracle deals a coup from point values by seed 000's text, independently
// of the production code: it returns how many cards the coup takes given
// the values of cards 1-6 as they come.
func oracle(v [6]int) int {
	p2 := (v[0] + v[2]) % 10
	b2 := (v[1] + v[3]) % 10
	if p2 >= 8 || b2 >= 8 {
		return 4 // natural: "nobody draws"
	}
	if p2 <= 5 { // Player draws on 0-5
		third := v[4]
		if contains(seed000BankerDraws[b2], third) {
			return 6
		}
		return 5
	}
	// Player stands on 6-7: Banker draws on 0-5 (seed 000's second table).
	if b2 <= 5 {
		return 5
	}
	return 4
}

// TestSeedTablesAgree checks that the five rule books state one tableau.
func TestSeedTablesAgree(t *testing.T) {
	for b2 := 0; b2 <= 7; b2++ {
		for third := 0; third <= 9; third++ {
			want := contains(seed000BankerDraws[b2], third)
			s001 := third
			if s001 == 0 {
				s001 = 10
			}
			got001 := b2 <= 2 || contains(seed001BankerDraws[b2], s001)
			if got001 != want {
				t.Errorf("seed 001 disagrees with seed 000: banker %d, third %d", b2, third)
			}
			if seed003Banker(b2, third) != want {
				t.Errorf("seed 003 disagrees with seed 000: banker %d, third %d", b2, third)
			}
			if seed004Banker(b2, third) != want {
				t.Errorf("seed 004 disagrees with seed 000: banker %d, third %d", b2, third)
			}
		}
	}
}

// TestTableauWholeSpace runs every possible coup: every rank for each of up
// to six cards (13^6 sequences, reduced to the 13^4 first-four-card heads
// and the fifth and sixth cards each coup really takes), and checks the
// position Next gives for every prefix against the seed oracle, that a
// complete coup refuses one more card, and that Score agrees.
func TestTableauWholeSpace(t *testing.T) {
	ranks := make([]Card, 13)
	for i := range ranks {
		ranks[i] = Card{Rank: Rank(i + 1), Suit: Suit(i % 4)}
	}
	var coups [7]int // coups seen by length
	dealt := make([]Card, 0, 7)
	check := func(length int, v [6]int) {
		t.Helper()
		want := oracle(v)
		for n := 4; n <= length; n++ {
			pos, err := Next(dealt[:n])
			if err != nil {
				t.Fatalf("%s: Next after %d cards: %v", FormatCards(dealt[:n]), n, err)
			}
			var wantPos Position
			switch {
			case n == want:
				wantPos = Complete
			case n == 4 && want == 5 && (v[0]+v[2])%10 >= 6:
				wantPos = PositionBankerThird // Player stood, Banker draws
			case n == 4:
				wantPos = PositionPlayerThird
			case n == 5:
				wantPos = PositionBankerThird
			}
			if pos != wantPos {
				t.Fatalf("%s: after %d cards Next = %s, seeds say %s", FormatCards(dealt[:n]), n, pos, wantPos)
			}
		}
	}
	for a := range 13 {
		for b := range 13 {
			for c := range 13 {
				for d := range 13 {
					dealt = append(dealt[:0], ranks[a], ranks[b], ranks[c], ranks[d])
					for n, wantPos := range []Position{PositionPlayer, PositionBanker, PositionPlayer, PositionBanker} {
						if pos, err := Next(dealt[:n]); err != nil || pos != wantPos {
							t.Fatalf("%s: Next after %d = %s, %v; want %s", FormatCards(dealt[:n]), n, pos, err, wantPos)
						}
					}
					v := [6]int{ranks[a].Points(), ranks[b].Points(), ranks[c].Points(), ranks[d].Points()}
					head := oracle(v)
					if head == 4 {
						check(4, v)
						coupEnds(t, dealt, &coups)
						continue
					}
					for e := range 13 {
						dealt = append(dealt[:4], ranks[e])
						v[4] = ranks[e].Points()
						if oracle(v) == 5 {
							check(5, v)
							coupEnds(t, dealt, &coups)
							continue
						}
						for f := range 13 {
							dealt = append(dealt[:5], ranks[f])
							v[5] = ranks[f].Points()
							check(6, v)
							coupEnds(t, dealt, &coups)
						}
					}
				}
			}
		}
	}
	// Every rank sequence is one coup: 4-card coups take 13^4 heads, the rest
	// multiply out. The total must be the whole space of heads x tails.
	t.Logf("coups by length: 4:%d 5:%d 6:%d", coups[4], coups[5], coups[6])
	if coups[4] == 0 || coups[5] == 0 || coups[6] == 0 {
		t.Fatalf("space not covered: %v", coups)
	}
}

// coupEnds checks that a complete coup scores and refuses one more card.
func coupEnds(t *testing.T, dealt []Card, coups *[7]int) {
	t.Helper()
	coups[len(dealt)]++
	r, err := Score(dealt)
	if err != nil {
		t.Fatalf("%s: Score: %v", FormatCards(dealt), err)
	}
	if len(r.Player)+len(r.Banker) != len(dealt) {
		t.Fatalf("%s: hands %v %v lose cards", FormatCards(dealt), r.Player, r.Banker)
	}
	extra := append(dealt[:len(dealt):len(dealt)], Card{Rank: King, Suit: Spades})
	if _, err := Next(extra); !errors.Is(err, ErrExtraCard) {
		t.Fatalf("%s + KS: want ErrExtraCard, got %v", FormatCards(dealt), err)
	}
	if _, err := Score(extra); !errors.Is(err, ErrExtraCard) {
		t.Fatalf("Score(%s + KS): want ErrExtraCard, got %v", FormatCards(dealt), err)
	}
}

func mustCards(t testing.TB, s string) []Card {
	t.Helper()
	cs, err := ParseCards(s)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestScoreWorkedExamples are coups worked by hand from the seeds' rules.
func TestScoreWorkedExamples(t *testing.T) {
	tests := []struct {
		dealt            string
		winner           Side
		player, banker   int
		pNat, bNat       bool
		pPair, bPair     bool
		pPerfect, bPerf  bool
		margin           int
		playerC, bankerC string
	}{
		// Player natural 9 (9+K) against Banker 7: nobody draws.
		{dealt: "9S,7H,KD,KC", winner: SidePlayer, player: 9, banker: 7, pNat: true, margin: 2, playerC: "9S,KD", bankerC: "7H,KC"},
		// Player 6+7=3 draws a 5 -> 8; Banker 6+K=6 stands on a 5 -> Player 8-6.
		{dealt: "6S,6H,7D,KC,5H", winner: SidePlayer, player: 8, banker: 6, margin: 2, playerC: "6S,7D,5H", bankerC: "6H,KC"},
		// Player 4 (a pair of twos) draws an 8 -> 2; Banker 3 stands on an 8 -> Banker 3-2.
		{dealt: "2S,AH,2D,2C,8H", winner: SideBanker, player: 2, banker: 3, margin: 1, pPair: true, playerC: "2S,2D,8H", bankerC: "AH,2C"},
		// Player 7 stands; Banker 5 draws (Player stood) a 2 -> 7: tie 7-7.
		{dealt: "3S,2H,4D,3C,2H", winner: SideTie, player: 7, banker: 7, playerC: "3S,4D", bankerC: "2H,3C,2H"},
		// Pairs: Player 8S 8S (perfect), Banker QH QD (pair): Player natural 6? 8+8=16 -> 6; Banker 0.
		// Player 6 stands; Banker 0 draws (stood rule) a 9 -> 9. Banker 9-6.
		{dealt: "8S,QH,8S,QD,9C", winner: SideBanker, player: 6, banker: 9, pPair: true, bPair: true, pPerfect: true, margin: 3, playerC: "8S,8S", bankerC: "QH,QD,9C"},
		// Both natural, tie 8-8; Player's fours are a pair, not a perfect one.
		{dealt: "4S,5H,4H,3C", winner: SideTie, player: 8, banker: 8, pNat: true, bNat: true, pPair: true, playerC: "4S,4H", bankerC: "5H,3C"},
		// Banker 6 draws on Player's third 7: 5 (A+4) draws 7 -> 2; Banker 6 draws K -> 6. Banker 6-2.
		{dealt: "AS,6H,4D,KC,7S,KH", winner: SideBanker, player: 2, banker: 6, margin: 4, playerC: "AS,4D,7S", bankerC: "6H,KC,KH"},
	}
	for _, tt := range tests {
		t.Run(tt.dealt, func(t *testing.T) {
			r, err := Score(mustCards(t, tt.dealt))
			if err != nil {
				t.Fatal(err)
			}
			if r.Winner != tt.winner || r.PlayerPoint != tt.player || r.BankerPoint != tt.banker || r.Margin != tt.margin {
				t.Errorf("got %s margin %d; want %s %d-%d margin %d", r, r.Margin, tt.winner, tt.player, tt.banker, tt.margin)
			}
			if r.PlayerNatural != tt.pNat || r.BankerNatural != tt.bNat {
				t.Errorf("naturals P %v B %v; want %v %v", r.PlayerNatural, r.BankerNatural, tt.pNat, tt.bNat)
			}
			if r.PlayerPair != tt.pPair || r.BankerPair != tt.bPair || r.PlayerPerfectPair != tt.pPerfect || r.BankerPerfectPair != tt.bPerf {
				t.Errorf("pairs P %v B %v perfect P %v B %v", r.PlayerPair, r.BankerPair, r.PlayerPerfectPair, r.BankerPerfectPair)
			}
			if FormatCards(r.Player) != tt.playerC || FormatCards(r.Banker) != tt.bankerC {
				t.Errorf("hands P %s B %s; want P %s B %s", FormatCards(r.Player), FormatCards(r.Banker), tt.playerC, tt.bankerC)
			}
		})
	}
}

func TestScoreIncomplete(t *testing.T) {
	for _, s := range []string{"", "9S", "9S,7H,KD", "2S,AH,2D,2C"} {
		if _, err := Score(mustCards(t, s)); err == nil {
			t.Errorf("Score(%q) of an incomplete coup succeeded", s)
		}
	}
}

func TestPoint(t *testing.T) {
	// The seeds' own examples: K+Q=0, 3+9=2, 6+7=3, 9+6=5, 5+8=3, 8+3=1.
	for _, tt := range []struct {
		cards string
		want  int
	}{{"KH,QS", 0}, {"3H,9S", 2}, {"6H,7S", 3}, {"9H,6S", 5}, {"5C,8D", 3}, {"8H,3S", 1}, {"AS", 1}, {"TD,JD,QD,KD", 0}} {
		if got := Point(mustCards(t, tt.cards)...); got != tt.want {
			t.Errorf("Point(%s) = %d, want %d", tt.cards, got, tt.want)
		}
	}
}

func TestShoe(t *testing.T) {
	for _, decks := range []int{6, 8} {
		s, err := NewShoe(decks)
		if err != nil {
			t.Fatal(err)
		}
		if s.Remaining() != decks*52 {
			t.Errorf("%d decks: %d cards", decks, s.Remaining())
		}
		kh := Card{Rank: King, Suit: Hearts}
		for i := range decks {
			if err := s.Remove(kh); err != nil {
				t.Fatalf("copy %d of KH: %v", i+1, err)
			}
		}
		if err := s.Remove(kh); !errors.Is(err, ErrNotInShoe) {
			t.Errorf("copy %d of KH in %d decks: want ErrNotInShoe, got %v", decks+1, decks, err)
		}
		before := s
		if err := s.RemoveAll(mustCards(t, "AS,KH")); !errors.Is(err, ErrNotInShoe) {
			t.Errorf("RemoveAll with an exhausted card: %v", err)
		}
		if s != before {
			t.Error("failed RemoveAll changed the shoe")
		}
	}
	for _, decks := range []int{0, 1, 7, 9, -6} {
		if _, err := NewShoe(decks); !errors.Is(err, ErrDecks) {
			t.Errorf("NewShoe(%d): %v", decks, err)
		}
	}
}

func TestCardNotation(t *testing.T) {
	for i := range CardCount {
		c := CardAt(i)
		if c.Index() != i {
			t.Fatalf("CardAt(%d).Index() = %d", i, c.Index())
		}
		p, err := ParseCard(c.String())
		if err != nil || p != c {
			t.Fatalf("ParseCard(%s) = %v, %v", c, p, err)
		}
	}
	for _, s := range []string{"", "K", "KHH", "1H", "10H", "KX", "XH", "??", " KH", "K\x00"} {
		if _, err := ParseCard(s); !errors.Is(err, ErrBadCard) {
			t.Errorf("ParseCard(%q): want ErrBadCard, got %v", s, err)
		}
	}
	if c, err := ParseCard("th"); err != nil || c != (Card{Rank: Ten, Suit: Hearts}) {
		t.Errorf("lower case: %v %v", c, err)
	}
	if _, err := ParseCards(fmt.Sprintf("%0*d", 2*MaxCardList+1, 0)); err == nil {
		t.Error("over-long unseparated list accepted")
	}
}
