// Package roads is the scoreboard of a shoe as baccarat tables draw it (seed
// 003): the bead plate, the big road, the three roads derived from it, the
// shoe's statistics and the predictions. It is pure computation from coup
// results, like coup itself: no I/O, no clock. The MQTT publisher keeps one
// per table for public/roads, and the web display's tests hold their pages
// to it.
package roads

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/tablectl/tablectl/coup"
)

// The scoreboard ("roads") of seed 003: bead plate, big road and the three
// roads derived from the big road, with the shoe's statistics and the
// prediction of what each derived road would add next. Everything here is a
// pure function of the results on the roads, in coup order, so a voided coup
// is handled by building again without it.

// RoadRows is how deep every road's grid is: six rows, as casino boards draw
// them.
const RoadRows = 6

// MaxRoadCoups bounds the coups one shoe can put on the roads: an 8-deck shoe
// holds 416 cards and a coup takes at least four.
const MaxRoadCoups = coup.MaxCardList / 4

// ErrCoupOrder reports a coup number that is not after the last one on the
// roads: coups enter the roads once each, in the order they were dealt.
var ErrCoupOrder = errors.New("coup number out of order on the roads")

// ErrBadResult reports a result the roads cannot show: no winner, a point
// outside 0-9, or a winner the points contradict.
var ErrBadResult = errors.New("result not fit for the roads")

// ErrRoadsFull reports more coups than any shoe can deal.
var ErrRoadsFull = errors.New("more coups than a shoe can deal")

// Colour is a mark on a derived road: red when the big road repeats its
// pattern, blue when it breaks it. It says nothing about Banker or Player.
// ColourNone is "no mark", which is null in JSON.
type Colour uint8

// The derived roads' colours.
const (
	ColourNone Colour = iota
	ColourRed
	ColourBlue
)

func (c Colour) String() string {
	switch c {
	case ColourNone:
		return "none"
	case ColourRed:
		return "red"
	case ColourBlue:
		return "blue"
	}
	return fmt.Sprintf("colour(%d)", uint8(c))
}

// MarshalJSON writes "red", "blue", or null for ColourNone.
func (c Colour) MarshalJSON() ([]byte, error) {
	switch c {
	case ColourNone:
		return []byte("null"), nil
	case ColourRed, ColourBlue:
		return []byte(`"` + c.String() + `"`), nil
	}
	return nil, fmt.Errorf("invalid colour %d", uint8(c))
}

// UnmarshalJSON reads "red", "blue" or null.
func (c *Colour) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = ColourNone
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("colour: %w", err)
	}
	switch s {
	case "red":
		*c = ColourRed
	case "blue":
		*c = ColourBlue
	default:
		return fmt.Errorf("unknown colour %q (want red, blue or null)", clipRoads(s))
	}
	return nil
}

// View is the scoreboard of the current shoe, published retained on
// public/roads after every result, void and new shoe. Voided coups are not
// on it; a new shoe starts it empty. Every list is present (possibly empty),
// never null.
//
//	{
//	  "bead_plate": [                      every coup in order, ties included, 6 per column
//	    {"coup": 1, "col": 0, "row": 0, "result": "banker", "point": 7,
//	     "player_pair": false, "banker_pair": true, "natural": false}, ...],
//	  "big_road": [                        logical columns: one per streak of Banker or Player
//	    [{"coup": 1, "result": "banker", "ties": 0, "player_pair": false,
//	      "banker_pair": true, "point": 7}, ...], ...],
//	  "big_road_leading_ties": 0,          ties before the shoe's first Banker or Player result
//	  "big_eye_boy":   ["red", "blue", ...],   logical marks, one per big road entry
//	  "small_road":    ["red", ...],             from each road's starting point on
//	  "cockroach_pig": ["blue", ...],
//	  "grid": {                            where a display draws each mark, six rows deep
//	    "big_road": [{"col": 0, "row": 0, "coup": 1, "result": "banker", "ties": 0,
//	                  "player_pair": false, "banker_pair": true, "point": 7}, ...],
//	    "big_eye_boy":   [{"col": 0, "row": 0, "colour": "red"}, ...],
//	    "small_road":    [...],
//	    "cockroach_pig": [...]
//	  },
//	  "stats": {"coups": 12,
//	    "banker": {"count": 6, "percent": 50}, "player": {...}, "tie": {...},
//	    "player_pairs": {...}, "banker_pairs": {...}, "naturals": {...}},
//	  "predict": {
//	    "banker": {"big_eye_boy": "red", "small_road": "blue", "cockroach_pig": null},
//	    "player": {"big_eye_boy": "blue", "small_road": "red", "cockroach_pig": null}
//	  }
//	}
//
// Results are "banker", "player" or "tie"; "point" is the winning hand's
// point (the tied point on a tie). Grid columns and rows count from 0 at the
// top left; a display showing a fixed number of columns shows the last ones.
//
// Big road: a new column for each change of winner; ties do not take a cell,
// they count on the last cell ("ties", drawn as a green slash with the
// number); ties before the first result are "big_road_leading_ties" and are
// drawn on the first cell ("leading_ties" on grid cell 0,0, absent when
// there are none; until the first Banker or Player result that cell has
// "result": "tie"). Pair flags on a big road cell are that coup's own; a
// tie's pairs show on the bead plate.
//
// Grid layout, for the big road and the derived roads alike: a column runs
// down; when the next cell down is past the sixth row or already taken, it
// turns right along its row and keeps going right (the dragon tail). A new
// column starts at the top of the grid column right of where the previous
// column started, or further right if a tail has taken that top cell.
//
// Derived roads (seed 003): each Banker or Player entry of the big road,
// from the road's starting point on, adds one mark. Big eye boy starts at the
// big road's 2nd cell of column 2 (1st cell of column 3 when column 2 has
// one cell), small road at the entry after the first entry of column 3,
// cockroach pig at the entry after the first entry of column 4. An entry that
// starts a new column compares the lengths of the column before it and the
// column 1 (big eye boy), 2 (small road) or 3 (cockroach pig) further left:
// equal is red, else blue. An entry that goes down compares, in the column 1,
// 2 or 3 to its left, the cell beside it with the cell above that one: both
// taken or both empty is red, else blue. Columns are logical: a dragon tail
// counts its full length. The derived grids start a new column whenever the
// colour changes.
//
// Stats count the coups on the roads; "percent" is count / coups * 100 to one
// decimal (0 with no coups). "naturals" counts coups with a natural on either
// hand. "predict" is the mark each derived road would add if the next result
// were Banker, or Player; null when that road would add nothing yet. A tie
// adds nothing to any derived road.
type View struct {
	BeadPlate          []BeadCell       `json:"bead_plate"`
	BigRoad            [][]BigRoadEntry `json:"big_road"`
	BigRoadLeadingTies int              `json:"big_road_leading_ties"`
	BigEyeBoy          []Colour         `json:"big_eye_boy"`
	SmallRoad          []Colour         `json:"small_road"`
	CockroachPig       []Colour         `json:"cockroach_pig"`
	Grid               Grid             `json:"grid"`
	Stats              Stats            `json:"stats"`
	Predict            Predict          `json:"predict"`
}

// BeadCell is one coup on the bead plate.
type BeadCell struct {
	Coup       int       `json:"coup"`
	Col        int       `json:"col"`
	Row        int       `json:"row"`
	Result     coup.Side `json:"result"`
	Point      int       `json:"point"`
	PlayerPair bool      `json:"player_pair"`
	BankerPair bool      `json:"banker_pair"`
	Natural    bool      `json:"natural"`
}

// BigRoadEntry is one Banker or Player result on the big road, with the ties
// that followed it.
type BigRoadEntry struct {
	Coup       int       `json:"coup"`
	Result     coup.Side `json:"result"`
	Ties       int       `json:"ties"`
	PlayerPair bool      `json:"player_pair"`
	BankerPair bool      `json:"banker_pair"`
	Point      int       `json:"point"`
}

// BigRoadCell is a big road entry where the grid draws it.
type BigRoadCell struct {
	Col int `json:"col"`
	Row int `json:"row"`
	BigRoadEntry
	// LeadingTies is set on the first cell only: the ties before the shoe's
	// first Banker or Player result.
	LeadingTies int `json:"leading_ties,omitempty"`
}

// DerivedCell is a derived road's mark where the grid draws it.
type DerivedCell struct {
	Col    int    `json:"col"`
	Row    int    `json:"row"`
	Colour Colour `json:"colour"`
}

// Grid is every road's cells as a display draws them.
type Grid struct {
	BigRoad      []BigRoadCell `json:"big_road"`
	BigEyeBoy    []DerivedCell `json:"big_eye_boy"`
	SmallRoad    []DerivedCell `json:"small_road"`
	CockroachPig []DerivedCell `json:"cockroach_pig"`
}

// StatCount is a count of coups and its share of all coups on the roads.
type StatCount struct {
	Count   int     `json:"count"`
	Percent float64 `json:"percent"`
}

// RoadStats are the shoe's statistics.
type Stats struct {
	Coups       int       `json:"coups"`
	Banker      StatCount `json:"banker"`
	Player      StatCount `json:"player"`
	Tie         StatCount `json:"tie"`
	PlayerPairs StatCount `json:"player_pairs"`
	BankerPairs StatCount `json:"banker_pairs"`
	Naturals    StatCount `json:"naturals"`
}

// DerivedPrediction is the mark each derived road would add.
type DerivedPrediction struct {
	BigEyeBoy    Colour `json:"big_eye_boy"`
	SmallRoad    Colour `json:"small_road"`
	CockroachPig Colour `json:"cockroach_pig"`
}

// Predict is what the derived roads would add if the next result were
// Banker, or Player (seed 003's "predikčná tabuľka", the B? and P? buttons).
type Predict struct {
	Banker DerivedPrediction `json:"banker"`
	Player DerivedPrediction `json:"player"`
}

// roadCoup is what the roads keep of a coup.
type roadCoup struct {
	no         int
	winner     coup.Side
	point      int
	playerPair bool
	bankerPair bool
	natural    bool
}

// Board is the scoreboard of one shoe. It keeps the results in coup order
// and builds every road from them on Snapshot, so voiding a coup is exactly
// building without it. It is safe for concurrent use.
type Board struct {
	mu    sync.Mutex
	coups []roadCoup
}

// New returns an empty scoreboard.
func New() *Board { return &Board{} }

// Add puts coup number coupNo's result on the roads. Coup numbers must
// increase within a shoe; the result must be a scored coup.
func (rs *Board) Add(coupNo int, r coup.Result) error {
	if err := checkRoadResult(r); err != nil {
		return fmt.Errorf("coup %d: %w", coupNo, err)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if coupNo < 1 {
		return fmt.Errorf("%w: coup %d (coups count from 1)", ErrCoupOrder, coupNo)
	}
	if n := len(rs.coups); n > 0 && coupNo <= rs.coups[n-1].no {
		return fmt.Errorf("%w: coup %d after coup %d", ErrCoupOrder, coupNo, rs.coups[n-1].no)
	}
	if len(rs.coups) >= MaxRoadCoups {
		return fmt.Errorf("%w: coup %d would be result %d (at most %d)", ErrRoadsFull, coupNo, len(rs.coups)+1, MaxRoadCoups)
	}
	rs.coups = append(rs.coups, roadCoup{
		no:         coupNo,
		winner:     r.Winner,
		point:      r.WinningPoint(),
		playerPair: r.PlayerPair,
		bankerPair: r.BankerPair,
		natural:    r.Natural(),
	})
	return nil
}

func checkRoadResult(r coup.Result) error {
	if r.PlayerPoint < 0 || r.PlayerPoint > 9 || r.BankerPoint < 0 || r.BankerPoint > 9 {
		return fmt.Errorf("%w: points %d-%d (each must be 0-9)", ErrBadResult, r.PlayerPoint, r.BankerPoint)
	}
	var want coup.Side
	switch {
	case r.PlayerPoint > r.BankerPoint:
		want = coup.SidePlayer
	case r.BankerPoint > r.PlayerPoint:
		want = coup.SideBanker
	default:
		want = coup.SideTie
	}
	if r.Winner != want {
		return fmt.Errorf("%w: winner %s with points %d-%d", ErrBadResult, r.Winner, r.PlayerPoint, r.BankerPoint)
	}
	return nil
}

// Void takes coup number coupNo off the roads and reports whether it was on
// them (a coup voided before its result never was).
func (rs *Board) Void(coupNo int) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, c := range rs.coups {
		if c.no == coupNo {
			rs.coups = append(rs.coups[:i], rs.coups[i+1:]...)
			return true
		}
	}
	return false
}

// Reset empties the roads for a new shoe.
func (rs *Board) Reset() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.coups = nil
}

// Coups is the number of coups on the roads, ties included.
func (rs *Board) Coups() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.coups)
}

// Snapshot builds the whole scoreboard. The value shares nothing with rs.
func (rs *Board) Snapshot() View {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return buildRoads(rs.coups)
}

// The derived roads by their offset: how many columns left of the new entry
// each one looks.
const (
	offsetBigEyeBoy    = 1
	offsetSmallRoad    = 2
	offsetCockroachPig = 3
)

func buildRoads(coups []roadCoup) View {
	out := View{
		BeadPlate: make([]BeadCell, 0, len(coups)),
		BigRoad:   [][]BigRoadEntry{},
		Grid: Grid{
			BigRoad: []BigRoadCell{},
		},
	}

	// Bead plate and big road in one pass.
	firstTie := 0 // coup of the first leading tie
	for i, c := range coups {
		out.BeadPlate = append(out.BeadPlate, BeadCell{
			Coup: c.no, Col: i / RoadRows, Row: i % RoadRows,
			Result: c.winner, Point: c.point,
			PlayerPair: c.playerPair, BankerPair: c.bankerPair, Natural: c.natural,
		})
		n := len(out.BigRoad)
		if c.winner == coup.SideTie {
			if n == 0 {
				if out.BigRoadLeadingTies == 0 {
					firstTie = c.no
				}
				out.BigRoadLeadingTies++
			} else {
				col := out.BigRoad[n-1]
				col[len(col)-1].Ties++
			}
			continue
		}
		e := BigRoadEntry{Coup: c.no, Result: c.winner, PlayerPair: c.playerPair, BankerPair: c.bankerPair, Point: c.point}
		if n > 0 && out.BigRoad[n-1][0].Result == c.winner {
			out.BigRoad[n-1] = append(out.BigRoad[n-1], e)
		} else {
			out.BigRoad = append(out.BigRoad, []BigRoadEntry{e})
		}
	}

	lens := make([]int, len(out.BigRoad))
	entries := 0
	for i, col := range out.BigRoad {
		lens[i] = len(col)
		entries += len(col)
	}
	pos := layoutRoad(lens)
	out.Grid.BigRoad = make([]BigRoadCell, 0, max(entries, 1))
	i := 0
	for _, col := range out.BigRoad {
		for _, e := range col {
			out.Grid.BigRoad = append(out.Grid.BigRoad, BigRoadCell{Col: pos[i].col, Row: pos[i].row, BigRoadEntry: e})
			i++
		}
	}
	if out.BigRoadLeadingTies > 0 {
		if len(out.Grid.BigRoad) == 0 {
			out.Grid.BigRoad = append(out.Grid.BigRoad, BigRoadCell{BigRoadEntry: BigRoadEntry{Coup: firstTie, Result: coup.SideTie}})
		}
		out.Grid.BigRoad[0].LeadingTies = out.BigRoadLeadingTies
	}

	out.BigEyeBoy = deriveRoad(lens, entries, offsetBigEyeBoy)
	out.SmallRoad = deriveRoad(lens, entries, offsetSmallRoad)
	out.CockroachPig = deriveRoad(lens, entries, offsetCockroachPig)
	out.Grid.BigEyeBoy = layoutDerived(out.BigEyeBoy)
	out.Grid.SmallRoad = layoutDerived(out.SmallRoad)
	out.Grid.CockroachPig = layoutDerived(out.CockroachPig)

	out.Stats = roadStats(coups)

	var last coup.Side
	if n := len(out.BigRoad); n > 0 {
		last = out.BigRoad[n-1][0].Result
	}
	for _, p := range []struct {
		side coup.Side
		to   *DerivedPrediction
	}{{coup.SideBanker, &out.Predict.Banker}, {coup.SidePlayer, &out.Predict.Player}} {
		*p.to = DerivedPrediction{
			BigEyeBoy:    predictMark(lens, last, p.side, offsetBigEyeBoy),
			SmallRoad:    predictMark(lens, last, p.side, offsetSmallRoad),
			CockroachPig: predictMark(lens, last, p.side, offsetCockroachPig),
		}
	}
	return out
}

// markFor is the mark the derived road looking k columns left adds for the
// big road entry at logical column c, row r (both from 0), given the lengths
// of the big road's logical columns (only those left of c are read).
func markFor(lens []int, c, r, k int) Colour {
	// Before the starting point: column k+1's second cell, or column k+2's
	// first (seed 003, counting columns from 1).
	if c < k || (c == k && r == 0) {
		return ColourNone
	}
	if r == 0 {
		// A new column: are the column before it and the one k further left
		// equally long?
		if lens[c-1] == lens[c-1-k] {
			return ColourRed
		}
		return ColourBlue
	}
	// Going down: in column c-k, the cell at row r against the one above it.
	// A column holds one side only, so they differ only when the column
	// ends exactly at row r-1.
	if lens[c-k] == r {
		return ColourBlue
	}
	return ColourRed
}

// deriveRoad is the logical sequence of the derived road looking k columns
// left: one mark per big road entry from its starting point on (of the
// entries on the big road, which size it).
func deriveRoad(lens []int, entries, k int) []Colour {
	out := make([]Colour, 0, entries)
	for c, n := range lens {
		for r := 0; r < n; r++ {
			if m := markFor(lens, c, r, k); m != ColourNone {
				out = append(out, m)
			}
		}
	}
	return out
}

// predictMark is the mark the derived road looking k columns left would add
// if next were the next Banker or Player result, after last.
func predictMark(lens []int, last, next coup.Side, k int) Colour {
	n := len(lens)
	if n == 0 {
		return ColourNone
	}
	if next == last {
		return markFor(lens, n-1, lens[n-1], k)
	}
	return markFor(lens, n, 0, k)
}

type gridPos struct{ col, row int }

// layoutRoad places a road's logical columns, given their lengths, on a grid
// RoadRows deep, returning each entry's cell in order: down the column, then
// right along the row (the dragon tail) once the next cell down is past the
// bottom or taken. A column starts at the top of the grid column right of
// where the previous one started, or the first one further right whose top
// cell no tail has taken.
func layoutRoad(lens []int) []gridPos {
	total := 0
	for _, n := range lens {
		total += n
	}
	out := make([]gridPos, 0, total)
	// A road is never wider than its cells.
	taken := make([][RoadRows]bool, 0, total+1)
	isTaken := func(p gridPos) bool { return p.col < len(taken) && taken[p.col][p.row] }
	take := func(p gridPos) {
		for p.col >= len(taken) {
			taken = append(taken, [RoadRows]bool{})
		}
		taken[p.col][p.row] = true
		out = append(out, p)
	}
	start := -1
	for _, n := range lens {
		p := gridPos{col: start + 1}
		for isTaken(p) {
			p.col++
		}
		start = p.col
		take(p)
		tail := false
		for i := 1; i < n; i++ {
			down := gridPos{p.col, p.row + 1}
			if !tail && down.row < RoadRows && !isTaken(down) {
				p = down
			} else {
				tail = true
				p.col++
			}
			take(p)
		}
	}
	return out
}

// layoutDerived places a derived road's marks: a new column whenever the
// colour changes, laid out like the big road.
func layoutDerived(marks []Colour) []DerivedCell {
	lens := make([]int, 0, len(marks))
	for i, m := range marks {
		if i == 0 || m != marks[i-1] {
			lens = append(lens, 0)
		}
		lens[len(lens)-1]++
	}
	pos := layoutRoad(lens)
	out := make([]DerivedCell, len(marks))
	for i, m := range marks {
		out[i] = DerivedCell{Col: pos[i].col, Row: pos[i].row, Colour: m}
	}
	return out
}

func roadStats(coups []roadCoup) Stats {
	var b, p, t, pp, bp, nat int
	for _, c := range coups {
		switch c.winner {
		case coup.SideBanker:
			b++
		case coup.SidePlayer:
			p++
		case coup.SideTie:
			t++
		}
		if c.playerPair {
			pp++
		}
		if c.bankerPair {
			bp++
		}
		if c.natural {
			nat++
		}
	}
	n := len(coups)
	share := func(k int) StatCount {
		if n == 0 {
			return StatCount{Count: k}
		}
		return StatCount{Count: k, Percent: math.Round(float64(k)*1000/float64(n)) / 10}
	}
	return Stats{
		Coups:       n,
		Banker:      share(b),
		Player:      share(p),
		Tie:         share(t),
		PlayerPairs: share(pp),
		BankerPairs: share(bp),
		Naturals:    share(nat),
	}
}

// clipRoads shortens outside input before it goes into an error message.
func clipRoads(s string) string {
	const max = 16
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
