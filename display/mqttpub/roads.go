package mqttpub

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/coup/roads"
)

// scoreboard is what the publisher tells the roads: *roads.Board, or a
// recorder in tests.
type scoreboard interface {
	Add(coupNo int, r coup.Result) error
	Void(coupNo int) bool
	Reset()
}

// newRoads keeps public/roads on a roads.Board.
func newRoads(log *slog.Logger) *roadsFeed {
	b := roads.New()
	return feedRoads(b, func() any { return b.Snapshot() }, log)
}

// feedRoads feeds a scoreboard from the table: a coup goes on the roads
// once its result is final (every card revealed, so the roads never show
// the public a result before the cards), a voided coup comes off, and a new
// shoe starts them empty. The payload is snapshot() in JSON.
func feedRoads(board scoreboard, snapshot func() any, log *slog.Logger) *roadsFeed {
	if log == nil {
		log = slog.Default()
	}
	return &roadsFeed{board: board, snapshot: snapshot, log: log, pending: map[int]coup.Result{}}
}

type roadsFeed struct {
	board    scoreboard
	snapshot func() any
	log      *slog.Logger
	shoe     int
	pending  map[int]coup.Result // complete coups whose cards are not all revealed yet
}

func (r *roadsFeed) Apply(rec audit.Record, t *coup.Table) bool {
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

// Seed puts on the roads what they hold once every row up to t's has been
// applied: the current shoe's coups whose results are final, in coup order,
// and the rest pending. A publisher started from a snapshot of the table
// begins here instead of at row 1.
func (r *roadsFeed) Seed(t *coup.Table) {
	r.board.Reset()
	r.shoe, r.pending = t.ShoeNumber(), map[int]coup.Result{}
	recs := t.ShoeCoups()
	if res := t.Result(); res != nil && (len(recs) == 0 || recs[len(recs)-1].Coup != t.CoupNumber()) {
		recs = append(recs, coup.CoupRecord{Shoe: t.ShoeNumber(), Coup: t.CoupNumber(), Result: res})
	}
	for _, c := range recs {
		if c.Voided || c.Result == nil {
			continue
		}
		r.pending[c.Coup] = *c.Result
	}
	r.Apply(audit.Record{}, t)
}

func (r *roadsFeed) Payload() ([]byte, error) {
	return json.Marshal(r.snapshot())
}
