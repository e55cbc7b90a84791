package coup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A snapshot is the whole state of a Table as bytes, so that a controller
// can start from the last one stored in its trail instead of replaying every
// row since the first. Restoring a snapshot and applying the inputs after it
// must leave exactly the table that replaying from row 1 leaves: the audit
// package checks that property on every replay, byte for byte.
//
// This file is the one place that knows the Table's fields for snapshots:
// snapshot_test.go fails when a field of Table (or of the types below) is
// added without being carried here.

// SnapshotFormat names the snapshot encoding; a change to it is a new name.
const SnapshotFormat = "tablectl-table-v1"

// ErrSnapshot: the bytes are not a snapshot this build can restore.
var ErrSnapshot = errors.New("invalid table snapshot")

// tableSnapshot mirrors Table field for field (same names, capitalised).
// Cards are written as numbers (cardCode) because a zero Card, which
// several fields hold on purpose, has no text form.
type tableSnapshot struct {
	Format string `json:"format"`

	Cfg TableConfig `json:"cfg"`

	Phase Phase      `json:"phase"`
	Shoe  int        `json:"shoe"`
	Coup  int        `json:"coup"`
	Comp  snapShoe   `json:"comp"`
	Burn  snapBurn   `json:"burn"`
	Cards []snapCard `json:"cards"`
	// Strays are the coup's cards drawn while suspended (absent before).
	Strays []snapStray `json:"strays,omitempty"`
	// OpenedAt is when the coup's betting opened (absent before).
	OpenedAt time.Time `json:"opened_at,omitzero"`

	Pending  int       `json:"pending"`
	Result   *Result   `json:"result"`
	ResultAt time.Time `json:"result_at"`
	Final    bool      `json:"final"`

	CutSeen  bool `json:"cut_seen"`
	LastCoup int  `json:"last_coup"`

	ManualSuspend string  `json:"manual_suspend"`
	Alerts        []Alert `json:"alerts"`
	NextAlert     int     `json:"next_alert"`
	Link          string  `json:"link"`
	LastSeq       uint32  `json:"last_seq"`

	Deadline time.Time `json:"deadline"`

	Coups  []snapRecord `json:"coups"`
	Recall []snapRecord `json:"recall"`

	Shuffle snapShuffle `json:"shuffle"`
	// Watch is the shuffle check of RulesShoePrint, absent when it never
	// ran (so that tables of the rules before snapshot as they did).
	Watch *snapWatch `json:"watch,omitempty"`

	Dealer string `json:"dealer"`
}

// snapShoe mirrors Shoe.
type snapShoe struct {
	Decks  int               `json:"decks"`
	Counts [CardCount]uint16 `json:"counts"`
	Total  int               `json:"total"`
}

// snapBurn mirrors BurnState.
type snapBurn struct {
	First    *uint16 `json:"first"`
	Required int     `json:"required"`
	Burned   int     `json:"burned"`
}

// snapCard mirrors DealtCard, whose Position is not in its JSON form. The
// names are short: a shoe's coups hold hundreds of cards.
type snapCard struct {
	Position   Position `json:"p"`
	Card       uint16   `json:"c"`
	Unreadable bool     `json:"u,omitempty"`
	Impossible bool     `json:"i,omitempty"`
	Manual     bool     `json:"m,omitempty"`
	Hidden     bool     `json:"h,omitempty"`
	ShoeSeq    uint32   `json:"q,omitempty"`
}

// snapRecord mirrors CoupRecord.
type snapRecord struct {
	Shoe    int         `json:"shoe"`
	Coup    int         `json:"coup"`
	Cards   []snapCard  `json:"cards"`
	Result  *Result     `json:"result"`
	Voided  bool        `json:"voided"`
	Actions []string    `json:"actions"`
	Dealer  string      `json:"dealer"`
	Strays  []snapStray `json:"strays,omitempty"`
}

// snapStray mirrors StrayCard.
type snapStray struct {
	snapCard
	After       int  `json:"after"`
	BettingOpen bool `json:"betting_open,omitempty"`
}

func snapStrays(cs []StrayCard) []snapStray {
	if cs == nil {
		return nil
	}
	out := make([]snapStray, len(cs))
	for i, c := range cs {
		out[i] = snapStray{snapCard: snapCards([]DealtCard{c.DealtCard})[0], After: c.After, BettingOpen: c.BettingOpen}
	}
	return out
}

func strayCards(cs []snapStray) []StrayCard {
	if cs == nil {
		return nil
	}
	out := make([]StrayCard, len(cs))
	for i, c := range cs {
		out[i] = StrayCard{DealtCard: dealtCards([]snapCard{c.snapCard})[0], After: c.After, BettingOpen: c.BettingOpen}
	}
	return out
}

// snapShuffle mirrors shuffleWatch.
type snapShuffle struct {
	Head    []uint16                                       `json:"head"`
	NHead   int                                            `json:"n_head"`
	Tail    []uint16                                       `json:"tail"`
	NTail   int                                            `json:"n_tail"`
	Sorted  int                                            `json:"sorted"`
	Washed  int                                            `json:"washed"`
	Repeats [ShuffleMemory][2][2*repeatedOffsets + 1]uint8 `json:"repeats"`
	Raised  bool                                           `json:"raised"`
	Prev    []snapEnds                                     `json:"prev"`
}

// snapEnds mirrors shoeEnds.
type snapEnds struct {
	First        []uint16 `json:"first"`
	LastReversed []uint16 `json:"last_reversed"`
}

// snapWatch mirrors shoeWatch; prints are in FormatPrint's notation.
type snapWatch struct {
	Decks  uint8                        `json:"decks"`
	N      uint16                       `json:"n"`
	Print  string                       `json:"print"`
	Counts [CardCount]uint8             `json:"counts"`
	Left   uint16                       `json:"left"`
	Heads  []string                     `json:"heads"`
	Dirs   [orderModelCount][4][2]uint8 `json:"dirs"`
	Score  [orderModelCount]int32       `json:"score"`
	Start  [orderModelCount]uint16      `json:"start"`
	Runs   snapRunWatch                 `json:"runs"`
	Raised uint8                        `json:"raised"`
	Mem    []string                     `json:"mem"`
}

// snapRunWatch mirrors RunWatch, its runs in use only.
type snapRunWatch struct {
	Runs []snapRun `json:"runs"`
	N    int       `json:"n"`
}

// snapRun mirrors activeRun.
type snapRun struct {
	Print int32 `json:"print"`
	Next  int16 `json:"next"`
	Len   int16 `json:"len"`
	From  int16 `json:"from"`
	At    int16 `json:"at"`
	Back  bool  `json:"back"`
}

func snapShoeWatch(w *shoeWatch) *snapWatch {
	if w.decks == 0 && w.mem == nil && w.n == 0 {
		return nil
	}
	s := &snapWatch{Decks: w.decks, N: w.n, Print: FormatPrint(w.print[:w.n]), Counts: w.counts, Left: w.left,
		Heads: make([]string, orderModelCount), Dirs: w.dirs, Score: w.score, Start: w.start, Raised: w.raised,
		Runs: snapRunWatch{N: w.runs.n, Runs: []snapRun{}}, Mem: []string{}}
	for k := range w.heads {
		s.Heads[k] = FormatPrint(w.heads[k][:])
	}
	for _, r := range w.runs.runs[:w.runs.n] {
		s.Runs.Runs = append(s.Runs.Runs, snapRun{Print: r.print, Next: r.next, Len: r.len, From: r.from, At: r.at, Back: r.back})
	}
	if w.mem != nil {
		for _, p := range w.mem.prints {
			s.Mem = append(s.Mem, FormatPrint(p))
		}
	}
	return s
}

// restoreWatch checks and rebuilds what snapShoeWatch wrote.
func restoreWatch(s *snapWatch) (shoeWatch, error) {
	var w shoeWatch
	if s == nil {
		return w, nil
	}
	if s.Decks != 0 && !ValidDecks(int(s.Decks)) {
		return w, fmt.Errorf("shuffle check of %d decks", s.Decks)
	}
	p, err := ParsePrint(s.Print)
	if err != nil || len(p) != int(s.N) {
		return w, fmt.Errorf("shuffle check's print of %d cards: %d read (%v)", s.N, len(p), err)
	}
	if err := restoreHeads(&w, s.Heads); err != nil {
		return w, err
	}
	left := 0
	for _, c := range s.Counts {
		if c > s.Decks {
			return w, fmt.Errorf("shuffle check: %d copies of a card left of %d decks", c, s.Decks)
		}
		left += int(c)
	}
	if left != int(s.Left) {
		return w, fmt.Errorf("shuffle check: %d cards left, the counts say %d", s.Left, left)
	}
	if w.mem, err = restoreMemory(s.Mem); err != nil {
		return w, err
	}
	if err := restoreRuns(&w, s.Runs, len(s.Mem)); err != nil {
		return w, err
	}
	w.decks, w.n, w.counts, w.left, w.dirs, w.score, w.start, w.raised = s.Decks, s.N, s.Counts, s.Left, s.Dirs, s.Score, s.Start, s.Raised
	copy(w.print[:], p)
	return w, nil
}

func restoreHeads(w *shoeWatch, heads []string) error {
	if len(heads) != orderModelCount {
		return fmt.Errorf("shuffle check's piles of %d models, want %d", len(heads), orderModelCount)
	}
	for k, t := range heads {
		h, err := ParsePrint(t)
		if err != nil || len(h) != maxPiles {
			return fmt.Errorf("shuffle check's piles: %d read, want %d (%v)", len(h), maxPiles, err)
		}
		copy(w.heads[k][:], h)
	}
	return nil
}

func restoreMemory(mem []string) (*shoeMemory, error) {
	if len(mem) > ShoeMemory {
		return nil, fmt.Errorf("shuffle check remembers %d shoes, at most %d", len(mem), ShoeMemory)
	}
	if len(mem) == 0 {
		return nil, nil
	}
	prints := make([][]uint8, len(mem))
	for i, m := range mem {
		var err error
		if prints[i], err = ParsePrint(m); err != nil {
			return nil, fmt.Errorf("shuffle check's shoe %d: %w", i+1, err)
		}
	}
	return (&shoeMemory{}).remember(prints, false), nil
}

func restoreRuns(w *shoeWatch, s snapRunWatch, prints int) error {
	if s.N != len(s.Runs) || s.N > maxRuns {
		return fmt.Errorf("shuffle check follows %d runs (%d given, at most %d)", s.N, len(s.Runs), maxRuns)
	}
	for i, r := range s.Runs {
		if r.Print < 0 || int(r.Print) >= prints || r.Next < -1 || r.Next > MaxPrint || r.Len < 0 || r.From < 0 || r.At < 0 {
			return fmt.Errorf("shuffle check's run %d: %+v", i+1, r)
		}
		w.runs.runs[i] = activeRun{print: r.Print, next: r.Next, len: r.Len, from: r.From, at: r.At, back: r.Back}
	}
	w.runs.n = s.N
	return nil
}

// cardCode writes a card, valid or zero, as one number.
func cardCode(c Card) uint16 { return uint16(c.Rank)<<8 | uint16(c.Suit) }

func codeCard(v uint16) Card { return Card{Rank: Rank(v >> 8), Suit: Suit(v & 0xff)} }

func cardCodes(cs []Card) []uint16 {
	if cs == nil {
		return nil
	}
	out := make([]uint16, len(cs))
	for i, c := range cs {
		out[i] = cardCode(c)
	}
	return out
}

func codeCards(vs []uint16) []Card {
	if vs == nil {
		return nil
	}
	out := make([]Card, len(vs))
	for i, v := range vs {
		out[i] = codeCard(v)
	}
	return out
}

func snapCards(cs []DealtCard) []snapCard {
	if cs == nil {
		return nil
	}
	out := make([]snapCard, len(cs))
	for i, c := range cs {
		out[i] = snapCard{Position: c.Position, Card: cardCode(c.Card), Unreadable: c.Unreadable, Impossible: c.Impossible,
			Manual: c.Manual, Hidden: c.Hidden, ShoeSeq: c.ShoeSeq}
	}
	return out
}

func dealtCards(cs []snapCard) []DealtCard {
	if cs == nil {
		return nil
	}
	out := make([]DealtCard, len(cs))
	for i, c := range cs {
		out[i] = DealtCard{Position: c.Position, Card: codeCard(c.Card), Unreadable: c.Unreadable, Impossible: c.Impossible,
			Manual: c.Manual, Hidden: c.Hidden, ShoeSeq: c.ShoeSeq}
	}
	return out
}

func snapRecords(rs []CoupRecord) []snapRecord {
	if rs == nil {
		return nil
	}
	out := make([]snapRecord, len(rs))
	for i, r := range rs {
		out[i] = snapRecord{Shoe: r.Shoe, Coup: r.Coup, Cards: snapCards(r.Cards), Result: r.Result, Voided: r.Voided, Actions: r.Actions, Dealer: r.Dealer,
			Strays: snapStrays(r.Strays)}
	}
	return out
}

func coupRecords(rs []snapRecord) []CoupRecord {
	if rs == nil {
		return nil
	}
	out := make([]CoupRecord, len(rs))
	for i, r := range rs {
		out[i] = CoupRecord{Shoe: r.Shoe, Coup: r.Coup, Cards: dealtCards(r.Cards), Result: r.Result, Voided: r.Voided, Actions: r.Actions, Dealer: r.Dealer,
			Strays: strayCards(r.Strays)}
	}
	return out
}

// Snapshot encodes the table's whole state as JSON (see RestoreSnapshot).
// The same state always gives the same bytes.
func (t *Table) Snapshot() ([]byte, error) {
	s := tableSnapshot{
		Format: SnapshotFormat,
		Cfg:    t.cfg,
		Phase:  t.phase, Shoe: t.shoe, Coup: t.coup,
		Comp:  snapShoe{Decks: t.comp.decks, Counts: t.comp.counts, Total: t.comp.total},
		Burn:  snapBurn{Required: t.burn.Required, Burned: t.burn.Burned},
		Cards: snapCards(t.cards), Strays: snapStrays(t.strays), OpenedAt: t.openedAt, Pending: t.pending, Result: t.result, ResultAt: t.resultAt, Final: t.final,
		CutSeen: t.cutSeen, LastCoup: t.lastCoup,
		ManualSuspend: t.manualSuspend, Alerts: t.alerts, NextAlert: t.nextAlert, Link: t.link, LastSeq: t.lastSeq,
		Deadline: t.deadline,
		Coups:    snapRecords(t.coups), Recall: snapRecords(t.recall),
		Dealer: t.dealer,
		Watch:  snapShoeWatch(&t.watch),
		Shuffle: snapShuffle{
			Head: cardCodes(t.shuffle.head[:]), NHead: t.shuffle.nHead, Tail: cardCodes(t.shuffle.tail[:]), NTail: t.shuffle.nTail,
			Sorted: t.shuffle.sorted, Washed: t.shuffle.washed, Repeats: t.shuffle.repeats, Raised: t.shuffle.raised,
		},
	}
	if t.burn.First != nil {
		v := cardCode(*t.burn.First)
		s.Burn.First = &v
	}
	if t.shuffle.prev != nil {
		s.Shuffle.Prev = make([]snapEnds, len(t.shuffle.prev))
		for i, e := range t.shuffle.prev {
			s.Shuffle.Prev[i] = snapEnds{First: cardCodes(e.first), LastReversed: cardCodes(e.lastReversed)}
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("table snapshot: %w", err)
	}
	return b, nil
}

// RestoreSnapshot rebuilds a table from the bytes Snapshot wrote. It checks
// the form and the configuration, not the game: a snapshot is only taken
// from a trail whose chain and signatures were verified.
func RestoreSnapshot(b []byte) (*Table, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s tableSnapshot
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the object", ErrSnapshot)
	}
	if s.Format != SnapshotFormat {
		return nil, fmt.Errorf("%w: format %.80q, this build reads %q", ErrSnapshot, s.Format, SnapshotFormat)
	}
	if err := s.Cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if len(s.Shuffle.Head) != ShuffleWindow || len(s.Shuffle.Tail) != shoeEndKeep {
		return nil, fmt.Errorf("%w: shuffle memory of %d and %d cards, want %d and %d", ErrSnapshot,
			len(s.Shuffle.Head), len(s.Shuffle.Tail), ShuffleWindow, shoeEndKeep)
	}
	if s.Pending < -1 || s.Pending >= len(s.Cards) {
		return nil, fmt.Errorf("%w: pending card %d of %d", ErrSnapshot, s.Pending, len(s.Cards))
	}
	var err error
	t := &Table{
		cfg:   s.Cfg,
		phase: s.Phase, shoe: s.Shoe, coup: s.Coup,
		comp:  Shoe{decks: s.Comp.Decks, counts: s.Comp.Counts, total: s.Comp.Total},
		burn:  BurnState{Required: s.Burn.Required, Burned: s.Burn.Burned},
		cards: dealtCards(s.Cards), strays: strayCards(s.Strays), openedAt: s.OpenedAt, pending: s.Pending, result: s.Result, resultAt: s.ResultAt, final: s.Final,
		cutSeen: s.CutSeen, lastCoup: s.LastCoup, dealer: s.Dealer,
		manualSuspend: s.ManualSuspend, alerts: s.Alerts, nextAlert: s.NextAlert, link: s.Link, lastSeq: s.LastSeq,
		deadline: s.Deadline,
		coups:    coupRecords(s.Coups), recall: coupRecords(s.Recall),
	}
	if s.Burn.First != nil {
		c := codeCard(*s.Burn.First)
		t.burn.First = &c
	}
	if t.watch, err = restoreWatch(s.Watch); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	copy(t.shuffle.head[:], codeCards(s.Shuffle.Head))
	copy(t.shuffle.tail[:], codeCards(s.Shuffle.Tail))
	t.shuffle.nHead, t.shuffle.nTail = s.Shuffle.NHead, s.Shuffle.NTail
	t.shuffle.sorted, t.shuffle.washed, t.shuffle.repeats, t.shuffle.raised = s.Shuffle.Sorted, s.Shuffle.Washed, s.Shuffle.Repeats, s.Shuffle.Raised
	if s.Shuffle.Prev != nil {
		t.shuffle.prev = make([]shoeEnds, len(s.Shuffle.Prev))
		for i, e := range s.Shuffle.Prev {
			t.shuffle.prev[i] = shoeEnds{first: codeCards(e.First), lastReversed: codeCards(e.LastReversed)}
		}
	}
	return t, nil
}
