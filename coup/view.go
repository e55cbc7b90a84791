package coup

import (
	"slices"
	"time"
)

// ViewCard is one card of a hand on a display. A hidden card shows no
// identity on the public view.
type ViewCard struct {
	Card       *Card `json:"card,omitempty"`
	Hidden     bool  `json:"hidden,omitempty"`
	Unreadable bool  `json:"unreadable,omitempty"`
	Manual     bool  `json:"manual,omitempty"`
}

// View is the table as a display sees it: the public view hides cards not
// yet revealed (and the result they make); the pit view shows every card as
// read.
type View struct {
	Phase         Phase      `json:"phase"`
	Shoe          int        `json:"shoe"`
	Coup          int        `json:"coup"`
	Suspended     bool       `json:"suspended"`
	SuspendReason string     `json:"suspend_reason,omitempty"`
	Alerts        []Alert    `json:"alerts,omitempty"`
	Player        []ViewCard `json:"player"`
	Banker        []ViewCard `json:"banker"`
	// PlayerPoint and BankerPoint count the cards the view shows.
	PlayerPoint int             `json:"player_point"`
	BankerPoint int             `json:"banker_point"`
	Result      *Result         `json:"result,omitempty"`
	Outcomes    map[Bet]Outcome `json:"outcomes,omitempty"`
	CardsDealt  int             `json:"cards_dealt"`
	Remaining   int             `json:"cards_remaining"`
	CutCardSeen bool            `json:"cut_card_seen"`
	LastCoup    int             `json:"last_coup,omitempty"`
	Link        string          `json:"shoe_link"`
	Burn        *BurnState      `json:"burn,omitempty"`
	// Dealer is the dealer on duty, "" when none is signed in.
	Dealer string `json:"dealer,omitempty"`
	// OpenedAt is when the coup's betting opened: with the table, the
	// shoe and the coup, the round's id for a dispute. Zero between shoes.
	OpenedAt time.Time `json:"opened_at,omitzero"`
	// BetsCloseAt is when the table's betting time closes betting (the
	// controller closes it then, as the dealer's button would), while
	// betting is open on a table configured with one; zero otherwise.
	BetsCloseAt time.Time `json:"bets_close_at,omitzero"`
	// Last is the shoe's coup before this one, finished, while this one
	// has no card yet: boards keep the last result up through betting.
	Last *LastCoup `json:"last,omitempty"`
}

// LastCoup is a finished coup's result, as a board keeps it up.
type LastCoup struct {
	Coup   int    `json:"coup"`
	Player []Card `json:"player"`
	Banker []Card `json:"banker"`
	Result Result `json:"result"`
}

// PitView shows every card as read, hidden or not.
func (t *Table) PitView() View { return t.view(true) }

// PublicView shows only revealed cards, and the result once all are.
func (t *Table) PublicView() View { return t.view(false) }

func (t *Table) view(pit bool) View {
	v := View{
		Phase: t.phase, Shoe: t.shoe, Coup: t.coup, Suspended: t.Suspended(), SuspendReason: t.manualSuspend,
		Player: []ViewCard{}, Banker: []ViewCard{}, CutCardSeen: t.cutSeen, LastCoup: t.lastCoup, Link: t.link,
		Dealer: t.dealer,
	}
	if t.phase == PhaseNoShoe || t.phase == PhaseBurn {
		v.Coup = 0
	}
	if t.shoe > 0 {
		v.Remaining = t.comp.Remaining()
		v.CardsDealt = t.comp.Decks()*CardCount - v.Remaining
	}
	if pit {
		v.Alerts = t.Alerts()
		if t.phase == PhaseBurn {
			b := t.burn
			v.Burn = &b
		}
	} else if v.Suspended {
		// The supervisor's note stays on the pit's view and in the trail.
		v.SuspendReason = PublicReason(t.manualSuspend, t.alerts)
	}
	if t.phase == PhaseBettingOpen && !t.Suspended() {
		v.BetsCloseAt = t.deadline
	}
	v.Last = t.lastCoupView()
	if v.Coup > 0 {
		v.OpenedAt = t.openedAt
	}
	var player, banker []Card
	for _, dc := range t.cards {
		vc := ViewCard{Hidden: dc.Hidden, Unreadable: dc.Unreadable, Manual: dc.Manual}
		shown := !dc.Unreadable && (pit || !dc.Hidden)
		if shown {
			c := dc.Card
			vc.Card = &c
		}
		switch dc.Position {
		case PositionPlayer, PositionPlayerThird:
			v.Player = append(v.Player, vc)
			if shown {
				player = append(player, dc.Card)
			}
		default:
			v.Banker = append(v.Banker, vc)
			if shown {
				banker = append(banker, dc.Card)
			}
		}
	}
	v.PlayerPoint, v.BankerPoint = Point(player...), Point(banker...)
	if t.result != nil && (pit || t.final) {
		r := *t.result
		v.Result = &r
		v.Outcomes = t.outcomes(r)
	}
	return v
}

// The public reasons for a suspension, the only words of why that reach a
// public screen: a supervisor's note ("suspect dealer") or an alert's
// message stays on the pit's view and in the trail.
const (
	ReasonTableCheck  = "table_check"  // a supervisor suspended the table
	ReasonCardCheck   = "card_check"   // an alert on the cards (a misdeal, an unreadable card)
	ReasonShoeCheck   = "shoe_check"   // the shoe's link or the shoe itself
	ReasonSystemCheck = "system_check" // the trail or the controller's own check
)

// PublicReasons lists every public reason, worst last.
var PublicReasons = []string{ReasonTableCheck, ReasonCardCheck, ReasonShoeCheck, ReasonSystemCheck}

// PublicReason is the public reason for a suspension held by a supervisor's
// note (manual, "" when none) and the alerts: the worst of theirs.
func PublicReason(manual string, alerts []Alert) string {
	worst := -1
	if manual != "" {
		worst = 0
	}
	for _, al := range alerts {
		worst = max(worst, slices.Index(PublicReasons, alertReason(al.Kind)))
	}
	if worst < 0 {
		return ReasonTableCheck
	}
	return PublicReasons[worst]
}

func alertReason(k AlertKind) string {
	switch k {
	case AlertShoeOffline, AlertShoeRestarted, AlertShoeProtocol, AlertSequenceGap, AlertSequenceReused:
		return ReasonShoeCheck
	case AlertAuditFailed, AlertTrailTampered, AlertSelfCheck:
		return ReasonSystemCheck
	case AlertShuffleSuspect:
		return ReasonTableCheck
	}
	return ReasonCardCheck
}

// lastCoupView is the shoe's previous coup while the current one has no
// card: finished, not voided, revealed (a record is made once the result
// is final).
func (t *Table) lastCoupView() *LastCoup {
	if (t.phase != PhaseBettingOpen && t.phase != PhaseBettingClosed) || len(t.cards) > 0 || len(t.recall) == 0 {
		return nil
	}
	r := t.recall[len(t.recall)-1]
	if r.Shoe != t.shoe || r.Coup != t.coup-1 || r.Voided || r.Result == nil {
		return nil
	}
	return &LastCoup{Coup: r.Coup, Player: slices.Clone(r.Result.Player), Banker: slices.Clone(r.Result.Banker), Result: *r.Result}
}
