package coup

import "fmt"

// Side is who won a coup.
type Side uint8

// The three results of a coup.
const (
	SidePlayer Side = iota + 1
	SideBanker
	SideTie
)

func (s Side) String() string {
	switch s {
	case SidePlayer:
		return "player"
	case SideBanker:
		return "banker"
	case SideTie:
		return "tie"
	}
	return fmt.Sprintf("side(%d)", uint8(s))
}

// MarshalText writes the side's name.
func (s Side) MarshalText() ([]byte, error) {
	if s < SidePlayer || s > SideTie {
		return nil, fmt.Errorf("invalid side %d", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a side's name.
func (s *Side) UnmarshalText(b []byte) error {
	for _, c := range []Side{SidePlayer, SideBanker, SideTie} {
		if string(b) == c.String() {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("unknown side %q", clip(string(b)))
}

// Result is everything the bets of a complete coup are settled on.
type Result struct {
	Player            []Card `json:"player"`
	Banker            []Card `json:"banker"`
	PlayerPoint       int    `json:"player_point"`
	BankerPoint       int    `json:"banker_point"`
	Winner            Side   `json:"winner"`
	PlayerNatural     bool   `json:"player_natural"`
	BankerNatural     bool   `json:"banker_natural"`
	PlayerPair        bool   `json:"player_pair"`
	BankerPair        bool   `json:"banker_pair"`
	PlayerPerfectPair bool   `json:"player_perfect_pair"`
	BankerPerfectPair bool   `json:"banker_perfect_pair"`
	// Margin is the winning hand's lead in points; 0 on a tie.
	Margin int `json:"margin"`
}

// Natural reports a natural on either hand.
func (r Result) Natural() bool { return r.PlayerNatural || r.BankerNatural }

// WinningPoint is the winner's point, or the tied point.
func (r Result) WinningPoint() int {
	if r.Winner == SideBanker {
		return r.BankerPoint
	}
	return r.PlayerPoint
}

// Score settles a complete coup, given its cards in shoe order. An incomplete
// coup or one with extra cards is an error.
func Score(dealt []Card) (Result, error) {
	for i, c := range dealt {
		if !c.Valid() {
			return Result{}, fmt.Errorf("card %d: %w", i+1, ErrBadCard)
		}
	}
	pos, err := Next(dealt)
	if err != nil {
		return Result{}, err
	}
	if pos != Complete {
		return Result{}, fmt.Errorf("coup incomplete: %d cards dealt, next goes to %s", len(dealt), pos)
	}
	player, banker, err := Hands(dealt)
	if err != nil {
		return Result{}, err
	}
	return resultOf(player, banker), nil
}

// resultOf scores two finished hands (first two cards of each in deal order).
func resultOf(player, banker []Card) Result {
	r := Result{
		Player:            player,
		Banker:            banker,
		PlayerPoint:       Point(player...),
		BankerPoint:       Point(banker...),
		PlayerNatural:     IsNatural(Point(player[0], player[1])),
		BankerNatural:     IsNatural(Point(banker[0], banker[1])),
		PlayerPair:        player[0].Rank == player[1].Rank,
		BankerPair:        banker[0].Rank == banker[1].Rank,
		PlayerPerfectPair: player[0] == player[1],
		BankerPerfectPair: banker[0] == banker[1],
	}
	r.decide()
	return r
}

// decide sets the winner and margin from the two points.
func (r *Result) decide() {
	switch {
	case r.PlayerPoint > r.BankerPoint:
		r.Winner, r.Margin = SidePlayer, r.PlayerPoint-r.BankerPoint
	case r.BankerPoint > r.PlayerPoint:
		r.Winner, r.Margin = SideBanker, r.BankerPoint-r.PlayerPoint
	default:
		r.Winner, r.Margin = SideTie, 0
	}
}

// String is a one-line summary, e.g. "banker 7-5 (P: 9S,8H,8D B: KH,7C)".
func (r Result) String() string {
	return fmt.Sprintf("%s %d-%d (P: %s B: %s)", r.Winner, r.PlayerPoint, r.BankerPoint, FormatCards(r.Player), FormatCards(r.Banker))
}
