package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
)

// The shoe watch: the floor's shuffle check across tables (issue 33). A
// table compares each shoe it deals with its own last coup.ShoeMemory
// shoes; a shoe carried to another table, or brought back days later,
// escapes it. The witness sees every table's cards (the in.card rows), so
// it keeps the print of every shoe witnessed in the last ShoeKeep
// (coup.PrintIndex, the table's own index) and follows each table's shoe
// through all of them with a coup.RunWatch: a run of cards in a row that
// any shoe of the floor dealt, at any cut, forwards or backwards, raises
// AlertShuffleSuspect. The run it takes grows with the prints kept
// (coup.RepeatRun, at shoeAlpha a shoe), 10 or 11 cards on a floor of a
// hundred tables kept a week.
//
// The prints are kept in the floor's database (shoe_prints, one row a
// shoe) so that a witness that starts, or takes over a table from
// another, carries on; each witness holds every print of the last
// ShoeKeep in memory, about 2 KB a shoe with its keys.

// AlertShuffleSuspect is raised when a table deals a run of cards another
// shoe of the floor dealt (or this table's, before): not tamper, a shoe
// not shuffled, or moved.
const AlertShuffleSuspect AlertKind = "shuffle_suspect"

// DefaultShoeKeep is how long the witness keeps each shoe's print to
// compare new shoes with.
const DefaultShoeKeep = 7 * 24 * time.Hour

// shoeAlpha is the false-alarm bound of the floor's check for each shoe
// dealt: a floor dealing 5,000 shoes a day raises one false alarm in
// about five years.
const shoeAlpha = 1e-7

// shoeRefresh is how often a witness loads the prints other witnesses
// wrote, and shoePrune how often it drops the old ones.
const (
	shoeRefresh = 10 * time.Second
	shoePrune   = time.Hour
)

// shoeWatch is a witness's memory of the floor's shoes.
type shoeWatch struct {
	st    shoeStore
	keep  time.Duration
	clock clock.Clock
	log   *slog.Logger
	name  string

	mu     sync.Mutex
	index  *coup.PrintIndex
	prints map[shoeKey]*floorPrint
	byID   map[int]*floorPrint
	tables map[string]*tableShoe
	dirty  []*floorPrint // prints to write
	// loaded: prints written up to then are in memory; pruned: when the
	// old ones were last dropped.
	loaded, pruned time.Time
}

type shoeKey struct {
	table string
	shoe  int64
}

// floorPrint is one shoe in the index.
type floorPrint struct {
	key     shoeKey
	id      int
	first   time.Time // when its first card was witnessed
	lastSeq int64     // the row of its last card
	dirty   bool      // not yet written to the database
}

// tableShoe is the shoe a table is dealing, as this witness follows it.
type tableShoe struct {
	p       *floorPrint
	lastRow int64 // the table's last row this witness took, of any kind
	runs    coup.RunWatch
	raised  bool
}

// newShoeWatch starts a witness's shoe watch on its store; nil (no watch)
// when keep is negative.
func newShoeWatch(ctx context.Context, s Store, keep time.Duration, clk clock.Clock, log *slog.Logger, name string) (*shoeWatch, error) {
	if keep < 0 {
		return nil, nil
	}
	if keep == 0 {
		keep = DefaultShoeKeep
	}
	st, err := shoeStoreOf(ctx, s)
	if err != nil {
		return nil, err
	}
	w := &shoeWatch{st: st, keep: keep, clock: clk, log: log, name: name, index: coup.NewPrintIndex(),
		prints: map[shoeKey]*floorPrint{}, byID: map[int]*floorPrint{}, tables: map[string]*tableShoe{}}
	now := clk.Now()
	if err := w.refresh(ctx, now); err != nil {
		return nil, err
	}
	w.pruned = now
	return w, nil
}

// take follows the in.card rows of a batch the witness has committed and
// returns the alerts it raised and resolved. Its failures are logged, not
// returned: the rows are witnessed whatever becomes of the prints.
func (w *shoeWatch) take(ctx context.Context, items []item, store Store) []Alert {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	if now.Sub(w.loaded) >= shoeRefresh {
		if err := w.refresh(ctx, now); err != nil {
			w.log.Warn("shoe prints not loaded", "err", err)
		}
	}
	if now.Sub(w.pruned) >= shoePrune {
		w.prune(ctx, now)
	}
	tables, byTable := batchTables(items)
	var alerts []Alert
	for _, t := range tables {
		var rows []*Row
		for _, it := range byTable[t] {
			if it.row != nil {
				rows = append(rows, it.row)
			}
		}
		if len(rows) == 0 {
			continue
		}
		slices.SortFunc(rows, func(a, b *Row) int { return cmpInt(a.Seq, b.Seq) })
		ts := w.tables[t]
		if ts == nil || rows[0].Seq > ts.lastRow+1 {
			// Rows this witness did not see came between (another
			// witness's, or a gap): carry on from what the database has.
			var err error
			if ts, err = w.resume(ctx, t, ts); err != nil {
				w.log.Warn("shoe print not read", "table", t, "err", err)
				continue
			}
		}
		for _, row := range rows {
			alerts = append(alerts, w.row(ctx, ts, row, store, now)...)
		}
	}
	if err := w.save(ctx, now); err != nil {
		w.log.Warn("shoe prints not written", "err", err)
	}
	return alerts
}

// row takes one row of a table in order.
func (w *shoeWatch) row(ctx context.Context, ts *tableShoe, row *Row, store Store, now time.Time) []Alert {
	if row.Seq <= ts.lastRow {
		return nil // a redelivery, or late
	}
	ts.lastRow = row.Seq
	if row.Kind != string(coup.InCard) {
		return nil
	}
	var in struct {
		Card       *coup.Card `json:"card"`
		Unreadable bool       `json:"unreadable"`
	}
	if err := json.Unmarshal(row.Body, &in); err != nil {
		return nil // the hash was checked: a row the table wrote, not one for this
	}
	var alerts []Alert
	if ts.p == nil || row.Shoe > ts.p.key.shoe {
		// A new shoe: the table's alert, if any, was the last shoe's
		// (raised by this witness or another, before a restart).
		if ts.p != nil {
			a, err := store.resolve(ctx, ts.p.key.table, AlertShuffleSuspect, now.UTC())
			if err != nil {
				w.log.Warn("shuffle alert not resolved", "table", ts.p.key.table, "err", err)
			}
			for i := range a {
				a[i].Witness = w.name
			}
			alerts = append(alerts, a...)
		}
		ts.p, ts.runs, ts.raised = w.addPrint(shoeKey{row.Table, row.Shoe}, nil, now, 0), coup.RunWatch{}, false
	} else if row.Shoe < ts.p.key.shoe {
		return nil
	}
	p := ts.p
	card := uint8(coup.PrintUnread)
	if in.Card != nil && !in.Unreadable {
		card = coup.PrintCard(*in.Card)
	}
	if len(w.index.Print(p.id)) >= coup.MaxPrint {
		return alerts
	}
	w.index.Extend(p.id, []uint8{card})
	p.lastSeq = row.Seq
	w.touched(p)
	cards := w.index.Print(p.id)
	r := ts.runs.Card(w.index, cards, p.id)
	need := coup.RepeatRun(w.index.Cards(), shoeAlpha)
	if r.Len < need || ts.raised {
		return alerts
	}
	ts.raised = true
	a, err := w.raise(ctx, store, ts, r, row, need, now)
	if err != nil {
		w.log.Warn("shuffle alert not stored", "table", p.key.table, "err", err)
	}
	return append(alerts, a...)
}

func (w *shoeWatch) raise(ctx context.Context, store Store, ts *tableShoe, r coup.Run, row *Row, need int, now time.Time) ([]Alert, error) {
	p, other := ts.p, w.byID[r.Print]
	if other == nil {
		return nil, fmt.Errorf("a run in print %d, which has no shoe", r.Print)
	}
	span := len(w.index.Print(p.id)) - r.From
	first, last, how := r.At+1, r.At+span, "in the same order"
	if r.Backwards {
		last, how = r.At-span+2, "in reverse order (its discards put back as they lay)"
	}
	which := fmt.Sprintf("shoe %d of table %s", other.key.shoe, other.key.table)
	if other.key.table == p.key.table {
		which = fmt.Sprintf("this table's shoe %d", other.key.shoe)
	}
	msg := fmt.Sprintf("shoe %d of %s: its cards %d to %d repeat %d cards in a row of %s (witnessed from %s), its cards %d to %d %s; a run of %d among the %d shoes the floor keeps happens by chance less than once in %.0f million shoes",
		p.key.shoe, p.key.table, r.From+1, len(w.index.Print(p.id)), r.Len, which, other.first.UTC().Format(time.RFC3339), first, last, how,
		need, w.index.Len(), 1/coup.RepeatFalseAlarm(need, w.index.Cards())/1e6)
	a := Alert{State: "raised", Table: p.key.table, Kind: AlertShuffleSuspect, Seq: row.Seq, Message: msg, Tamper: Tamper(AlertShuffleSuspect),
		Witness: w.name, At: now.UTC(), key: strconv.FormatInt(p.key.shoe, 10)}
	a, stored, err := store.raise(ctx, a)
	if err != nil || !stored {
		return nil, err
	}
	return []Alert{a}, nil
}

// addPrint puts a shoe into the index.
func (w *shoeWatch) addPrint(k shoeKey, cards []uint8, first time.Time, lastSeq int64) *floorPrint {
	if old := w.prints[k]; old != nil {
		w.dropPrint(old)
	}
	p := &floorPrint{key: k, first: first, lastSeq: lastSeq}
	p.id = w.index.Add(cards)
	w.prints[k], w.byID[p.id] = p, p
	return p
}

func (w *shoeWatch) dropPrint(p *floorPrint) {
	w.index.Remove(p.id)
	delete(w.prints, p.key)
	delete(w.byID, p.id)
	for t, ts := range w.tables {
		if ts.p == p {
			delete(w.tables, t)
		}
	}
}

// resume sets a table's shoe up from the database when it knows more
// than this witness: the print of the table's newest shoe, followed
// through the index again, and its last card's row.
func (w *shoeWatch) resume(ctx context.Context, table string, ts *tableShoe) (*tableShoe, error) {
	sp, ok, err := w.st.tablePrint(ctx, table)
	if err != nil {
		return nil, err
	}
	if ts == nil {
		ts = &tableShoe{}
		w.tables[table] = ts
	}
	if !ok || ts.p != nil && (sp.shoe < ts.p.key.shoe || sp.shoe == ts.p.key.shoe && sp.lastSeq <= ts.lastRow) {
		return ts, nil
	}
	k := shoeKey{table, sp.shoe}
	p := w.prints[k]
	switch {
	case p == nil:
		p = w.addPrint(k, sp.cards, sp.first, sp.lastSeq)
	case len(sp.cards) > len(w.index.Print(p.id)):
		w.index.Extend(p.id, sp.cards[len(w.index.Print(p.id)):])
		p.lastSeq = sp.lastSeq
	}
	ts.p, ts.runs, ts.raised, ts.lastRow = p, coup.RunWatch{}, false, max(ts.lastRow, sp.lastSeq)
	cards := w.index.Print(p.id)
	for i := range cards {
		ts.runs.Card(w.index, cards[:i+1], p.id)
	}
	return ts, nil
}

// refresh loads the prints written since the last load (by any witness).
func (w *shoeWatch) refresh(ctx context.Context, now time.Time) error {
	since := w.loaded.Add(-time.Minute) // clocks of several witnesses differ a little
	sps, err := w.st.loadPrints(ctx, since, now.Add(-w.keep))
	if err != nil {
		return err
	}
	for _, sp := range sps {
		k := shoeKey{sp.table, sp.shoe}
		p := w.prints[k]
		switch {
		case p == nil:
			w.addPrint(k, sp.cards, sp.first, sp.lastSeq)
		case !p.dirty && sp.lastSeq > p.lastSeq && len(sp.cards) > len(w.index.Print(p.id)):
			w.index.Extend(p.id, sp.cards[len(w.index.Print(p.id)):])
			p.lastSeq = sp.lastSeq
		}
	}
	w.loaded = now
	return nil
}

// prune drops the prints older than keep, from memory and the database.
func (w *shoeWatch) prune(ctx context.Context, now time.Time) {
	before := now.Add(-w.keep)
	for _, p := range w.prints {
		if p.first.Before(before) {
			w.dropPrint(p)
		}
	}
	if err := w.st.prunePrints(ctx, before); err != nil {
		w.log.Warn("old shoe prints not deleted", "err", err)
	}
	w.pruned = now
}

// save writes the prints that took cards.
func (w *shoeWatch) save(ctx context.Context, now time.Time) error {
	if len(w.dirty) == 0 {
		return nil
	}
	sps := make([]storedPrint, 0, len(w.dirty))
	for _, p := range w.dirty {
		if w.prints[p.key] == p {
			sps = append(sps, storedPrint{table: p.key.table, shoe: p.key.shoe, cards: w.index.Print(p.id), lastSeq: p.lastSeq, first: p.first})
		}
	}
	if err := w.st.savePrints(ctx, sps, now); err != nil {
		return err
	}
	for _, p := range w.dirty {
		p.dirty = false
	}
	w.dirty = w.dirty[:0]
	return nil
}

// touched marks p to be written.
func (w *shoeWatch) touched(p *floorPrint) {
	if !p.dirty {
		p.dirty = true
		w.dirty = append(w.dirty, p)
	}
}
