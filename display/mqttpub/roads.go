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
func RoadsOf[T any](board Scoreboard[T], log *slog.Logger) Roads {
	if log == nil {
		log = slog.Default()
	}
	return &scoreboardRoads[T]{board: board, log: log, pending: map[int]coup.Result{}}
}

type scoreboardRoads[T any] struct {
	board   Scoreboard[T]
	log     *slog.Logger
	shoe    int
	pending map[int]coup.Result // complete coups whose cards are not all revealed yet
}

func (r *scoreboardRoads[T]) Apply(rec audit.Record, t *coup.Table) bool {
	changed := false
	if t.ShoeNumber() != r.shoe {
		r.board.Reset()
		r.shoe, r.pending, changed = t.ShoeNumber(), map[int]coup.Result{}, true
	}
	switch rec.Kind {
	case string(coup.EvCoupVoided):
		var ev struct {
			Coup int `json:"coup"`
		}
		if json.Unmarshal(rec.Body, &ev) == nil && ev.Coup > 0 {
			delete(r.pending, ev.Coup)
			if r.board.Void(ev.Coup) {
				changed = true
			}
		}
	case string(coup.EvCoupResult):
		var ev struct {
			Coup   int          `json:"coup"`
			Result *coup.Result `json:"result"`
		}
		if json.Unmarshal(rec.Body, &ev) == nil && ev.Result != nil && rec.Shoe == int64(r.shoe) {
			r.pending[ev.Coup] = *ev.Result
		}
	}
	if len(r.pending) == 0 {
		return changed
	}
	// A result is final once the table says so, or once the table has
	// moved past its coup (a coup that is not final can only be left by
	// voiding it, and a void comes before anything else).
	for _, n := range slices.Sorted(maps.Keys(r.pending)) {
		res := r.pending[n]
		if (t.CoupNumber() == n && t.ResultFinal()) || t.CoupNumber() > n || t.Phase() == coup.PhaseNoShoe {
			delete(r.pending, n)
			if err := r.board.Add(n, res); err != nil {
				r.log.Warn("roads: coup not added", "shoe", r.shoe, "coup", n, "err", err)
			} else {
				changed = true
			}
		}
	}
	return changed
}

func (r *scoreboardRoads[T]) Payload() ([]byte, error) {
	return json.Marshal(r.board.Snapshot())
}
