package mqttpub

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// Scoreboard is a shoe's roads as public/roads shows them (display.Roads).
type Scoreboard[T any] interface {
	Add(coupNo int, r coup.Result) error
	Void(coupNo int) bool
	Reset()
	Snapshot() T
}

// RoadsOf feeds a scoreboard from the table: a coup goes on the roads once
// its result is final (every card revealed, so the roads never show the
// public a result before the cards), a voided coup comes off, and a new
// shoe starts them empty. The payload is the snapshot in JSON.
func RoadsOf[T any](board Scoreboard[T], log *slog.Logger) RoadsFunc {
	if log == nil {
		log = slog.Default()
	}
	shoe := 0
	pending := map[int]coup.Result{} // complete coups whose cards are not all revealed yet
	return func(rec audit.Record, t *coup.Table) ([]byte, bool) {
		changed := false
		if t.ShoeNumber() != shoe {
			board.Reset()
			shoe, pending, changed = t.ShoeNumber(), map[int]coup.Result{}, true
		}
		switch rec.Kind {
		case string(coup.EvCoupVoided):
			var ev struct {
				Coup int `json:"coup"`
			}
			if json.Unmarshal(rec.Body, &ev) == nil && ev.Coup > 0 {
				delete(pending, ev.Coup)
				if board.Void(ev.Coup) {
					changed = true
				}
			}
		case string(coup.EvCoupResult):
			var ev struct {
				Coup   int          `json:"coup"`
				Result *coup.Result `json:"result"`
			}
			if json.Unmarshal(rec.Body, &ev) == nil && ev.Result != nil && rec.Shoe == int64(shoe) {
				pending[ev.Coup] = *ev.Result
			}
		}
		// A result is final once the table says so, or once the table has
		// moved past its coup (a coup that is not final can only be left by
		// voiding it, and a void comes before anything else).
		for _, n := range slices.Sorted(maps.Keys(pending)) {
			r := pending[n]
			if (t.CoupNumber() == n && t.ResultFinal()) || t.CoupNumber() > n || t.Phase() == coup.PhaseNoShoe {
				delete(pending, n)
				if err := board.Add(n, r); err != nil {
					log.Warn("roads: coup not added", "shoe", shoe, "coup", n, "err", err)
				} else {
					changed = true
				}
			}
		}
		if !changed {
			return nil, false
		}
		b, err := json.Marshal(board.Snapshot())
		if err != nil {
			log.Error("roads: snapshot does not encode", "err", err)
			return nil, false
		}
		return b, true
	}
}
