package floor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
)

// dealer makes the rows a table sends as it deals shoes: each card an
// in.card row with a card_dealt row after it.
type dealer struct {
	table string
	seq   int64
	shoe  int64
}

func (d *dealer) shoeRows(cards []coup.Card) []item {
	d.shoe++
	var out []item
	for _, c := range cards {
		out = append(out, d.cardRow(c)...)
	}
	return out
}

func (d *dealer) cardRow(c coup.Card) []item {
	body, _ := json.Marshal(coup.Input{Kind: coup.InCard, Card: &c})
	d.seq += 2
	return []item{
		{table: d.table, row: &Row{Table: d.table, Seq: d.seq - 1, Kind: string(coup.InCard), Shoe: d.shoe, Body: body}},
		{table: d.table, row: &Row{Table: d.table, Seq: d.seq, Kind: string(coup.EvCardDealt), Shoe: d.shoe, Body: []byte(`{}`)}},
	}
}

func fairShoe(r *rand.Rand) []coup.Card {
	var cards []coup.Card
	for range 8 {
		for i := range coup.CardCount {
			cards = append(cards, coup.CardAt(i))
		}
	}
	r.Shuffle(len(cards), func(i, j int) { cards[i], cards[j] = cards[j], cards[i] })
	return cards[:400]
}

// takeAll gives rows to the watch in batches, as they come from the
// stream, and returns the alerts raised with the card of the shoe (from
// 1) each names.
func takeAll(t *testing.T, w *shoeWatch, s Store, items []item) (raised []Alert, at []int) {
	t.Helper()
	card := map[int64]int{}
	for _, it := range items {
		if it.row.Kind == string(coup.InCard) {
			card[it.row.Seq] = len(card) + 1
		}
	}
	for len(items) > 0 {
		n := min(len(items), 60)
		for _, a := range w.take(context.Background(), items[:n], s) {
			if a.State == "raised" {
				raised, at = append(raised, a), append(at, card[a.Seq])
			}
		}
		items = items[n:]
	}
	return raised, at
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestShoeWatch: a shoe one table dealt, dealt again at another table cut
// elsewhere, or its discards put back in reverse, raises shuffle_suspect
// on the floor within a run of coup.RepeatRun cards; fair shoes raise
// nothing; a second witness on the same database, and one that takes a
// table over mid-shoe, know the shoes the first one witnessed; a table's
// next shoe resolves its alert.
func TestShoeWatch(t *testing.T) { eachStore(t, testShoeWatch) }

func testShoeWatch(t *testing.T, s Store) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC))
	w1, err := newShoeWatch(ctx, s, 0, clk, quietLogger(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(33, 1))
	tables := []*dealer{{table: "BAC-01"}, {table: "BAC-02"}, {table: "BAC-03"}, {table: "BAC-04"}}
	// Fair shoes at every table, the first table's last one remembered.
	var moved []coup.Card
	for range 8 {
		for _, d := range tables {
			shoe := fairShoe(r)
			if d.table == "BAC-01" {
				moved = shoe
			}
			if a, _ := takeAll(t, w1, s, d.shoeRows(shoe)); len(a) > 0 {
				t.Fatalf("a fair shoe at %s raised %+v", d.table, a)
			}
			clk.Advance(30 * time.Minute)
		}
	}
	need := coup.RepeatRun(w1.index.Cards(), shoeAlpha)
	t.Logf("%d shoes of %d cards kept: a run of %d", w1.index.Len(), w1.index.Cards(), need)
	if need < coup.RepeatRunLen || need > 15 {
		t.Fatalf("a run of %d cards", need)
	}
	// BAC-02 deals BAC-01's shoe cut 123 on.
	cut := append(slices.Clone(moved[123:]), moved[:123]...)
	a, at := takeAll(t, w1, s, tables[1].shoeRows(cut))
	if len(a) != 1 || at[0] != need || a[0].Kind != AlertShuffleSuspect || a[0].Tamper ||
		!strings.Contains(a[0].Message, "shoe 9 of BAC-02: its cards 1 to") || !strings.Contains(a[0].Message, "of shoe 8 of table BAC-01") ||
		!strings.Contains(a[0].Message, "its cards 124 to") {
		t.Fatalf("the moved shoe raised %+v at cards %v; want one shuffle_suspect at card %d", a, at, need)
	}
	// A second witness, started now, on the same database: BAC-03 deals
	// the discards of BAC-01's shoe back in reverse.
	w2, err := newShoeWatch(ctx, s, 0, clk, quietLogger(), "w2")
	if err != nil {
		t.Fatal(err)
	}
	back := slices.Clone(moved[:380])
	slices.Reverse(back)
	a, at = takeAll(t, w2, s, tables[2].shoeRows(back))
	if len(a) != 1 || at[0] != need || !strings.Contains(a[0].Message, "in reverse order") {
		t.Fatalf("the reversed shoe at another witness raised %+v at cards %v", a, at)
	}
	// BAC-04 deals the moved shoe's first 60 cards cut 7 on through w1,
	// the run cut short after 5 cards; then w2 takes the table over and
	// the run goes on: caught where it would have been.
	rows := tables[3].shoeRows(append(slices.Clone(moved[7:]), moved[:7]...))
	if a, _ := takeAll(t, w1, s, rows[:10]); len(a) != 0 {
		t.Fatalf("raised on 5 cards: %+v", a)
	}
	clk.Advance(shoeRefresh)
	a, at = takeAll(t, w2, s, rows[10:])
	if len(a) != 1 || at[0]+5 != need {
		t.Fatalf("taken over mid-shoe: %+v at cards %v (after 5), want card %d", a, at, need)
	}
	// BAC-02's next shoe resolves its alert.
	got := w1.take(ctx, tables[1].shoeRows(fairShoe(r)[:1]), s)
	if len(got) != 1 || got[0].State != "resolved" || got[0].Kind != AlertShuffleSuspect || got[0].Table != "BAC-02" {
		t.Fatalf("the next shoe at BAC-02: %+v", got)
	}
	// A week later the shoes are gone: the moved shoe raises nothing.
	clk.Advance(DefaultShoeKeep + shoePrune)
	if a, _ := takeAll(t, w1, s, tables[1].shoeRows(cut)); len(a) != 0 {
		t.Fatalf("a shoe older than the watch keeps raised %+v", a)
	}
}
