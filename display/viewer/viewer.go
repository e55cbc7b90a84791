// Package viewer is the surveillance viewer (tablectl replay --serve): it
// runs an audit trail back through the rules once, keeps the table as it
// stood after every input row, and serves a page that steps or plays
// through the trail coup by coup or row by row. Each step shows the row's
// time to the millisecond (to line up with video), the cards as they came,
// the alerts, the supervisors' actions with who signed them and the key,
// the roads and the exact EV of every bet at that point, and replay's
// differences where the trail and the rules disagree.
//
// The viewer reads a trail file and never writes it; the page is served
// read-only and holds nothing of its own.
package viewer

import (
	"context"
	"fmt"
	"iter"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/coup/roads"
)

// Step is the table after one input row of the trail.
type Step struct {
	Index int       `json:"i"`
	Seq   int64     `json:"seq"`
	At    time.Time `json:"at"`
	// Time is At in UTC to the millisecond, as the page shows it
	// ("2026-11-22 21:00:04.123"), to line up with video.
	Time string `json:"time"`
	// TimeMicro is At in UTC to the microsecond, as stored.
	TimeMicro string `json:"time_us"`
	Kind      string `json:"kind"`
	Shoe      int    `json:"shoe"`
	Coup      int    `json:"coup"`
	// Input says what came in ("card KH", "button reveal", "command void").
	Input string `json:"input"`
	// Events are what the rules derived from it, for people.
	Events []string `json:"events"`
	// Action is a supervisor's command on this row, with its signer.
	Action *Action `json:"action,omitempty"`
	// Diffs are replay's differences in the rows this input derived.
	Diffs []audit.Difference `json:"diffs,omitempty"`
	// Alert is set when the step raised an alert.
	Alert bool `json:"alert,omitempty"`

	view  coup.View
	roads int // index into Timeline.roads
	shoe  coup.Shoe
	prof  coup.Profile
}

// TimeLayout is how the viewer writes a row's time: UTC, milliseconds.
const TimeLayout = "2006-01-02 15:04:05.000"

// TimeLayoutMicro is a row's time as stored: UTC, microseconds.
const TimeLayoutMicro = "2006-01-02 15:04:05.000000"

// Action is a supervisor's command as the trail recorded it.
type Action struct {
	Action string `json:"action"`
	By     string `json:"by"`
	KeyID  string `json:"key_id,omitempty"`
	ID     string `json:"id,omitempty"`
	Coup   int    `json:"coup,omitempty"`
	Card   string `json:"card,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Outcome is "accepted" or "refused: why".
	Outcome string `json:"outcome"`
}

// CoupMark is where a coup begins in the timeline.
type CoupMark struct {
	Shoe int       `json:"shoe"`
	Coup int       `json:"coup"`
	Step int       `json:"step"`
	At   time.Time `json:"at"`
}

// Timeline is a replayed trail.
type Timeline struct {
	Table string             `json:"table"`
	Rows  int64              `json:"rows"`
	Steps []*Step            `json:"-"`
	Coups []CoupMark         `json:"coups"`
	Diffs []audit.Difference `json:"differences"`
	roads []roads.View
}

// Load replays rows (a trail's, from its first row) through the rules
// with cfg (audit.DefaultReplayConfig until the trail's own configuration
// rows say otherwise) and keeps every step.
func Load(rows iter.Seq2[audit.Record, error], cfg coup.TableConfig) (*Timeline, error) {
	tl := &Timeline{}
	board := roads.New()
	tl.roads = append(tl.roads, board.Snapshot())
	rp, err := audit.Replay(rows, cfg, audit.ReplayVisitor{
		Input: func(rec audit.Record, in coup.Input, derived []coup.Event, t *coup.Table) {
			st := &Step{Index: len(tl.Steps), Seq: rec.Seq, At: rec.At, Time: rec.At.UTC().Format(TimeLayout), TimeMicro: rec.At.UTC().Format(TimeLayoutMicro), Kind: rec.Kind, Shoe: t.ShoeNumber(), Coup: t.CoupNumber(),
				Input: in.String(), Events: []string{}}
			changed := false
			for _, e := range derived {
				st.Events = append(st.Events, describe(e))
				switch e.Kind {
				case coup.EvShoeStarted:
					board.Reset()
					changed = true
				case coup.EvCoupResult:
					if e.Result != nil && board.Add(e.Coup, *e.Result) == nil {
						changed = true
					}
				case coup.EvCoupVoided:
					changed = board.Void(e.Coup) || changed
				case coup.EvAlert:
					st.Alert = true
				}
			}
			if c := in.Command; in.Kind == coup.InCmd && c != nil {
				a := &Action{Action: c.Action, By: c.By, KeyID: c.KeyID, ID: c.ID, Coup: c.Coup, Reason: c.Reason, Outcome: "accepted"}
				if c.Card != nil {
					a.Card = c.Card.String()
				}
				for _, e := range derived {
					if e.Kind == coup.EvCommandRefused {
						a.Outcome = "refused: " + e.Reason
					}
				}
				st.Action = a
			}
			if changed {
				tl.roads = append(tl.roads, board.Snapshot())
			}
			st.roads = len(tl.roads) - 1
			st.view = t.PitView()
			st.shoe = t.Remaining()
			st.prof = t.Config().Profile
			if n := len(tl.Coups); st.Shoe > 0 && st.Coup > 0 && (n == 0 || tl.Coups[n-1].Shoe != st.Shoe || tl.Coups[n-1].Coup != st.Coup) {
				tl.Coups = append(tl.Coups, CoupMark{Shoe: st.Shoe, Coup: st.Coup, Step: st.Index, At: st.At})
			}
			tl.Steps = append(tl.Steps, st)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("replay the trail: %w", err)
	}
	tl.Rows = rp.Rows()
	tl.Diffs = append([]audit.Difference{}, rp.Differences()...)
	// A difference belongs to the input whose derived rows it is in: the
	// last step at or before its row.
	for _, d := range tl.Diffs {
		i := sort.Search(len(tl.Steps), func(i int) bool { return tl.Steps[i].Seq > d.Seq }) - 1
		if i >= 0 {
			tl.Steps[i].Diffs = append(tl.Steps[i].Diffs, d)
		}
	}
	return tl, nil
}

// LoadFile replays the trail at path.
func LoadFile(ctx context.Context, path string) (*Timeline, error) {
	r, err := audit.OpenReader(ctx, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	tl, err := Load(r.Events(ctx, audit.Query{}), audit.DefaultReplayConfig())
	if err != nil {
		return nil, err
	}
	tl.Table = r.Table()
	return tl, nil
}

// describe says what an event did, for the step's list.
func describe(e coup.Event) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(string(e.Kind), "_", " "))
	switch e.Kind {
	case coup.EvCardDealt:
		if e.Card != nil {
			s := e.Card.Card.String()
			if e.Card.Unreadable {
				s = "??"
			}
			if e.Card.Manual {
				s += " (entered by a supervisor)"
			}
			fmt.Fprintf(&b, " %s to %s", s, e.Position)
		}
	case coup.EvBurnCard:
		if e.Card != nil && e.Card.Card != (coup.Card{}) {
			fmt.Fprintf(&b, " %s", e.Card.Card)
		}
	case coup.EvCoupResult:
		if r := e.Result; r != nil {
			fmt.Fprintf(&b, ": %s, Player %s (%d), Banker %s (%d)", r.Winner, coup.FormatCards(r.Player), r.PlayerPoint, coup.FormatCards(r.Banker), r.BankerPoint)
		}
	case coup.EvAlert:
		if a := e.Alert; a != nil {
			fmt.Fprintf(&b, " %s: %s (needs %s)", a.Kind, a.Message, a.Needs)
		}
	case coup.EvCoupVoided, coup.EvCommandDone, coup.EvSuspended, coup.EvResumed:
		if e.Action != "" {
			fmt.Fprintf(&b, " %s", e.Action)
		}
		if e.By != "" {
			fmt.Fprintf(&b, " by %s", e.By)
		}
		if e.Reason != "" {
			fmt.Fprintf(&b, ": %s", e.Reason)
		}
	case coup.EvCommandRefused, coup.EvIgnored:
		if e.Reason != "" {
			fmt.Fprintf(&b, ": %s", e.Reason)
		}
	case coup.EvCutCard:
		fmt.Fprintf(&b, ", last coup %d", e.LastCoup)
	case coup.EvShoeStatus:
		fmt.Fprintf(&b, " %s", e.Status)
	}
	if e.Coup > 0 && e.Kind != coup.EvCardDealt {
		fmt.Fprintf(&b, " (coup %d)", e.Coup)
	}
	return b.String()
}

// BetEV is one bet's exact odds at a step, for the cards that remain.
type BetEV struct {
	Bet    coup.Bet `json:"bet"`
	PWin   float64  `json:"p_win"`
	PPush  float64  `json:"p_push"`
	EV     *float64 `json:"ev,omitempty"` // nil: not priced by the profile
	Player bool     `json:"advantage"`    // the bet favours the player
}

// State is everything the page shows at a step.
type State struct {
	*Step
	View      coup.View  `json:"view"`
	Roads     roads.View `json:"roads"`
	Remaining int        `json:"cards_remaining"`
	EV        []BetEV    `json:"ev"`
	EVNote    string     `json:"ev_note,omitempty"`
	// Actions are the supervisors' commands of this coup up to the step.
	Actions []Action `json:"actions"`
	Prev    *Step    `json:"-"`
}

// State returns the table at step i: the view, the roads, and the exact
// EV of every bet for the cards that remain (computed now, about a
// millisecond: coup.Analyze).
func (tl *Timeline) State(i int) (State, error) {
	if i < 0 || i >= len(tl.Steps) {
		return State{}, fmt.Errorf("step %d: the trail has steps 0 to %d", i, len(tl.Steps)-1)
	}
	st := tl.Steps[i]
	s := State{Step: st, View: st.view, Roads: tl.roads[st.roads], Remaining: st.shoe.Remaining(), EV: []BetEV{}, Actions: []Action{}}
	for j := i; j >= 0 && tl.Steps[j].Shoe == st.Shoe && tl.Steps[j].Coup == st.Coup; j-- {
		if a := tl.Steps[j].Action; a != nil {
			s.Actions = append([]Action{*a}, s.Actions...)
		}
	}
	switch {
	case st.Shoe == 0:
		s.EVNote = "no shoe yet"
	case st.view.Phase == coup.PhaseNoShoe:
		s.EVNote = "the shoe is over"
	default:
		sh, p := st.shoe, st.prof
		an, err := coup.Analyze(&sh, &p)
		if err != nil {
			s.EVNote = err.Error()
			break
		}
		for _, o := range an.Bets {
			x := BetEV{Bet: o.Bet, PWin: o.PWin, PPush: o.PPush}
			if o.Priced {
				ev := o.EV
				x.EV = &ev
				x.Player = ev > 1e-12
			}
			s.EV = append(s.EV, x)
		}
	}
	return s, nil
}

// At returns the last step at or before t (the first step if t is before
// the trail).
func (tl *Timeline) At(t time.Time) int {
	i := sort.Search(len(tl.Steps), func(i int) bool { return tl.Steps[i].At.After(t) }) - 1
	return max(i, 0)
}

// within returns the last step within t as typed, to its precision:
// "21:00:04.123", as a row shows it, is that whole millisecond, so the
// jump lands on the row stored at 21:00:04.123456, not the one before it
// (rows of the same instant: the last of them, as At).
func (tl *Timeline) within(t time.Time, prec time.Duration) int {
	return tl.At(t.Add(prec - time.Nanosecond))
}

// CoupStep returns the first step of a coup, or false.
func (tl *Timeline) CoupStep(shoe, coupNo int) (int, bool) {
	for _, c := range tl.Coups {
		if c.Shoe == shoe && c.Coup == coupNo {
			return c.Step, true
		}
	}
	return 0, false
}

// Find returns the step a person asked for: the first step of coup
// ("S/C", or "C" for the first shoe that has it) or the last step at or
// before time (RFC 3339, or TimeLayout in UTC, or only its clock part
// "15:04:05.000" on the trail's first day).
func (tl *Timeline) Find(coupText, timeText string) (int, error) {
	switch {
	case coupText != "":
		shoe, c := 0, 0
		var err error
		if a, b, ok := strings.Cut(strings.TrimSpace(coupText), "/"); ok {
			if shoe, err = strconv.Atoi(a); err == nil {
				c, err = strconv.Atoi(b)
			}
		} else {
			c, err = strconv.Atoi(a)
		}
		if err != nil {
			return 0, fmt.Errorf("coup %q: want SHOE/COUP or COUP", clip(coupText))
		}
		for _, m := range tl.Coups {
			if m.Coup == c && (shoe == 0 || m.Shoe == shoe) {
				return m.Step, nil
			}
		}
		return 0, fmt.Errorf("coup %q is not in the trail", clip(coupText))
	case timeText != "":
		t, prec, err := parseTime(strings.TrimSpace(timeText), tl)
		if err != nil {
			return 0, err
		}
		return tl.within(t, prec), nil
	}
	return 0, fmt.Errorf("say a coup or a time")
}

// parseTime reads a time as Find takes it, and the precision it was
// typed to (a second, a millisecond, a microsecond...).
func parseTime(s string, tl *Timeline) (time.Time, time.Duration, error) {
	prec := precision(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, prec, nil
	}
	// Go reads a fraction of a second after the seconds whatever the
	// layout says: "15:04:05" takes "21:00:04.123456" too.
	if t, err := time.Parse("2006-01-02 15:04:05", s); err == nil {
		return t, prec, nil
	}
	if t, err := time.Parse("15:04:05", s); err == nil && len(tl.Steps) > 0 {
		d := tl.Steps[0].At.UTC()
		return time.Date(d.Year(), d.Month(), d.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC), prec, nil
	}
	return time.Time{}, 0, fmt.Errorf("time %q: want RFC 3339, %q or %q (UTC, to the second, millisecond or microsecond)", clip(s), TimeLayout, "15:04:05.000")
}

// precision is the unit of the last digit of a time's seconds: 1s
// without a fraction, 1ms for three digits, 1µs for six.
func precision(s string) time.Duration {
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return time.Second
	}
	n := 0
	for _, r := range s[dot+1:] {
		if r < '0' || r > '9' {
			break
		}
		n++
	}
	p := time.Second
	for range min(n, 9) {
		p /= 10
	}
	return p
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
