// Package coup is the pure game logic of Punto Banco: cards, the shoe's
// composition, the tableau (drawing rules), coup results, rule profiles with
// their payouts and limits, settlement in integer minor units, and the exact
// odds of the remaining shoe.
//
// It does no I/O, starts no goroutines and reads no clock: every other
// package depends on it and never the other way, so that restart recovery,
// replay and the tests all run the very same rules.
package coup

import (
	"errors"
	"fmt"
	"strings"
)

// Rank is a card's rank, 1 (ace) to 13 (king).
type Rank uint8

// Ranks in order; Ten, Jack, Queen and King are worth zero points.
const (
	Ace Rank = iota + 1
	Two
	Three
	Four
	Five
	Six
	Seven
	Eight
	Nine
	Ten
	Jack
	Queen
	King
)

// Suit is a card's suit.
type Suit uint8

// Suits in notation order S, H, D, C.
const (
	Spades Suit = iota
	Hearts
	Diamonds
	Clubs
)

const (
	rankLetters = "A23456789TJQK"
	suitLetters = "SHDC"
)

// Card is one playing card. The zero Card is not a valid card.
type Card struct {
	Rank Rank
	Suit Suit
}

// CardCount is the number of distinct cards in one deck.
const CardCount = 52

// ErrBadCard reports card notation that names no card.
var ErrBadCard = errors.New("bad card notation")

// Valid reports whether c names a real card.
func (c Card) Valid() bool { return c.Rank >= Ace && c.Rank <= King && c.Suit <= Clubs }

// Points is the card's baccarat value: ace 1, two to nine face value,
// ten and faces zero.
func (c Card) Points() int {
	if c.Rank >= Ten {
		return 0
	}
	return int(c.Rank)
}

// Index numbers the 52 distinct cards 0..51 (rank-major), for compositions.
func (c Card) Index() int { return int(c.Rank-1)*4 + int(c.Suit) }

// CardAt is the inverse of Index.
func CardAt(i int) Card { return Card{Rank: Rank(i/4 + 1), Suit: Suit(i % 4)} }

// String writes the card in notation: rank then suit, e.g. "KH", "TD", "AS".
func (c Card) String() string {
	if !c.Valid() {
		return "??"
	}
	return string([]byte{rankLetters[c.Rank-1], suitLetters[c.Suit]})
}

// MarshalText writes the card's notation, so cards are strings in JSON.
func (c Card) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("%w: rank %d suit %d", ErrBadCard, c.Rank, c.Suit)
	}
	return []byte(c.String()), nil
}

// UnmarshalText parses the card's notation.
func (c *Card) UnmarshalText(b []byte) error {
	p, err := ParseCard(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// ParseRank reads one rank letter (A23456789TJQK, either case).
func ParseRank(b byte) (Rank, bool) {
	i := strings.IndexByte(rankLetters, upper(b))
	if i < 0 {
		return 0, false
	}
	return Rank(i + 1), true
}

// ParseSuit reads one suit letter (SHDC, either case).
func ParseSuit(b byte) (Suit, bool) {
	i := strings.IndexByte(suitLetters, upper(b))
	if i < 0 {
		return 0, false
	}
	return Suit(i), true
}

func upper(b byte) byte {
	if b >= 'a' && b <= 'z' {
		return b - 'a' + 'A'
	}
	return b
}

// ParseCard reads a card written as rank then suit ("KH", "TD", "AS"; either
// case). Anything else is ErrBadCard.
func ParseCard(s string) (Card, error) {
	if len(s) != 2 {
		return Card{}, fmt.Errorf("%w: %q: want rank then suit, like KH or TD", ErrBadCard, clip(s))
	}
	r, okR := ParseRank(s[0])
	su, okS := ParseSuit(s[1])
	if !okR || !okS {
		return Card{}, fmt.Errorf("%w: %q: rank must be one of %s and suit one of %s", ErrBadCard, s, rankLetters, suitLetters)
	}
	return Card{Rank: r, Suit: su}, nil
}

// MaxCardList bounds how many cards a list from outside may name: more than
// an 8-deck shoe holds is certainly not a dealt list.
const MaxCardList = 8 * CardCount

// ParseCards reads a comma-separated list of cards ("KH,9S, TD"). An empty
// string is an empty list.
func ParseCards(s string) ([]Card, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if n := strings.Count(s, ",") + 1; n > MaxCardList {
		return nil, fmt.Errorf("%w: list of %d cards is longer than any shoe (%d)", ErrBadCard, n, MaxCardList)
	}
	parts := strings.Split(s, ",")
	cards := make([]Card, 0, len(parts))
	for i, p := range parts {
		c, err := ParseCard(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("card %d: %w", i+1, err)
		}
		cards = append(cards, c)
	}
	return cards, nil
}

// FormatCards writes cards as a comma-separated list, the inverse of ParseCards.
func FormatCards(cards []Card) string {
	var b strings.Builder
	for i, c := range cards {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// clip shortens hostile input before it goes into an error message.
func clip(s string) string {
	const max = 16
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
