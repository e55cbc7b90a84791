package audit

import (
	"fmt"
	"iter"

	"github.com/tablectl/tablectl/coup"
)

// DefaultReplayConfig is the table config a replay starts from; it serves
// until the trail's own ctl.config row, which every trail the controller
// writes starts with.
func DefaultReplayConfig() coup.TableConfig {
	p, _ := coup.BuiltinProfile(coup.ProfileClassic)
	return coup.DefaultTableConfig(p)
}

// ReplayedCoup is one coup of a replayed trail as surveillance reads it
// (tablectl replay): its rows, cards, result, actions and alerts, and
// every row of it that differs from what the rules derive.
type ReplayedCoup struct {
	Shoe     int          `json:"shoe"`
	Coup     int          `json:"coup"`
	FirstSeq int64        `json:"first_seq"`
	LastSeq  int64        `json:"last_seq"`
	Cards    []string     `json:"cards"` // as dealt; "??" unreadable, "KH(manual)" entered by a supervisor
	Result   *coup.Result `json:"result,omitempty"`
	Voided   bool         `json:"voided,omitempty"`
	Actions  []string     `json:"actions,omitempty"` // "void by ann"
	Alerts   []string     `json:"alerts,omitempty"`  // "kind: message"
	// Rejected are the shoe sentences rejected during the coup: "reason:
	// bytes", or a count for a summary.
	Rejected []string     `json:"rejected,omitempty"`
	Diffs    []Difference `json:"differences,omitempty"`
}

// ReplayCoups runs rows back through the rules and gathers them coup by
// coup, in the order the coups began. The Replayer says how many rows were
// replayed and lists every difference; each is also on its coup.
func ReplayCoups(rows iter.Seq2[Record, error], cfg coup.TableConfig) ([]*ReplayedCoup, *Replayer, error) {
	var coups []*ReplayedCoup
	byKey := map[[2]int]*ReplayedCoup{}
	get := func(s, c int, seq int64) *ReplayedCoup {
		k := [2]int{s, c}
		rc := byKey[k]
		if rc == nil {
			rc = &ReplayedCoup{Shoe: s, Coup: c, FirstSeq: seq, Cards: []string{}}
			byKey[k] = rc
			coups = append(coups, rc)
		}
		rc.LastSeq = seq
		return rc
	}
	rp, err := Replay(rows, cfg, ReplayVisitor{
		Input: func(rec Record, in coup.Input, derived []coup.Event, t *coup.Table) {
			if r := in.Rejected; in.Kind == coup.InRejected && r != nil && t.ShoeNumber() > 0 && t.CoupNumber() > 0 {
				rc := get(t.ShoeNumber(), t.CoupNumber(), rec.Seq)
				if r.Count == 1 {
					rc.Rejected = append(rc.Rejected, r.Reason+": "+r.Raw)
				} else {
					rc.Rejected = append(rc.Rejected, fmt.Sprintf("%d more (%d bytes): %v", r.Count, r.Bytes, r.Reasons))
				}
			}
			for _, e := range derived {
				if e.Coup == 0 {
					continue
				}
				rc := get(e.Shoe, e.Coup, rec.Seq)
				switch e.Kind {
				case coup.EvCardDealt:
					s := e.Card.Card.String()
					switch {
					case e.Card.Unreadable:
						s = "??"
					case e.Card.Manual:
						s += "(manual)"
					}
					rc.Cards = append(rc.Cards, s)
				case coup.EvCoupResult:
					rc.Result = e.Result
				case coup.EvCoupVoided:
					rc.Voided = true
					rc.Actions = append(rc.Actions, "void by "+e.By)
				case coup.EvCommandDone:
					if e.Action != coup.ActionVoid {
						rc.Actions = append(rc.Actions, e.Action+" by "+e.By)
					}
				case coup.EvAlert:
					rc.Alerts = append(rc.Alerts, string(e.Alert.Kind)+": "+e.Alert.Message)
				}
			}
		},
	})
	if err != nil {
		return nil, nil, err
	}
	// Attach each difference to the coup whose rows it falls in.
	for _, d := range rp.Differences() {
		for _, rc := range coups {
			if d.Seq >= rc.FirstSeq && d.Seq <= rc.LastSeq {
				rc.Diffs = append(rc.Diffs, d)
				break
			}
		}
	}
	return coups, rp, nil
}

// ShoeRows keeps the rows of one shoe: from the input that started it (the
// row before its shoe_started) to the last row before the next shoe. Every
// configuration row before it is kept, so the rules are the ones in force.
func ShoeRows(rows iter.Seq2[Record, error], shoe int) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		var prev, held *Record
		var cfg []Record
		started := false
		for rec, err := range rows {
			if err != nil {
				yield(rec, err)
				return
			}
			switch {
			case !started && rec.Kind == KindConfig:
				cfg = append(cfg, rec)
			case !started && rec.Kind == string(coup.EvShoeStarted) && rec.Shoe == int64(shoe):
				started = true
				for _, c := range cfg {
					if !yield(c, nil) {
						return
					}
				}
				if prev != nil && !yield(*prev, nil) {
					return
				}
				if !yield(rec, nil) {
					return
				}
				continue
			case started:
				// An input is held until its first event shows which shoe
				// it belongs to: the next shoe's new-shoe input is not ours.
				if rec.Shoe > int64(shoe) {
					return
				}
				if held != nil && !yield(*held, nil) {
					return
				}
				held = nil
				if coup.IsInput(rec.Kind) {
					r := rec
					held = &r
				} else if !yield(rec, nil) {
					return
				}
				continue
			}
			r := rec
			prev = &r
		}
		if held != nil {
			yield(*held, nil)
		}
	}
}
