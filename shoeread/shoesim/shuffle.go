package shoesim

import (
	"fmt"
	"math/rand/v2"

	"github.com/tablectl/tablectl/coup"
)

// The PCG streams: the seed is the PCG's first word, one of these its
// second, so the order of a shoe depends on the seed alone and the noise
// bytes never disturb it.
const (
	shuffleStream = 0x7461626c6563746c // "tablectl" in ASCII
	noiseStream   = 0x6e6f697365       // "noise"
)

// Shuffle returns a shoe of decks decks (6 or 8) in the order its cards
// leave the shoe, the first card first. The order is a pure function of
// decks and seed, stable across Go versions and machines:
//
//  1. The unshuffled shoe is the decks one after the other, each in
//     coup.CardAt order (AS AH AD AC 2S ... KC).
//  2. r is rand.NewPCG(seed, 0x7461626c6563746c) from math/rand/v2.
//  3. For i from n-1 down to 1, card i is swapped with card j, j uniform in
//     [0, i] (Fisher-Yates): j is x mod (i+1) for the first x = r.Uint64()
//     with x >= 2^64 mod (i+1), a rejection that removes the modulo bias.
//
// A run of several shoes shuffles its n-th shoe (from 1) with seed+n-1.
func Shuffle(decks int, seed uint64) ([]coup.Card, error) {
	if !coup.ValidDecks(decks) {
		return nil, fmt.Errorf("shuffle: %w: %d (want 6 or 8)", coup.ErrDecks, decks)
	}
	cards := make([]coup.Card, 0, decks*coup.CardCount)
	for range decks {
		for i := range coup.CardCount {
			cards = append(cards, coup.CardAt(i))
		}
	}
	r := rand.NewPCG(seed, shuffleStream)
	for i := len(cards) - 1; i > 0; i-- {
		j := uniform(r, uint64(i)+1)
		cards[i], cards[j] = cards[j], cards[i]
	}
	return cards, nil
}

// uniform returns a number in [0, n) with no modulo bias: it rejects the
// 2^64 mod n lowest outputs, so every residue is equally likely.
func uniform(r *rand.PCG, n uint64) uint64 {
	threshold := -n % n // 2^64 mod n, in uint64 arithmetic
	for {
		if x := r.Uint64(); x >= threshold {
			return x % n
		}
	}
}

// burnCount is how many cards are burned after first is exposed: its value,
// tens and faces counting 10.
func burnCount(first coup.Card) int {
	if first.Rank >= coup.Ten {
		return 10
	}
	return int(first.Rank)
}
