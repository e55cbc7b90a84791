package coup

import (
	"errors"
	"fmt"
)

// Position is where the next card from the shoe goes in a coup.
type Position uint8

// The positions in dealing order. Complete means the tableau allows no more
// cards: any further card is a misdeal.
const (
	PositionPlayer Position = iota + 1 // Player's first or second card
	PositionBanker                     // Banker's first or second card
	PositionPlayerThird
	PositionBankerThird
	Complete
)

func (p Position) String() string {
	switch p {
	case PositionPlayer:
		return "player"
	case PositionBanker:
		return "banker"
	case PositionPlayerThird:
		return "player_third"
	case PositionBankerThird:
		return "banker_third"
	case Complete:
		return "complete"
	}
	return fmt.Sprintf("position(%d)", uint8(p))
}

// ErrExtraCard reports a card beyond what the tableau allows.
var ErrExtraCard = errors.New("card beyond the tableau")

// Point is the baccarat point of a hand: the last digit of its card values.
func Point(cards ...Card) int {
	sum := 0
	for _, c := range cards {
		sum += c.Points()
	}
	return sum % 10
}

// IsNatural reports a two-card point of 8 or 9.
func IsNatural(point int) bool { return point >= 8 }

// PlayerDraws is the tableau's rule for Player's third card, given both
// two-card points (no natural on either side).
func PlayerDraws(player2 int) bool { return player2 <= 5 }

// BankerDraws is the tableau's rule for Banker's third card. playerThird is
// the point value of Player's third card, or -1 when Player stood.
func BankerDraws(banker2, playerThird int) bool {
	if playerThird < 0 {
		return banker2 <= 5
	}
	switch banker2 {
	case 0, 1, 2:
		return true
	case 3:
		return playerThird != 8
	case 4:
		return playerThird >= 2 && playerThird <= 7
	case 5:
		return playerThird >= 4 && playerThird <= 7
	case 6:
		return playerThird == 6 || playerThird == 7
	}
	return false
}

// Next is the tableau as a pure function: given the cards dealt so far in a
// coup, in shoe order, it says where the next card goes, or Complete. Dealt
// lists longer than the tableau allows are ErrExtraCard.
func Next(dealt []Card) (Position, error) {
	n := len(dealt)
	if n < 4 {
		if n%2 == 0 {
			return PositionPlayer, nil
		}
		return PositionBanker, nil
	}
	p2 := Point(dealt[0], dealt[2])
	b2 := Point(dealt[1], dealt[3])
	// The shape of a complete coup: 4 cards; 5 (one third card); 6 (both).
	var want int
	var fifth Position
	switch {
	case IsNatural(p2) || IsNatural(b2):
		want = 4
	case PlayerDraws(p2):
		fifth = PositionPlayerThird
		want = 5
		if n >= 5 && BankerDraws(b2, dealt[4].Points()) {
			want = 6
		}
	case BankerDraws(b2, -1):
		fifth = PositionBankerThird
		want = 5
	default:
		want = 4
	}
	switch {
	case n > want:
		return Complete, fmt.Errorf("%w: card %d of a coup that was complete with %d", ErrExtraCard, n, want)
	case n == want:
		return Complete, nil
	case n == 4:
		return fifth, nil
	default: // n == 5, want == 6
		return PositionBankerThird, nil
	}
}

// Hands splits a coup's cards, in shoe order, into Player's and Banker's.
// It applies the tableau, so it fails on a list the tableau would not deal.
func Hands(dealt []Card) (player, banker []Card, err error) {
	for i := range dealt {
		pos, err := Next(dealt[:i])
		if err != nil {
			return nil, nil, err
		}
		switch pos {
		case PositionPlayer, PositionPlayerThird:
			player = append(player, dealt[i])
		case PositionBanker, PositionBankerThird:
			banker = append(banker, dealt[i])
		case Complete:
			return nil, nil, fmt.Errorf("%w: card %d of a coup that was complete with %d", ErrExtraCard, i+1, i)
		}
	}
	return player, banker, nil
}
