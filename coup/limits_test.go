package coup

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestValidateStakes checks every rule, mostly against seed 003's limits
// (in cents: minimum total 10, maximum 500000; Player and Banker 250000,
// Tie 62500, pairs 62500, perfect pair 50000, bonuses 25000).
func TestValidateStakes(t *testing.T) {
	const eur = 100
	vip := testProfile(t, ProfileVIP)
	classic := testProfile(t, ProfileClassic)
	nc := testProfile(t, ProfileNoCommission)
	house := testProfile(t, ncHouse) // min_total 500, max_total 1000000, tie 10000, winning_number_1 2000
	open, err := LoadProfile(ProfileVIP, []byte(`{"limits": {"no_opposing_main": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	wn := WinningNumberBet
	tests := []struct {
		name string
		p    *Profile
		st   Stakes
		want []Violation // Bet and Rule; nil is accepted
	}{
		// Accepted.
		{"vip table minimum", &vip, Stakes{BetPlayer: 10}, nil},
		{"vip spot maximum", &vip, Stakes{BetBanker: 2500 * eur}, nil},
		{"vip table maximum, seed's richest coup", &vip, Stakes{BetPlayer: 2375 * eur, BetPlayerPair: 625 * eur,
			BetBankerPair: 625 * eur, BetAnyPair: 625 * eur, BetPerfectPair: 500 * eur, BetPlayerBonus: 250 * eur}, nil},
		{"side bet at exactly twice the minimum and half the main", &vip, Stakes{BetPlayer: 20, BetPlayerBonus: 10}, nil},
		{"tie counts as a main bet", &vip, Stakes{BetPlayer: 1000, BetTie: 2, BetPerfectPair: 501}, nil},
		{"banker bonus at exactly half", &vip, Stakes{BetBanker: 1002, BetBankerBonus: 501}, nil},
		{"each restricted bet is half on its own", &vip, Stakes{BetPlayer: 1000, BetPlayerBonus: 500, BetBankerBonus: 500, BetPerfectPair: 500}, nil},
		{"pairs are not restricted", &vip, Stakes{BetPlayerPair: 100, BetAnyPair: 100}, nil},
		{"classic has no limits", &classic, Stakes{BetBanker: 1}, nil},
		{"classic allows player and banker together", &classic, Stakes{BetPlayer: 100, BetBanker: 100}, nil},
		{"vip with opposing bets allowed by config", &open, Stakes{BetPlayer: 100, BetBanker: 100}, nil},
		{"configured winning number", &house, Stakes{wn(3): 600}, nil},
		{"winning number at its own limit", &house, Stakes{wn(1): 2000}, nil},

		// Refused.
		{"nothing staked", &vip, Stakes{}, []Violation{{"", RuleNoStake, ""}}},
		{"nil stakes", &classic, nil, []Violation{{"", RuleNoStake, ""}}},
		{"spot not offered", &classic, Stakes{BetPlayer: 100, BetPlayerPair: 100}, []Violation{{BetPlayerPair, RuleNotOffered, ""}}},
		{"unknown spot", &vip, Stakes{BetPlayer: 100, "dragon": 100}, []Violation{{"dragon", RuleNotOffered, ""}}},
		{"winning number on vip", &vip, Stakes{BetPlayer: 100, wn(4): 100}, []Violation{{wn(4), RuleNotOffered, ""}}},
		{"zero stake", &vip, Stakes{BetPlayer: 0, BetTie: 100}, []Violation{{BetPlayer, RuleNotPositive, ""}}},
		{"negative stake", &vip, Stakes{BetPlayer: -500, BetTie: 100}, []Violation{{BetPlayer, RuleNotPositive, ""}}},
		{"only a zero stake", &vip, Stakes{BetPlayer: 0}, []Violation{{BetPlayer, RuleNotPositive, ""}, {"", RuleBelowMinimum, ""}}},
		{"absurd stake", &classic, Stakes{BetTie: MaxStake + 1}, []Violation{{BetTie, RuleTooLarge, ""}}},
		{"absurd total", &classic, Stakes{BetPlayer: MaxStake, BetTie: 1}, []Violation{{"", RuleTooLarge, ""}}},
		{"absurd stake is not also a spot limit", &vip, Stakes{BetTie: MaxStake + 1, BetPlayer: 100}, []Violation{{BetTie, RuleTooLarge, ""}}},
		{"winning number without a pay table", &nc, Stakes{BetBanker: 100, wn(5): 100}, []Violation{{wn(5), RuleNoPayTable, ""}}},
		{"player over its limit", &vip, Stakes{BetPlayer: 2500*eur + 1}, []Violation{{BetPlayer, RuleSpotLimit, ""}}},
		{"banker over its limit", &vip, Stakes{BetBanker: 2500*eur + 1}, []Violation{{BetBanker, RuleSpotLimit, ""}}},
		{"tie over its limit", &vip, Stakes{BetTie: 625*eur + 1}, []Violation{{BetTie, RuleSpotLimit, ""}}},
		{"player pair over its limit", &vip, Stakes{BetPlayerPair: 625*eur + 1}, []Violation{{BetPlayerPair, RuleSpotLimit, ""}}},
		{"banker pair over its limit", &vip, Stakes{BetBankerPair: 625*eur + 1}, []Violation{{BetBankerPair, RuleSpotLimit, ""}}},
		{"any pair over its limit", &vip, Stakes{BetAnyPair: 625*eur + 1}, []Violation{{BetAnyPair, RuleSpotLimit, ""}}},
		{"perfect pair over its limit", &vip, Stakes{BetBanker: 2000 * eur, BetPerfectPair: 500*eur + 1}, []Violation{{BetPerfectPair, RuleSpotLimit, ""}}},
		{"player bonus over its limit", &vip, Stakes{BetPlayer: 2000 * eur, BetPlayerBonus: 250*eur + 1}, []Violation{{BetPlayerBonus, RuleSpotLimit, ""}}},
		{"banker bonus over its limit", &vip, Stakes{BetBanker: 2000 * eur, BetBankerBonus: 250*eur + 1}, []Violation{{BetBankerBonus, RuleSpotLimit, ""}}},
		{"configured tie limit", &house, Stakes{BetTie: 10001}, []Violation{{BetTie, RuleSpotLimit, ""}}},
		{"configured winning number limit", &house, Stakes{wn(1): 2001}, []Violation{{wn(1), RuleSpotLimit, ""}}},
		{"below the vip minimum", &vip, Stakes{BetPlayer: 9}, []Violation{{"", RuleBelowMinimum, ""}}},
		{"below a configured minimum", &house, Stakes{BetPlayer: 300, BetTie: 199}, []Violation{{"", RuleBelowMinimum, ""}}},
		{"above the vip maximum", &vip, Stakes{BetPlayer: 2500 * eur, BetTie: 625 * eur, BetPlayerPair: 625 * eur,
			BetBankerPair: 625 * eur, BetAnyPair: 625 * eur, BetPerfectPair: 1}, []Violation{{"", RuleAboveMaximum, ""}}},
		{"above a configured maximum", &house, Stakes{BetPlayer: 995000, BetTie: 5001}, []Violation{{"", RuleAboveMaximum, ""}}},
		{"player and banker together", &vip, Stakes{BetPlayer: 100, BetBanker: 100}, []Violation{{"", RuleOpposingMain, ""}}},
		{"side bet with main just short of twice the minimum", &vip, Stakes{BetPlayer: 19, BetPlayerBonus: 5},
			[]Violation{{BetPlayerBonus, RuleSideBetMain, ""}}},
		{"side bet with no main bet", &vip, Stakes{BetPerfectPair: 100},
			[]Violation{{BetPerfectPair, RuleSideBetMain, ""}, {BetPerfectPair, RuleSideBetShare, ""}}},
		{"perfect pair over half the main", &vip, Stakes{BetPlayer: 1000, BetPerfectPair: 501},
			[]Violation{{BetPerfectPair, RuleSideBetShare, ""}}},
		{"banker bonus one cent over half", &vip, Stakes{BetBanker: 1001, BetBankerBonus: 501},
			[]Violation{{BetBankerBonus, RuleSideBetShare, ""}}},
		{"player bonus over half", &vip, Stakes{BetTie: 1000, BetPlayerBonus: 600},
			[]Violation{{BetPlayerBonus, RuleSideBetShare, ""}}},
		{"everything at once, in layout order", &vip,
			Stakes{BetPlayer: 100, BetBanker: 100, BetPlayerBonus: 40000, BetTie: 62501, "x": 1},
			[]Violation{{"x", RuleNotOffered, ""}, {BetTie, RuleSpotLimit, ""}, {BetPlayerBonus, RuleSpotLimit, ""},
				{"", RuleOpposingMain, ""}, {BetPlayerBonus, RuleSideBetShare, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.ValidateStakes(tt.st)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *StakeError
			if !errors.As(err, &se) {
				t.Fatalf("err %v, want a *StakeError", err)
			}
			if !errors.Is(err, ErrStakeRefused) {
				t.Errorf("err %v does not wrap ErrStakeRefused", err)
			}
			if se.Profile != tt.p.Name {
				t.Errorf("profile %q, want %q", se.Profile, tt.p.Name)
			}
			var got []Violation
			for _, v := range se.Violations {
				if v.Reason == "" || !strings.Contains(err.Error(), v.Reason) {
					t.Errorf("violation %+v has no reason in the message %q", v, err)
				}
				got = append(got, Violation{Bet: v.Bet, Rule: v.Rule})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations\n got %v\nwant %v\nmessage: %v", got, tt.want, err)
			}
		})
	}
}

// TestStakeErrorMessage checks that the reasons say what was wrong, with
// the amounts.
func TestStakeErrorMessage(t *testing.T) {
	vip := testProfile(t, ProfileVIP)
	err := vip.ValidateStakes(Stakes{BetPlayer: 19, BetBanker: 1, BetPlayerBonus: 40000, BetTie: 62501})
	want := []string{
		"stake refused by profile vip",
		"tie: stake 62501 is above the spot's limit of 62500",
		"player and banker may not be bet together",
		"player_bonus: stake 40000 is above the spot's limit of 25000",
		"player_bonus: stake 40000 is above the allowed share (1:2) of the main bets (62521)",
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("message %v lacks %q", err, w)
		}
	}
	err = vip.ValidateStakes(Stakes{BetPlayer: 19, BetPerfectPair: 5})
	if w := "perfect_pair: side bet needs main bets of at least 20 (2 x the table minimum), have 19"; err == nil || !strings.Contains(err.Error(), w) {
		t.Errorf("message %v lacks %q", err, w)
	}
	// A hostile spot name is clipped before it reaches the message.
	err = vip.ValidateStakes(Stakes{BetPlayer: 100, Bet(strings.Repeat("z", 1000)): 1})
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("message not clipped: %d bytes", len(err.Error()))
	}
}

// TestSideBetRuleUsesConfig: the side-bet rule follows the configured
// multiple, share and list.
func TestSideBetRuleUsesConfig(t *testing.T) {
	p, err := LoadProfile(ProfileVIP, []byte(`{"limits": {"min_total": 100, "side_bet_min_main_multiple": 3,
		"side_bet_max_main_share": "1:4", "restricted_side_bets": ["player_pair"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		st   Stakes
		rule StakeRule // "" accepted
	}{
		{Stakes{BetPlayer: 300, BetPlayerPair: 75}, ""},
		{Stakes{BetPlayer: 299, BetTie: 1, BetPlayerPair: 75}, ""},
		{Stakes{BetPlayer: 299, BetPlayerPair: 70}, RuleSideBetMain},
		{Stakes{BetPlayer: 300, BetPlayerPair: 76}, RuleSideBetShare},
		{Stakes{BetPlayer: 100, BetPlayerBonus: 100}, ""}, // no longer restricted
	}
	for _, tt := range tests {
		err := p.ValidateStakes(tt.st)
		var se *StakeError
		switch {
		case tt.rule == "" && err != nil:
			t.Errorf("%v: refused: %v", tt.st, err)
		case tt.rule != "" && (!errors.As(err, &se) || !se.Has(tt.rule) || len(se.Violations) != 1):
			t.Errorf("%v: err %v, want only %s", tt.st, err, tt.rule)
		}
	}
}
