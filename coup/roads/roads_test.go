package roads

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

var roadsUpdate = flag.Bool("update-roads", false, "rewrite the roads JSON golden files in testdata/roads/")

// roadsResult is a scored-looking result with the given winner, for shoes
// written as B/P/T letters.
func roadsResult(side coup.Side) coup.Result {
	switch side {
	case coup.SideBanker:
		return coup.Result{Winner: side, PlayerPoint: 3, BankerPoint: 7, Margin: 4}
	case coup.SidePlayer:
		return coup.Result{Winner: side, PlayerPoint: 6, BankerPoint: 2, Margin: 4}
	}
	return coup.Result{Winner: coup.SideTie, PlayerPoint: 5, BankerPoint: 5}
}

// roadsCoup is one coup of a test shoe: its number and result.
type roadsCoup struct {
	no int
	r  coup.Result
}

func roadsNumbered(results []coup.Result) []roadsCoup {
	out := make([]roadsCoup, len(results))
	for i, r := range results {
		out[i] = roadsCoup{no: i + 1, r: r}
	}
	return out
}

func roadsBuild(t testing.TB, coups []roadsCoup) *Board {
	t.Helper()
	rs := New()
	for _, c := range coups {
		if err := rs.Add(c.no, c.r); err != nil {
			t.Fatalf("Add(%d): %v", c.no, err)
		}
	}
	return rs
}

// roadsDealShoe deals a shuffled 8-deck shoe through the tableau until the
// cut card, 16 cards from the end, returning every coup's result.
func roadsDealShoe(t testing.TB, rng *rand.Rand) []coup.Result {
	t.Helper()
	cards := make([]coup.Card, 0, 8*coup.CardCount)
	for range 8 {
		for i := range coup.CardCount {
			cards = append(cards, coup.CardAt(i))
		}
	}
	rng.Shuffle(len(cards), func(i, j int) { cards[i], cards[j] = cards[j], cards[i] })
	var out []coup.Result
	for len(cards) > 16 {
		var dealt []coup.Card
		for {
			pos, err := coup.Next(dealt)
			if err != nil {
				t.Fatal(err)
			}
			if pos == coup.Complete {
				break
			}
			dealt = append(dealt, cards[0])
			cards = cards[1:]
		}
		r, err := coup.Score(dealt)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// roadsStreaky is a shoe of n results where a result repeats the last
// Banker-or-Player with probability repeat, and ties come one in ten: high
// repeat gives dragon tails and staircases real shoes rarely deal.
func roadsStreaky(rng *rand.Rand, n int, repeat float64) []coup.Result {
	out := make([]coup.Result, 0, n)
	last := coup.SideBanker
	if rng.IntN(2) == 0 {
		last = coup.SidePlayer
	}
	for range n {
		if rng.IntN(10) == 0 {
			out = append(out, roadsResult(coup.SideTie))
			continue
		}
		if rng.Float64() >= repeat {
			last = coup.SideBanker + coup.SidePlayer - last
		}
		r := roadsResult(last)
		r.PlayerPair = rng.IntN(12) == 0
		r.BankerPair = rng.IntN(12) == 0
		out = append(out, r)
	}
	return out
}

// roadsShoes are the random shoes the property tests run over: real dealt
// shoes, streaky ones and choppy ones.
func roadsShoes(t testing.TB) [][]coup.Result {
	rng := rand.New(rand.NewPCG(2025, 2736))
	var shoes [][]coup.Result
	for range 150 {
		shoes = append(shoes, roadsDealShoe(t, rng))
	}
	for range 150 {
		shoes = append(shoes, roadsStreaky(rng, 40+rng.IntN(60), 0.9))
	}
	for range 50 {
		shoes = append(shoes, roadsStreaky(rng, 40+rng.IntN(60), 0.2))
	}
	return shoes
}

// --- An independent reading of seed 003, for the property tests. ---

// roadsColumns is the big road's logical columns straight from the results:
// a new column whenever the Banker-or-Player winner changes, ties skipped.
func roadsColumns(coups []roadsCoup) [][]coup.Side {
	var cols [][]coup.Side
	for _, c := range coups {
		w := c.r.Winner
		if w == coup.SideTie {
			continue
		}
		if n := len(cols); n > 0 && cols[n-1][0] == w {
			cols[n-1] = append(cols[n-1], w)
		} else {
			cols = append(cols, []coup.Side{w})
		}
	}
	return cols
}

// roadsSeedMarks reads seed 003's rules literally off the big road's cells:
// from the starting point on, a new column compares the lengths of the
// column before it and the one k further left; going down compares, k
// columns left, the cell beside it with the cell above that one (equal,
// including both empty, is red).
func roadsSeedMarks(cols [][]coup.Side, k int) []Colour {
	cell := func(c, r int) coup.Side {
		if c < 0 || c >= len(cols) || r < 0 || r >= len(cols[c]) {
			return 0
		}
		return cols[c][r]
	}
	length := func(c int) int {
		n := 0
		for cell(c, n) != 0 {
			n++
		}
		return n
	}
	// "2nd cell of column k+1; if empty, 1st cell of column k+2" (from 1).
	startC, startR := k, 1
	if cell(k, 1) == 0 {
		startC, startR = k+1, 0
	}
	out := []Colour{}
	started := false
	for c := range cols {
		for r := range cols[c] {
			if c == startC && r == startR {
				started = true
			}
			if !started {
				continue
			}
			var same bool
			if r == 0 {
				same = length(c-1) == length(c-1-k)
			} else {
				same = cell(c-k, r) == cell(c-k, r-1)
			}
			if same {
				out = append(out, ColourRed)
			} else {
				out = append(out, ColourBlue)
			}
		}
	}
	return out
}

// roadsEntriesFromStart counts the big road entries from derived road k's
// starting point on: the marks it must have, one per entry.
func roadsEntriesFromStart(cols [][]coup.Side, k int) int {
	n := 0
	for c, col := range cols {
		for r := range col {
			if c > k || (c == k && r >= 1) {
				n++
			}
		}
	}
	return n
}

func roadsRuns(marks []Colour) []int {
	var lens []int
	for i, m := range marks {
		if i == 0 || m != marks[i-1] {
			lens = append(lens, 0)
		}
		lens[len(lens)-1]++
	}
	return lens
}

// roadsCheckLayout checks a grid against the layout rule, cell by cell:
// six rows, no cell used twice, a column starts on the top row of the first
// grid column right of the previous column's start whose top cell is free,
// goes down while it can, then right along its row for good.
func roadsCheckLayout(t testing.TB, what string, lens []int, cells [][2]int) {
	t.Helper()
	total := 0
	for _, n := range lens {
		total += n
	}
	if len(cells) != total {
		t.Fatalf("%s: %d cells for %d entries", what, len(cells), total)
	}
	taken := map[[2]int]bool{}
	i, prevStart := 0, -1
	for ci, n := range lens {
		turned := false
		for j := range n {
			p := cells[i]
			if p[1] < 0 || p[1] >= RoadRows || p[0] < 0 {
				t.Fatalf("%s: column %d cell %d at %v is off the grid", what, ci, j, p)
			}
			if taken[p] {
				t.Fatalf("%s: column %d cell %d at %v overlaps an earlier cell", what, ci, j, p)
			}
			if j == 0 {
				want := [2]int{prevStart + 1, 0}
				for taken[want] {
					want[0]++
				}
				if p != want {
					t.Fatalf("%s: column %d starts at %v, want %v", what, ci, p, want)
				}
				prevStart = p[0]
			} else {
				q := cells[i-1]
				down := [2]int{q[0], q[1] + 1}
				want := [2]int{q[0] + 1, q[1]}
				if !turned && down[1] < RoadRows && !taken[down] {
					want = down
				} else {
					turned = true
				}
				if p != want {
					t.Fatalf("%s: column %d cell %d at %v, want %v (after %v)", what, ci, j, p, want, q)
				}
			}
			taken[p] = true
			i++
		}
	}
}

// roadsCheck checks a snapshot of the given coups against the independent
// reading: bead plate, big road, the derived roads' marks (one per entry
// from each starting point), every grid, and the stats.
func roadsCheck(t testing.TB, coups []roadsCoup, s View) {
	t.Helper()
	if len(s.BeadPlate) != len(coups) {
		t.Fatalf("bead plate has %d cells for %d coups", len(s.BeadPlate), len(coups))
	}
	for i, c := range coups {
		b := s.BeadPlate[i]
		want := BeadCell{
			Coup: c.no, Col: i / 6, Row: i % 6, Result: c.r.Winner, Point: c.r.WinningPoint(),
			PlayerPair: c.r.PlayerPair, BankerPair: c.r.BankerPair, Natural: c.r.PlayerNatural || c.r.BankerNatural,
		}
		if b != want {
			t.Fatalf("bead %d = %+v, want %+v", i, b, want)
		}
	}

	cols := roadsColumns(coups)
	if len(s.BigRoad) != len(cols) {
		t.Fatalf("big road has %d columns, want %d", len(s.BigRoad), len(cols))
	}
	var entries []BigRoadEntry
	ties := s.BigRoadLeadingTies
	for c, col := range s.BigRoad {
		if len(col) != len(cols[c]) {
			t.Fatalf("big road column %d has %d cells, want %d", c, len(col), len(cols[c]))
		}
		for _, e := range col {
			if e.Result != cols[c][0] {
				t.Fatalf("big road column %d holds %s, want %s", c, e.Result, cols[c][0])
			}
			ties += e.Ties
			entries = append(entries, e)
		}
	}
	wantTies := 0
	for _, c := range coups {
		if c.r.Winner == coup.SideTie {
			wantTies++
		}
	}
	if ties != wantTies {
		t.Fatalf("big road counts %d ties, want %d", ties, wantTies)
	}

	for _, d := range []struct {
		name  string
		k     int
		marks []Colour
		grid  []DerivedCell
	}{
		{"big_eye_boy", 1, s.BigEyeBoy, s.Grid.BigEyeBoy},
		{"small_road", 2, s.SmallRoad, s.Grid.SmallRoad},
		{"cockroach_pig", 3, s.CockroachPig, s.Grid.CockroachPig},
	} {
		if want := roadsEntriesFromStart(cols, d.k); len(d.marks) != want {
			t.Fatalf("%s has %d marks for %d big road entries from its starting point", d.name, len(d.marks), want)
		}
		if want := roadsSeedMarks(cols, d.k); !slices.Equal(d.marks, want) {
			t.Fatalf("%s = %v\nseed 003 reads %v", d.name, d.marks, want)
		}
		cells := make([][2]int, len(d.grid))
		for i, g := range d.grid {
			cells[i] = [2]int{g.Col, g.Row}
			if g.Colour != d.marks[i] {
				t.Fatalf("%s grid cell %d is %s, mark is %s", d.name, i, g.Colour, d.marks[i])
			}
		}
		roadsCheckLayout(t, d.name+" grid", roadsRuns(d.marks), cells)
	}

	grid := s.Grid.BigRoad
	if len(cols) == 0 && s.BigRoadLeadingTies > 0 {
		// Only ties so far: one placeholder cell carries them.
		if len(grid) != 1 || grid[0].Result != coup.SideTie || grid[0].LeadingTies != s.BigRoadLeadingTies || grid[0].Col != 0 || grid[0].Row != 0 {
			t.Fatalf("big road grid with only ties = %+v", grid)
		}
		grid = nil
	}
	lens := make([]int, len(cols))
	for i, c := range cols {
		lens[i] = len(c)
	}
	cells := make([][2]int, len(grid))
	for i, g := range grid {
		cells[i] = [2]int{g.Col, g.Row}
		if g.BigRoadEntry != entries[i] {
			t.Fatalf("big road grid cell %d = %+v, entry is %+v", i, g.BigRoadEntry, entries[i])
		}
		wantLead := 0
		if i == 0 {
			wantLead = s.BigRoadLeadingTies
		}
		if g.LeadingTies != wantLead {
			t.Fatalf("big road grid cell %d has %d leading ties, want %d", i, g.LeadingTies, wantLead)
		}
	}
	roadsCheckLayout(t, "big road grid", lens, cells)

	st := s.Stats
	if st.Coups != len(coups) {
		t.Fatalf("stats count %d coups, want %d", st.Coups, len(coups))
	}
	counts := map[string]int{}
	for _, c := range coups {
		counts[c.r.Winner.String()]++
		if c.r.PlayerPair {
			counts["player_pairs"]++
		}
		if c.r.BankerPair {
			counts["banker_pairs"]++
		}
		if c.r.PlayerNatural || c.r.BankerNatural {
			counts["naturals"]++
		}
	}
	for name, got := range map[string]StatCount{
		"banker": st.Banker, "player": st.Player, "tie": st.Tie,
		"player_pairs": st.PlayerPairs, "banker_pairs": st.BankerPairs, "naturals": st.Naturals,
	} {
		if got.Count != counts[name] {
			t.Fatalf("stats %s count %d, want %d", name, got.Count, counts[name])
		}
		exact := 0.0
		if len(coups) > 0 {
			exact = 100 * float64(got.Count) / float64(len(coups))
		}
		if math.Abs(got.Percent-exact) > 0.05+1e-9 || math.Abs(got.Percent*10-math.Round(got.Percent*10)) > 1e-6 {
			t.Fatalf("stats %s percent %v for %d of %d (%.4f), want it to one decimal", name, got.Percent, got.Count, len(coups), exact)
		}
	}
}

// --- Worked examples, built by hand from seed 003's text. ---

type roadsExample struct {
	coups []roadsCoup
	keys  map[string][]string
}

var roadsExampleKeys = []string{
	"results", "coup", "big_road", "big_eye_boy", "small_road", "cockroach_pig",
	"predict_banker", "predict_player", "big_road_grid", "big_eye_boy_grid",
	"small_road_grid", "cockroach_pig_grid", "stats",
}

func roadsReadExample(t *testing.T, path string) roadsExample {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ex := roadsExample{keys: map[string][]string{}}
	var results []coup.Result
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		key, val, ok := strings.Cut(text, ":")
		if !ok || !slices.Contains(roadsExampleKeys, key) {
			t.Fatalf("%s:%d: want one of %v then a colon: %q", path, line, roadsExampleKeys, text)
		}
		ex.keys[key] = append(ex.keys[key], strings.Fields(val)...)
		switch key {
		case "results":
			for _, ch := range strings.ReplaceAll(val, " ", "") {
				side, ok := map[rune]coup.Side{'B': coup.SideBanker, 'P': coup.SidePlayer, 'T': coup.SideTie}[ch]
				if !ok {
					t.Fatalf("%s:%d: result %q is not B, P or T", path, line, ch)
				}
				results = append(results, roadsResult(side))
			}
		case "coup":
			cards, err := coup.ParseCards(val)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			r, err := coup.Score(cards)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			results = append(results, r)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"big_road", "big_eye_boy", "small_road", "cockroach_pig", "predict_banker", "predict_player"} {
		if _, ok := ex.keys[k]; !ok {
			t.Fatalf("%s: no %s line", path, k)
		}
	}
	ex.coups = roadsNumbered(results)
	return ex
}

// roadsBigRoadText writes the big road in the examples' notation.
func roadsBigRoadText(s View) string {
	var cols []string
	lead := strings.Repeat("t", s.BigRoadLeadingTies)
	for _, col := range s.BigRoad {
		var b strings.Builder
		for _, e := range col {
			b.WriteString(map[coup.Side]string{coup.SideBanker: "B", coup.SidePlayer: "P"}[e.Result])
			b.WriteString(strings.Repeat("t", e.Ties))
		}
		cols = append(cols, b.String())
	}
	if len(cols) == 0 {
		return lead
	}
	cols[0] = lead + cols[0]
	return strings.Join(cols, " ")
}

func roadsColourText(cs []Colour) string {
	var out []string
	for _, c := range cs {
		if c == ColourNone {
			out = append(out, "null")
		} else {
			out = append(out, c.String())
		}
	}
	return strings.Join(out, " ")
}

func TestRoadsWorkedExamples(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "roads", "*.road"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 8 {
		t.Fatalf("found %d worked examples, want the 8 in testdata/roads", len(paths))
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".road"), func(t *testing.T) {
			ex := roadsReadExample(t, path)
			s := roadsBuild(t, ex.coups).Snapshot()
			want := func(key string) string { return strings.Join(ex.keys[key], " ") }

			if got := roadsBigRoadText(s); got != want("big_road") {
				t.Errorf("big road = %q, want %q", got, want("big_road"))
			}
			for _, d := range []struct {
				key   string
				marks []Colour
				grid  []DerivedCell
			}{
				{"big_eye_boy", s.BigEyeBoy, s.Grid.BigEyeBoy},
				{"small_road", s.SmallRoad, s.Grid.SmallRoad},
				{"cockroach_pig", s.CockroachPig, s.Grid.CockroachPig},
			} {
				if got := roadsColourText(d.marks); got != want(d.key) {
					t.Errorf("%s = %q\nwant %q", d.key, got, want(d.key))
				}
				if _, ok := ex.keys[d.key+"_grid"]; ok {
					var cells []string
					for _, g := range d.grid {
						cells = append(cells, fmt.Sprintf("%d,%d", g.Col, g.Row))
					}
					if got := strings.Join(cells, " "); got != want(d.key+"_grid") {
						t.Errorf("%s grid = %q\nwant %q", d.key, got, want(d.key+"_grid"))
					}
				}
			}
			if _, ok := ex.keys["big_road_grid"]; ok {
				var cells []string
				for _, g := range s.Grid.BigRoad {
					cells = append(cells, fmt.Sprintf("%d,%d", g.Col, g.Row))
				}
				if got := strings.Join(cells, " "); got != want("big_road_grid") {
					t.Errorf("big road grid = %q\nwant %q", got, want("big_road_grid"))
				}
			}
			for key, p := range map[string]DerivedPrediction{"predict_banker": s.Predict.Banker, "predict_player": s.Predict.Player} {
				got := roadsColourText([]Colour{p.BigEyeBoy, p.SmallRoad, p.CockroachPig})
				if got != want(key) {
					t.Errorf("%s = %q, want %q", key, got, want(key))
				}
			}
			stats := map[string]int{
				"coups": s.Stats.Coups, "banker": s.Stats.Banker.Count, "player": s.Stats.Player.Count,
				"tie": s.Stats.Tie.Count, "player_pairs": s.Stats.PlayerPairs.Count,
				"banker_pairs": s.Stats.BankerPairs.Count, "naturals": s.Stats.Naturals.Count,
			}
			for _, kv := range ex.keys["stats"] {
				name, v, _ := strings.Cut(kv, "=")
				n, err := strconv.Atoi(v)
				got, ok := stats[name]
				if err != nil || !ok {
					t.Fatalf("bad stats entry %q", kv)
				}
				if got != n {
					t.Errorf("stats %s = %d, want %d", name, got, n)
				}
			}
			// The hand-built examples obey the properties too.
			roadsCheck(t, ex.coups, s)
		})
	}
}

// TestRoadsJSONGolden pins the public/roads payload for the worked examples.
func TestRoadsJSONGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "roads", "*.road"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".road"), func(t *testing.T) {
			ex := roadsReadExample(t, path)
			s := roadsBuild(t, ex.coups).Snapshot()
			got, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(path, ".road") + ".json"
			if *roadsUpdate {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the golden file (go test -update-roads to accept a deliberate format change)\ngot:\n%s", golden, got)
			}
			var back View
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("the payload does not read back: %v", err)
			}
			if !reflect.DeepEqual(back, s) {
				t.Errorf("the payload reads back as\n%+v\nwant\n%+v", back, s)
			}
		})
	}
}

func TestRoadsEmptyJSON(t *testing.T) {
	got, err := json.Marshal(New().Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"bead_plate":[],"big_road":[],"big_road_leading_ties":0,` +
		`"big_eye_boy":[],"small_road":[],"cockroach_pig":[],` +
		`"grid":{"big_road":[],"big_eye_boy":[],"small_road":[],"cockroach_pig":[]},` +
		`"stats":{"coups":0,"banker":{"count":0,"percent":0},"player":{"count":0,"percent":0},` +
		`"tie":{"count":0,"percent":0},"player_pairs":{"count":0,"percent":0},` +
		`"banker_pairs":{"count":0,"percent":0},"naturals":{"count":0,"percent":0}},` +
		`"predict":{"banker":{"big_eye_boy":null,"small_road":null,"cockroach_pig":null},` +
		`"player":{"big_eye_boy":null,"small_road":null,"cockroach_pig":null}}}`
	if string(got) != want {
		t.Errorf("empty roads =\n%s\nwant\n%s", got, want)
	}
}

// --- Properties over many random shoes. ---

// TestRoadsPropertyShoes builds every prefix of every shoe and checks it
// against the independent reading; and that each result changes the roads
// only by what it causes: a tie adds no mark and changes no prediction, a
// Banker or Player result adds at most one mark per derived road, at the
// end, and exactly the mark the previous snapshot predicted for it.
func TestRoadsPropertyShoes(t *testing.T) {
	for n, results := range roadsShoes(t) {
		coups := roadsNumbered(results)
		rs := New()
		prev := rs.Snapshot()
		for i, c := range coups {
			if err := rs.Add(c.no, c.r); err != nil {
				t.Fatal(err)
			}
			cur := rs.Snapshot()
			roadsCheck(t, coups[:i+1], cur)
			for _, d := range []struct {
				name      string
				old, new  []Colour
				predicted Colour
			}{
				{"big_eye_boy", prev.BigEyeBoy, cur.BigEyeBoy, roadsPredicted(prev, c.r.Winner).BigEyeBoy},
				{"small_road", prev.SmallRoad, cur.SmallRoad, roadsPredicted(prev, c.r.Winner).SmallRoad},
				{"cockroach_pig", prev.CockroachPig, cur.CockroachPig, roadsPredicted(prev, c.r.Winner).CockroachPig},
			} {
				if len(d.new) < len(d.old) || !slices.Equal(d.new[:len(d.old)], d.old) {
					t.Fatalf("shoe %d coup %d (%s): %s changed its past marks: %v -> %v", n, c.no, c.r.Winner, d.name, d.old, d.new)
				}
				added := d.new[len(d.old):]
				switch {
				case c.r.Winner == coup.SideTie && len(added) != 0:
					t.Fatalf("shoe %d coup %d: a tie added %v to %s", n, c.no, added, d.name)
				case len(added) > 1:
					t.Fatalf("shoe %d coup %d: one result added %v to %s", n, c.no, added, d.name)
				case c.r.Winner != coup.SideTie:
					got := ColourNone
					if len(added) == 1 {
						got = added[0]
					}
					if got != d.predicted {
						t.Fatalf("shoe %d coup %d: %s predicted %s for %s, the road added %s", n, c.no, d.name, d.predicted, c.r.Winner, got)
					}
				}
			}
			if c.r.Winner == coup.SideTie && cur.Predict != prev.Predict {
				t.Fatalf("shoe %d coup %d: a tie changed the predictions from %+v to %+v", n, c.no, prev.Predict, cur.Predict)
			}
			prev = cur
		}
	}
}

func roadsPredicted(s View, side coup.Side) DerivedPrediction {
	if side == coup.SidePlayer {
		return s.Predict.Player
	}
	return s.Predict.Banker
}

// TestRoadsPropertyPredictions checks both predictions at every point of
// every shoe against a road built with that result actually next.
func TestRoadsPropertyPredictions(t *testing.T) {
	for n, results := range roadsShoes(t) {
		coups := roadsNumbered(results)
		for i := 0; i <= len(coups); i += 1 + i%3 {
			s := roadsBuild(t, coups[:i]).Snapshot()
			for _, side := range []coup.Side{coup.SideBanker, coup.SidePlayer} {
				next := append(slices.Clone(coups[:i]), roadsCoup{no: i + 1, r: roadsResult(side)})
				after := roadsBuild(t, next).Snapshot()
				pred := roadsPredicted(s, side)
				for _, d := range []struct {
					name          string
					before, after []Colour
					predicted     Colour
				}{
					{"big_eye_boy", s.BigEyeBoy, after.BigEyeBoy, pred.BigEyeBoy},
					{"small_road", s.SmallRoad, after.SmallRoad, pred.SmallRoad},
					{"cockroach_pig", s.CockroachPig, after.CockroachPig, pred.CockroachPig},
				} {
					want := ColourNone
					if len(d.after) == len(d.before)+1 {
						want = d.after[len(d.after)-1]
					} else if len(d.after) != len(d.before) {
						t.Fatalf("shoe %d after %d coups: %s grew from %d to %d marks on one result", n, i, d.name, len(d.before), len(d.after))
					}
					if d.predicted != want {
						t.Fatalf("shoe %d after %d coups: %s predicts %s for %s, the road adds %s", n, i, d.name, d.predicted, side, want)
					}
				}
			}
		}
	}
}

// TestRoadsPropertyVoid voids random coups of every shoe, one by one, and
// compares each time with the roads built from the coups left.
func TestRoadsPropertyVoid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 2736))
	for n, results := range roadsShoes(t) {
		coups := roadsNumbered(results)
		rs := roadsBuild(t, coups)
		left := slices.Clone(coups)
		for range 1 + rng.IntN(6) {
			if len(left) == 0 {
				break
			}
			i := rng.IntN(len(left))
			if !rs.Void(left[i].no) {
				t.Fatalf("shoe %d: Void(%d) found nothing", n, left[i].no)
			}
			if rs.Void(left[i].no) {
				t.Fatalf("shoe %d: coup %d voided twice", n, left[i].no)
			}
			left = slices.Delete(left, i, i+1)
			got := rs.Snapshot()
			if want := roadsBuild(t, left).Snapshot(); !reflect.DeepEqual(got, want) {
				t.Fatalf("shoe %d: voiding differs from building without the coup\ngot  %+v\nwant %+v", n, got, want)
			}
			roadsCheck(t, left, got)
		}
		if rs.Void(len(coups) + 1) {
			t.Fatalf("shoe %d: voided a coup that never was", n)
		}
	}
}

// FuzzRoads builds roads from any sequence of results and voids, and checks
// them against the independent reading.
func FuzzRoads(f *testing.F) {
	f.Add([]byte("BPBPBPB"))
	f.Add([]byte("TTBTPPTTTB"))
	f.Add([]byte("BBBBBBBPPPPPPBBBBBPPPPBBBPPBP"))
	f.Add([]byte{0, 1, 2, 0x80, 1, 1, 0x81, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxRoadCoups {
			data = data[:MaxRoadCoups]
		}
		var coups []roadsCoup
		rs := New()
		for i, b := range data {
			side := []coup.Side{coup.SideBanker, coup.SidePlayer, coup.SideTie}[int(b&0x7f)%3]
			c := roadsCoup{no: i + 1, r: roadsResult(side)}
			if err := rs.Add(c.no, c.r); err != nil {
				t.Fatal(err)
			}
			coups = append(coups, c)
			if b&0x80 != 0 && len(coups) > 1 {
				// Void an earlier coup chosen by the byte.
				j := int(b&0x7f) % len(coups)
				if !rs.Void(coups[j].no) {
					t.Fatalf("Void(%d) found nothing", coups[j].no)
				}
				coups = slices.Delete(coups, j, j+1)
			}
		}
		s := rs.Snapshot()
		roadsCheck(t, coups, s)
		if want := roadsBuild(t, coups).Snapshot(); !reflect.DeepEqual(s, want) {
			t.Fatalf("voids differ from building without them")
		}
	})
}

// --- The API's edges. ---

func TestRoadsAddRefuses(t *testing.T) {
	good := roadsResult(coup.SideBanker)
	tests := []struct {
		name string
		no   int
		r    coup.Result
		want error
	}{
		{"coup zero", 0, good, ErrCoupOrder},
		{"repeated coup", 3, good, ErrCoupOrder},
		{"earlier coup", 2, good, ErrCoupOrder},
		{"no winner", 4, coup.Result{PlayerPoint: 3, BankerPoint: 7}, ErrBadResult},
		{"winner against the points", 4, coup.Result{Winner: coup.SidePlayer, PlayerPoint: 3, BankerPoint: 7}, ErrBadResult},
		{"tie with different points", 4, coup.Result{Winner: coup.SideTie, PlayerPoint: 3, BankerPoint: 7}, ErrBadResult},
		{"point over nine", 4, coup.Result{Winner: coup.SideBanker, PlayerPoint: 3, BankerPoint: 12}, ErrBadResult},
		{"negative point", 4, coup.Result{Winner: coup.SideBanker, PlayerPoint: -1, BankerPoint: 7}, ErrBadResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := New()
			if err := rs.Add(3, good); err != nil {
				t.Fatal(err)
			}
			before := rs.Snapshot()
			err := rs.Add(tt.no, tt.r)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Add(%d, %+v) = %v, want %v", tt.no, tt.r, err, tt.want)
			}
			if !strings.Contains(err.Error(), "coup") {
				t.Errorf("error %q does not say which coup", err)
			}
			if after := rs.Snapshot(); !reflect.DeepEqual(after, before) {
				t.Errorf("a refused Add changed the roads")
			}
		})
	}
}

func TestRoadsFull(t *testing.T) {
	rs := New()
	for i := 1; i <= MaxRoadCoups; i++ {
		if err := rs.Add(i, roadsResult(coup.SideTie)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.Add(MaxRoadCoups+1, roadsResult(coup.SideTie)); !errors.Is(err, ErrRoadsFull) {
		t.Fatalf("coup %d = %v, want ErrRoadsFull", MaxRoadCoups+1, err)
	}
	if rs.Coups() != MaxRoadCoups {
		t.Fatalf("Coups() = %d, want %d", rs.Coups(), MaxRoadCoups)
	}
}

func TestRoadsReset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	rs := roadsBuild(t, roadsNumbered(roadsDealShoe(t, rng)))
	rs.Reset()
	if !reflect.DeepEqual(rs.Snapshot(), New().Snapshot()) {
		t.Fatal("Reset left something on the roads")
	}
	// A new shoe numbers its coups from 1 again.
	if err := rs.Add(1, roadsResult(coup.SidePlayer)); err != nil {
		t.Fatalf("first coup of the new shoe: %v", err)
	}
}

func TestRoadsSnapshotSharesNothing(t *testing.T) {
	rs := roadsBuild(t, roadsNumbered([]coup.Result{roadsResult(coup.SideBanker), roadsResult(coup.SideBanker), roadsResult(coup.SidePlayer)}))
	s := rs.Snapshot()
	s.BigRoad[0][0].Ties = 9
	s.BeadPlate[0].Point = 9
	s.Grid.BigRoad[0].Ties = 9
	if again := rs.Snapshot(); again.BigRoad[0][0].Ties != 0 || again.BeadPlate[0].Point != 7 || again.Grid.BigRoad[0].Ties != 0 {
		t.Fatal("changing a snapshot changed the roads")
	}
}

func TestColourJSON(t *testing.T) {
	for _, tt := range []struct {
		c    Colour
		json string
	}{{ColourNone, "null"}, {ColourRed, `"red"`}, {ColourBlue, `"blue"`}} {
		b, err := json.Marshal(tt.c)
		if err != nil || string(b) != tt.json {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tt.c, b, err, tt.json)
		}
		var back Colour = 7
		if err := json.Unmarshal([]byte(tt.json), &back); err != nil || back != tt.c {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", tt.json, back, err, tt.c)
		}
	}
	if _, err := json.Marshal(Colour(7)); err == nil {
		t.Error("Marshal(colour 7) succeeded")
	}
	for _, bad := range []string{`"green"`, `1`, `"RED"`, `""`} {
		var c Colour
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}

// TestRoadsConcurrent publishes while results arrive; run under -race.
func TestRoadsConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	coups := roadsNumbered(roadsDealShoe(t, rng))
	rs := New()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := json.Marshal(rs.Snapshot()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for _, c := range coups {
		if err := rs.Add(c.no, c.r); err != nil {
			t.Error(err)
		}
	}
	rs.Void(coups[0].no)
	close(done)
	wg.Wait()
	roadsCheck(t, coups[1:], rs.Snapshot())
}

// BenchmarkRoadsShoe puts a whole dealt shoe on the roads, taking a snapshot
// after every result as the publisher does.
func BenchmarkRoadsShoe(b *testing.B) {
	coups := roadsNumbered(roadsDealShoe(b, rand.New(rand.NewPCG(5, 5))))
	b.ReportMetric(float64(len(coups)), "coups/shoe")
	b.ReportAllocs()
	for b.Loop() {
		rs := New()
		for _, c := range coups {
			if err := rs.Add(c.no, c.r); err != nil {
				b.Fatal(err)
			}
			_ = rs.Snapshot()
		}
	}
}

// BenchmarkRoadsShoeJSON is BenchmarkRoadsShoe with each snapshot encoded
// for public/roads.
func BenchmarkRoadsShoeJSON(b *testing.B) {
	coups := roadsNumbered(roadsDealShoe(b, rand.New(rand.NewPCG(5, 5))))
	b.ReportAllocs()
	for b.Loop() {
		rs := New()
		for _, c := range coups {
			if err := rs.Add(c.no, c.r); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(rs.Snapshot()); err != nil {
				b.Fatal(err)
			}
		}
	}
}
